"""``BubblewrapExecutor``: run workspace commands inside a bubblewrap sandbox.

The sandbox is derived from the ``WorkspacePolicy`` the session enforces, and runs after
the policy and approval gates (it decides how a command runs, never whether):

- the host root is mounted read-only; ``/tmp`` is a private tmpfs; the workspace root is
  bound read-write when writes inside are not denied, and absolute ``writable`` grants
  are bound read-write; paths whose writes ask or are denied (``.git/hooks`` in coding
  mode) are re-bound read-only;
- denied paths (``denied_paths``, deny rules for reads and secret files not in
  ``allow_secrets``) are hidden: a tmpfs over a directory, ``/dev/null`` over a file.
  Relative and bare patterns are expanded inside the root (bare patterns are not searched
  for outside it, secrets only in the home directory and ``~/.ssh``); absolute ones with
  ``glob``;
- no network unless the executor was built with ``allow_network=True``; without it,
  ``/run`` and ``/var/run`` are private tmpfs too, since host daemons' Unix sockets there
  (databases, docker, dbus) stay connectable through a read-only mount;
- its own PID namespace with a fresh ``/proc``, a new session, a new user namespace and
  every capability dropped: a root launcher would otherwise leave the command able to
  remount ``/`` read-write;
- bwrap itself is launched with the command's minimal environment, so even
  ``/proc/1/environ`` inside shows nothing else.

Killing works through the PID namespace: the session kills bwrap's process group;
``--die-with-parent`` then kills the namespace's init, and the kernel kills every process
in the namespace, including children that called ``setsid``.

Linux only; needs the ``bwrap`` binary (Debian/Ubuntu package ``bubblewrap``).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from lovia.exceptions import UserError

from . import _shell
from .errors import WorkspaceError
from .paths import relative_to_root
from .policy import WorkspacePolicy
from .results import CommandResult

__all__ = ["BubblewrapExecutor"]

_MAX_SCAN_DIRS = 20_000  # bound the walk that expands bare denied patterns in the root
_SOCKET_DIRS = ("/run", "/var/run")


class BubblewrapExecutor:
    """A ``ShellExecutor`` (and ``SandboxLauncher``) backed by bubblewrap.

    The network is cut unless ``allow_network=True``. ``bwrap`` is the binary (default:
    found on PATH). Raises ``UserError`` when bwrap is missing, with the install hint.
    """

    def __init__(
        self,
        *,
        allow_network: bool = False,
        bwrap: str | None = None,
        max_output_chars: int = 30_000,
    ) -> None:
        found = bwrap or shutil.which("bwrap")
        if found is None:
            raise UserError(
                "bubblewrap (bwrap) is not installed",
                hint="install it: apt-get install bubblewrap (Debian/Ubuntu)",
            )
        self.bwrap = found
        self.allow_network = allow_network
        self.max_output_chars = max_output_chars

    def launch_argv(
        self, command: str, *, cwd: str, policy: WorkspacePolicy, root: Path
    ) -> list[str]:
        """The bwrap argv that runs ``command`` with ``/bin/sh`` in the derived sandbox."""
        argv = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--unshare-user",
            "--cap-drop",
            "ALL",
        ]
        if not self.allow_network:
            argv.append("--unshare-net")
        argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        if not self.allow_network:
            # A read-only mount still lets a process connect() to a Unix socket on it, and
            # host daemons (databases, docker, dbus) listen in these directories.
            for sockets in _SOCKET_DIRS:
                if os.path.isdir(sockets) and not os.path.islink(sockets):
                    argv += ["--tmpfs", sockets]
        argv += _bind(root, writable=policy.write != "deny")
        for rule in policy.path_rules:
            if rule.action == "allow" and rule.pattern.startswith(("/", "~")):
                for path in _expand(rule.pattern, root):
                    if "write" in rule.ops or not path.is_relative_to(root):
                        argv += _bind(path, writable="write" in rule.ops)
        for rule in policy.path_rules:
            if rule.action != "allow" and "write" in rule.ops:
                for path in _expand(rule.pattern, root):
                    argv += _bind(path, writable=False)
        hidden = list(policy.denied_paths)
        hidden += [r.pattern for r in policy.path_rules if r.action == "deny" and "read" in r.ops]
        bare = [p.strip() for p in hidden if p.strip() and not _has_slash_or_home(p)]
        paths = {path for p in hidden if p.strip() not in bare for path in _expand(p, root)}
        paths |= {Path(os.path.realpath(p)) for p in _scan(root, bare, policy)}
        paths |= _home_secrets(policy)
        for path in sorted(paths):
            if path.is_dir():
                argv += ["--tmpfs", str(path)]
            else:
                argv += ["--ro-bind", "/dev/null", str(path)]
        argv += ["--chdir", cwd, "--", "/bin/sh", "-c", command]
        return argv

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        timeout: float | None,
        policy: WorkspacePolicy,
        root: Path,
    ) -> CommandResult:
        """Run ``command`` in the sandbox; a timeout kills the whole PID namespace."""
        argv = self.launch_argv(command, cwd=cwd, policy=policy, root=root)
        return await _shell.run(
            argv, command=command, cwd=cwd, env=env, timeout=timeout,
            max_chars=self.max_output_chars,
        )  # fmt: skip


def _bind(path: Path, *, writable: bool) -> list[str]:
    if not path.exists():
        return []
    return ["--bind" if writable else "--ro-bind", str(path), str(path)]


def _expand(pattern: str, root: Path) -> list[Path]:
    """Existing paths a policy pattern names (resolved, deduplicated, sorted)."""
    pattern = pattern.strip()
    if not pattern:
        return []
    if pattern.startswith(("/", "~")):
        found = glob.glob(os.path.expanduser(pattern))
    elif "/" in pattern:
        relative = pattern[2:] if pattern.startswith("./") else pattern
        found = glob.glob(str(root / relative.rstrip("/")))
    else:
        found = [str(p) for p in _scan(root, [pattern])]
    return sorted({Path(os.path.realpath(p)) for p in found})


def _has_slash_or_home(pattern: str) -> bool:
    return "/" in pattern or pattern.strip().startswith("~")


def _home_secrets(policy: WorkspacePolicy) -> set[Path]:
    """Secret files where tools keep them: in the home directory and ``~/.ssh``."""
    found: set[Path] = set()
    for pattern in policy.secret_paths:
        for where in ("~", "~/.ssh"):
            for hit in glob.glob(os.path.join(os.path.expanduser(where), pattern.strip())):
                path = Path(os.path.realpath(hit))
                if policy.is_secret(None, path):
                    found.add(path)
    return found


def _scan(root: Path, bare: list[str], secrets: WorkspacePolicy | None = None) -> Iterator[Path]:
    """Entries under ``root`` a bare pattern names, or that are secret files under the
    ``secrets`` policy (matched directories are not entered).

    Raises ``WorkspaceError`` rather than run with a denied path left visible when the
    tree is too big to scan.
    """
    patterns = secrets.secret_paths if secrets is not None else ()
    if not bare and not patterns:
        return
    # A cheap filter on the name first: a secret's last segment matches a pattern's last one.
    names = [p.strip().rstrip("/").rsplit("/", 1)[-1] for p in patterns]
    maybe_secret = re.compile("|".join(fnmatch.translate(n) for n in names if n) or "(?!)", re.I)
    stack, visited = [root], 0
    while stack:
        if visited == _MAX_SCAN_DIRS:
            raise WorkspaceError(
                f"the workspace has over {_MAX_SCAN_DIRS} directories; the sandbox cannot "
                "find every path a bare denied pattern or a secret pattern names",
                hint="use workspace-relative (a/b) or absolute denied patterns, "
                "WorkspacePolicy(secret_paths=...) with absolute patterns, or a smaller root",
            )
        current = stack.pop()
        visited += 1
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            full = Path(entry.path)
            if any(fnmatch.fnmatchcase(entry.name, p) for p in bare) or (
                secrets is not None
                and maybe_secret.match(entry.name)
                and secrets.is_secret(relative_to_root(full, root), full)
            ):
                yield full
            elif entry.is_dir(follow_symlinks=False):
                stack.append(full)
