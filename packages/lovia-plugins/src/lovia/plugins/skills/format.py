"""The ``SKILL.md`` format: YAML frontmatter (``name``, ``description``, extras) and a body.

The frontmatter parser is deliberately forgiving about *layout* (a BOM, CRLF line ends and
leading blank lines are fine) and strict about *structure*: the opening ``---`` must start
its line (an indented one is not a delimiter), and a block whose YAML is not a mapping is a
Markdown thematic break, so the file has no frontmatter and nothing is cut from it. An
unterminated block is not frontmatter either, so the body is never truncated. Malformed
YAML yields empty metadata; the skill is then rejected for its missing description. So does
hostile YAML: aliases are refused (a "billion laughs" block would expand exponentially in
anything that renders the extras) and nesting deep enough to exhaust the stack is malformed.

pyyaml is imported here, on the first parse, never by ``import lovia.plugins``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lovia.exceptions import LoviaError

__all__ = [
    "Skill",
    "SkillMetadata",
    "SkillsError",
    "check_name",
    "parse_frontmatter",
    "parse_skill",
]

MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
_NAME = re.compile(r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$")


class SkillsError(LoviaError):
    """A skill could not be read, parsed or found; ``skill_name`` and ``path`` say which."""

    def __init__(
        self,
        message: str,
        *,
        skill_name: str | None = None,
        path: Path | str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.skill_name = skill_name
        self.path = path


@dataclass(frozen=True, slots=True)
class SkillMetadata:
    """What the index shows: the name, the description and any extra frontmatter keys."""

    name: str
    description: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its metadata, its Markdown body and the ``SKILL.md`` it came from."""

    metadata: SkillMetadata
    body: str
    path: Path
    """The ``SKILL.md`` file; its directory holds the skill's other files."""

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def description(self) -> str:
        return self.metadata.description

    @property
    def root(self) -> Path:
        """The skill's directory."""
        return self.path.parent


def parse_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """Split ``text`` into (frontmatter mapping, body); ``({}, text)`` when there is none.

    Malformed YAML inside well-formed delimiters gives ``({}, body)``.
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start == len(lines) or lines[start].rstrip() != "---":
        return {}, text
    for end in range(start + 1, len(lines)):
        if lines[end].rstrip() == "---":
            break
    else:
        return {}, text  # unterminated: not frontmatter, and nothing is cut
    block = "\n".join(lines[start + 1 : end])
    body = "\n".join(lines[end + 1 :]).lstrip("\n")
    import yaml  # type: ignore[import-untyped]

    try:
        data = yaml.load(block, Loader=_loader())  # a SafeLoader subclass
    except (yaml.YAMLError, RecursionError):
        return {}, body
    if data is None:
        return {}, body
    if not isinstance(data, dict):
        return {}, text  # a thematic break around prose, not a frontmatter block
    return {str(k): v for k, v in data.items()}, body


@functools.cache
def _loader() -> type[Any]:
    """``yaml.SafeLoader`` that refuses aliases (built on first use: pyyaml stays lazy)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, "aliases are not allowed in skill frontmatter", event.start_mark
                )
            return super().compose_node(parent, index)

    return NoAliasLoader


def parse_skill(text: str, path: Path) -> Skill:
    """Build a ``Skill`` from the text of ``path`` (a ``SKILL.md``).

    The name falls back to the directory name. Raises ``SkillsError`` for an invalid name, a
    missing, empty, too long or non-string description, or a non-string name.
    """
    meta, body = parse_frontmatter(text)
    raw_name = meta.pop("name", None)
    if raw_name is None:
        raw_name = path.parent.name
    if not isinstance(raw_name, str):
        raise SkillsError(
            f"skill name must be a string, got {type(raw_name).__name__}",
            path=path,
            hint="quote the name in the frontmatter",
        )
    name = raw_name.strip()
    check_name(name, path)
    description = meta.pop("description", None)
    if not isinstance(description, str) or not description.strip():
        raise SkillsError(
            f"skill {name!r} has no description",
            skill_name=name,
            path=path,
            hint="add `description: <when to use this skill>` to the YAML frontmatter",
        )
    description = description.strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillsError(
            f"skill {name!r} has a {len(description)}-character description",
            skill_name=name,
            path=path,
            hint=f"keep the description to {MAX_DESCRIPTION_CHARS} characters",
        )
    return Skill(SkillMetadata(name, description, meta), body, path)


def check_name(name: str, path: Path | None = None) -> None:
    """Raise ``SkillsError`` unless ``name`` is a valid skill name."""
    if len(name) > MAX_NAME_CHARS or not _NAME.match(name):
        raise SkillsError(
            f"invalid skill name {name!r}",
            skill_name=name,
            path=path,
            hint=(
                f"use at most {MAX_NAME_CHARS} letters and digits in segments joined by "
                "single '-' or '_' (no '/', '\\', '..', or leading/trailing separators)"
            ),
        )
