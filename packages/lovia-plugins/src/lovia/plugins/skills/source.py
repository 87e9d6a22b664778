"""Where skills come from: the ``SkillSource`` seam and ``DirectorySkillSource``.

A directory source is *live*: every ``list_skills()`` re-scans its roots and every
``load_skill()`` re-reads the file, so edits show up without a restart. Each immediate
subdirectory of a root holding a ``SKILL.md`` is one skill; with several roots (and within
one root, in sorted order) the first skill of a name wins. A broken skill is skipped with a
warning and never blocks the others; a missing root warns once per source.

Skill files are read directly, not through a workspace: skills are configuration the
developer installed, so the workspace ACL does not apply to them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from .format import Skill, SkillsError, parse_skill

__all__ = ["DirectorySkillSource", "SkillNotFoundError", "SkillSource", "read_text"]

_log = logging.getLogger("lovia.plugins.skills")

SKILL_FILE = "SKILL.md"
MAX_SKILL_CHARS = 200_000
"""A ``SKILL.md`` is read up to this many characters; the rest never reaches memory."""


class SkillNotFoundError(SkillsError):
    """No visible skill has this name; ``available`` lists the names that do exist."""

    def __init__(self, skill_name: str, available: Sequence[str]) -> None:
        names = ", ".join(available) if available else "(none)"
        super().__init__(
            f"no skill named {skill_name!r}",
            skill_name=skill_name,
            hint=f"available skills: {names}",
        )
        self.available = tuple(available)


@runtime_checkable
class SkillSource(Protocol):
    """Lists and loads skills. Both calls are blocking; the catalog runs them off-loop."""

    def list_skills(self) -> list[Skill]: ...

    def load_skill(self, name: str) -> Skill:
        """The skill named ``name``; raises ``SkillNotFoundError`` when there is none."""
        ...


def read_text(path: Path, limit: int) -> tuple[str, bool]:
    """Up to ``limit`` characters of a UTF-8 file, and whether it was longer.

    Raises ``UnicodeDecodeError`` for a file that is not UTF-8 text and ``ValueError`` for
    one holding NUL bytes (binary). Text mode decodes incrementally, so a huge file costs
    only what is read.
    """
    with path.open(encoding="utf-8", newline="") as f:
        text = f.read(limit + 1)
    if "\x00" in text:
        raise ValueError("binary file")
    return text[:limit], len(text) > limit


class DirectorySkillSource:
    """Skills from one or more directories of ``<name>/SKILL.md`` folders."""

    def __init__(self, *roots: str | os.PathLike[str]) -> None:
        self.roots = tuple(Path(r).expanduser() for r in roots)
        self._located: dict[str, Path] = {}
        self._warned: set[Path] = set()

    def __repr__(self) -> str:
        return f"DirectorySkillSource({', '.join(repr(str(r)) for r in self.roots)})"

    def list_skills(self) -> list[Skill]:
        found: dict[str, Skill] = {}
        for root in self.roots:
            for path in self._skill_files(root):
                skill = self._read(path)
                if skill is not None and skill.name not in found:
                    found[skill.name] = skill
        self._located = {name: skill.path for name, skill in found.items()}
        return list(found.values())

    def load_skill(self, name: str) -> Skill:
        path = self._located.get(name)
        if path is not None:
            skill = self._read(path)
            if skill is not None and skill.name == name:
                return skill
        # A miss (a new skill, a renamed one) re-scans before giving up.
        for skill in self.list_skills():
            if skill.name == name:
                return skill
        raise SkillNotFoundError(name, sorted(self._located))

    def _skill_files(self, root: Path) -> list[Path]:
        try:
            children = sorted(root.iterdir())
        except FileNotFoundError:
            if root not in self._warned:
                self._warned.add(root)
                _log.warning("skills directory %s does not exist; skipping it", root)
            return []
        except OSError as exc:
            _log.warning("cannot list skills directory %s: %s", root, exc)
            return []
        return [c / SKILL_FILE for c in children if (c / SKILL_FILE).is_file()]

    def _read(self, path: Path) -> Skill | None:
        try:
            text, _ = read_text(path, MAX_SKILL_CHARS)
            return parse_skill(text, path)
        except (UnicodeDecodeError, ValueError):
            _log.warning("skipping skill %s: not UTF-8 text", path)
        except SkillsError as exc:
            _log.warning("skipping skill %s: %s", path, exc)
        except OSError as exc:
            _log.warning("skipping skill %s: %s", path, exc)
        return None
