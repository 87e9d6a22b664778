"""Path resolution: every path is judged by where it really lands.

``resolve_path`` expands ``~``, anchors relative paths at the root (or an explicit base),
follows symlinks and classifies the result as inside or outside the root. No path is
rejected on syntax: ``..`` escapes are simply outside, and a missing tail resolves
lexically. The ACL (``policy.py``) judges the result; the session enforces it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ResolvedPath", "is_proc_magic", "relative_to_root", "resolve_path"]

# /proc/self, /proc/thread-self and /proc/<pid> hold magic links (fd/N, root, cwd, exe) whose
# target is not the text readlink reports, and environ files holding this process's secrets.
_PROC_MAGIC = re.compile(r"^/proc/(self|thread-self|\d+)(/|$)")


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """A path after resolution: ``path`` is absolute with every symlink followed.

    ``rel`` is the POSIX path relative to the root (``"."`` for the root itself) when the
    path lands inside the root, ``None`` when it lands outside.
    """

    path: Path
    rel: str | None

    @property
    def inside(self) -> bool:
        """Whether the path lands inside the workspace root."""
        return self.rel is not None


def resolve_path(
    path: str | os.PathLike[str], root: Path, *, base: Path | None = None
) -> ResolvedPath:
    """Resolve ``path`` (``~`` expanded, relative to ``base`` or ``root``, symlinks followed).

    ``root`` must already be resolved (``Path.resolve()``).
    """
    raw = os.path.expanduser(os.fspath(path))
    if not os.path.isabs(raw):
        raw = os.path.join(base if base is not None else root, raw)
    real = os.path.realpath(raw)
    return ResolvedPath(Path(real), _relative(real, str(root)))


def relative_to_root(real: Path, root: Path) -> str | None:
    """``real`` relative to ``root`` as a POSIX string, or ``None`` when outside."""
    return _relative(str(real), str(root))


def _relative(real: str, root: str) -> str | None:
    if real == root:
        return "."
    prefix = root if root.endswith(os.sep) else root + os.sep
    if real.startswith(prefix):
        return real[len(prefix) :].replace(os.sep, "/")
    return None


def is_proc_magic(path: Path) -> bool:
    """Whether ``path`` lies in a per-process ``/proc`` directory (magic links, environ)."""
    return _PROC_MAGIC.match(path.as_posix()) is not None
