"""``SkillCatalog``: progressive disclosure over a ``SkillSource``.

Three levels, each paid for only when needed: a one-line index entry per skill in the
system prompt, the body through ``load_skill(name)``, and any other file of the skill
through ``read_skill_file(name, relpath)``, read verbatim.

``filter`` is a boundary, not a display option: a filtered-out skill is absent from the
index *and* cannot be loaded or read. Tool errors come back as strings so the model can
adapt. Content the model receives is framed between BEGIN/END reference markers, and any
marker-like line inside the content is neutralised, so a skill file cannot fake the end of
its own frame and smuggle text out as if it were instructions.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lovia.tools.base import Tool

from .format import Skill, SkillsError
from .source import DirectorySkillSource, SkillNotFoundError, SkillSource, read_text

__all__ = ["SkillCatalog", "SkillFilter"]

SkillFilter = Callable[[Skill], bool]
"""``filter(skill) -> bool``: whether the skill is visible (listed and loadable)."""

MAX_OUTPUT_CHARS = 100_000
_INDEX_DESCRIPTION_CHARS = 300
_INDEX_EXTRA_CHARS = 80
_LISTED_FILES = 50

DEFAULT_USAGE_RULES = (
    "Skills are packaged instructions for specific tasks. When a task matches a skill's "
    "description, call `load_skill` with its name before starting, then follow it. Use "
    "`read_skill_file` for the files a skill refers to. Never guess what a skill says."
)

_MARKER = re.compile(r"(BEGIN|END)(\s+SKILL\s+REFERENCE)", re.IGNORECASE)


class SkillCatalog:
    """The skills one agent can see, with the index text and the two tools."""

    def __init__(
        self,
        source: SkillSource,
        *,
        usage_rules: str | None = None,
        filter: SkillFilter | None = None,
    ) -> None:
        self.source = source
        self.usage_rules = DEFAULT_USAGE_RULES if usage_rules is None else usage_rules
        self.filter = filter

    @classmethod
    def from_dir(
        cls,
        *dirs: str | os.PathLike[str],
        usage_rules: str | None = None,
        filter: SkillFilter | None = None,
    ) -> SkillCatalog:
        """A catalog over ``DirectorySkillSource(*dirs)``."""
        return cls(DirectorySkillSource(*dirs), usage_rules=usage_rules, filter=filter)

    def __repr__(self) -> str:
        return f"SkillCatalog({self.source!r})"

    def list_skills(self) -> list[Skill]:
        """The visible skills (re-scanned on every call)."""
        return [s for s in self.source.list_skills() if self._visible(s)]

    def load_skill(self, name: str) -> Skill:
        """The visible skill ``name``; raises ``SkillNotFoundError`` naming the visible ones."""
        try:
            skill = self.source.load_skill(name)
        except SkillNotFoundError:
            skill = None
        if skill is None or not self._visible(skill):
            raise SkillNotFoundError(name, [s.name for s in self.list_skills()])
        return skill

    def read_file(self, name: str, relpath: str) -> str:
        """The framed text of ``relpath`` inside skill ``name``; raises ``SkillsError``."""
        skill = self.load_skill(name)
        target = _resolve_inside(skill, relpath)
        try:
            text, cut = read_text(target, MAX_OUTPUT_CHARS)
        except (UnicodeDecodeError, ValueError):
            size = target.stat().st_size
            return f"{relpath} is a binary file ({size} bytes) and cannot be shown as text."
        except OSError as exc:
            raise SkillsError(f"cannot read {relpath!r}: {exc}", skill_name=name) from exc
        return _frame(f"{name}/{relpath}", text, cut)

    def instructions(self) -> str:
        """The system-prompt section: usage rules and a one-line index entry per skill.

        Empty when no skill is visible.
        """
        skills = self.list_skills()
        if not skills:
            return ""
        lines = [_index_line(s) for s in skills]
        return "## Skills\n" + self.usage_rules + "\n\nAvailable skills:\n" + "\n".join(lines)

    def tools(self) -> tuple[Tool, ...]:
        """``load_skill(name)`` and ``read_skill_file(name, relpath)``, errors as strings."""

        async def load(args: dict[str, Any], ctx: Any) -> str:
            return await asyncio.to_thread(self._load_tool, str(args.get("name", "")))

        async def read(args: dict[str, Any], ctx: Any) -> str:
            name, relpath = str(args.get("name", "")), str(args.get("relpath", ""))
            return await asyncio.to_thread(self._read_tool, name, relpath)

        name_param = {"type": "string", "description": "The skill's name, as in the index."}
        return (
            Tool(
                name="load_skill",
                description="Load a skill's full instructions by name (see the Skills index).",
                parameters={
                    "type": "object",
                    "properties": {"name": name_param},
                    "required": ["name"],
                },
                invoke=load,
            ),
            Tool(
                name="read_skill_file",
                description="Read a file that belongs to a skill, by its path inside the skill.",
                parameters={
                    "type": "object",
                    "properties": {
                        "name": name_param,
                        "relpath": {
                            "type": "string",
                            "description": "Path relative to the skill's folder.",
                        },
                    },
                    "required": ["name", "relpath"],
                },
                invoke=read,
            ),
        )

    def _visible(self, skill: Skill) -> bool:
        return self.filter is None or bool(self.filter(skill))

    def _load_tool(self, name: str) -> str:
        try:
            skill = self.load_skill(name)
        except SkillsError as exc:
            return f"Error: {exc}"
        text = skill.body
        files = _other_files(skill)
        if files:
            text += "\n\nFiles in this skill (read them with read_skill_file):\n"
            text += "\n".join(f"- {f}" for f in files)
        return _frame(skill.name, text[:MAX_OUTPUT_CHARS], len(text) > MAX_OUTPUT_CHARS)

    def _read_tool(self, name: str, relpath: str) -> str:
        try:
            return self.read_file(name, relpath)
        except SkillsError as exc:
            return f"Error: {exc}"


def _resolve_inside(skill: Skill, relpath: str) -> Path:
    """``relpath`` under the skill's folder, symlinks followed; escapes raise."""
    root = skill.root.resolve()
    if not relpath or Path(relpath).is_absolute() or "\x00" in relpath:
        raise SkillsError(
            f"invalid path {relpath!r}", skill_name=skill.name, hint="give a relative path"
        )
    try:
        target = (root / relpath).resolve()
        is_file = target.is_file()
    except OSError as exc:  # a name too long, a loop: the OS refuses the path itself
        raise SkillsError(
            f"cannot read {relpath[:100]!r}: {exc.strerror or exc}",
            skill_name=skill.name,
            hint="load_skill lists the skill's files",
        ) from None
    if not target.is_relative_to(root):
        raise SkillsError(
            f"{relpath!r} is outside skill {skill.name!r}",
            skill_name=skill.name,
            path=relpath,
            hint="read_skill_file only reads files inside the skill's own folder",
        )
    if not is_file:
        raise SkillsError(
            f"skill {skill.name!r} has no file {relpath!r}",
            skill_name=skill.name,
            path=relpath,
            hint="load_skill lists the skill's files",
        )
    return target


def _other_files(skill: Skill) -> list[str]:
    root = skill.root
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(filenames):
            rel = (Path(dirpath) / f).relative_to(root).as_posix()
            if rel != "SKILL.md" and not f.startswith("."):
                found.append(rel)
            if len(found) >= _LISTED_FILES:
                return found
    return found


def _frame(label: str, text: str, cut: bool) -> str:
    safe = _MARKER.sub(lambda m: "_".join([m.group(1), *m.group(2).split()]), text)
    if cut:
        safe += f"\n[... truncated at {MAX_OUTPUT_CHARS} characters ...]"
    return f"=== BEGIN SKILL REFERENCE: {label} ===\n{safe}\n=== END SKILL REFERENCE: {label} ==="


def _one_line(value: Any, cap: int) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= cap else text[: cap - 3] + "..."


def _index_line(skill: Skill) -> str:
    line = f"- {skill.name}: {_one_line(skill.description, _INDEX_DESCRIPTION_CHARS)}"
    extras = [
        f"{_one_line(k, _INDEX_EXTRA_CHARS)}: {_one_line(v, _INDEX_EXTRA_CHARS)}"
        for k, v in skill.metadata.extra.items()
    ]
    if extras:
        line += f" ({'; '.join(extras)})"
    return line
