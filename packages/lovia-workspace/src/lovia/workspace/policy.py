"""``WorkspacePolicy``: one allow / ask / deny ACL for paths and shell commands.

Path decisions, in order of precedence:

1. ``denied_paths`` (any op) -> deny; they beat every grant.
2. The first ``PathRule`` whose pattern and ops match -> its action.
3. Mode defaults: reads inside the root are always allowed; ``write`` for writes inside,
   ``read_outside`` and ``write_outside`` for the rest.

Patterns come in three addressing forms (an empty pattern never matches):

- absolute or ``~``: the resolved path and its subtree (a symlinked prefix in the pattern is
  resolved too, so ``/tmp/x`` still matches when ``/tmp`` is a link);
- containing ``/``: workspace-relative subtree (``./`` and a trailing ``/`` are ignored);
- bare (``.env*``): gitignore-like, matches the basename or any ancestor segment. Inside the
  root only the segments below the root count.

Each component is an ``fnmatch`` glob. Command decisions split compound commands into
segments (``command_guard``), judge each by the first ``CommandRule`` matching it as a
word-boundary prefix (else ``shell_default``) and keep the most restrictive verdict.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, get_args

from lovia.exceptions import UserError

from .command_guard import parse_command, unwrapped

__all__ = [
    "CommandDecider",
    "CommandRule",
    "Decision",
    "FileOp",
    "PROTECTED_RULES",
    "PathRule",
    "WorkspaceMode",
    "WorkspacePolicy",
    "expand_grants",
    "most_restrictive",
    "pattern_matches",
]

Decision = Literal["allow", "ask", "deny"]
"""A verdict: ``allow`` runs, ``ask`` goes through the approval channel, ``deny`` raises."""
FileOp = Literal["read", "write"]
"""What a file operation does to a path."""
WorkspaceMode = Literal["readonly", "coding", "trusted"]
"""A preset policy (see ``WorkspacePolicy.readonly/coding/trusted``)."""

_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
_ALL_OPS: frozenset[FileOp] = frozenset(("read", "write"))


def most_restrictive(*decisions: Decision) -> Decision:
    """The most restrictive of ``decisions`` (deny > ask > allow); ``allow`` when empty."""
    best: Decision = "allow"
    for decision in decisions:
        if _RANK[decision] > _RANK[best]:
            best = decision
    return best


def _check_decision(value: object, what: str) -> Decision:
    if value not in _RANK:
        raise UserError(f"{what} must be 'allow', 'ask' or 'deny', got {value!r}")
    return value  # type: ignore[return-value]  # checked against the Literal's values above


@dataclass(frozen=True, slots=True)
class PathRule:
    """Decide ``action`` for paths matching ``pattern`` when the op is in ``ops``.

    ``ops`` defaults to both ``"read"`` and ``"write"``. See the module docstring for the
    three pattern forms. Raises ``UserError`` for an unknown action or op.
    """

    pattern: str
    action: Decision
    ops: AbstractSet[FileOp] = _ALL_OPS

    def __post_init__(self) -> None:
        _check_decision(self.action, "PathRule action")
        ops = frozenset(self.ops)
        if not ops or not ops <= _ALL_OPS:
            raise UserError(f"PathRule ops must be a non-empty subset of read/write, got {ops!r}")
        object.__setattr__(self, "ops", ops)

    def matches(self, rel: str | None, path: Path) -> bool:
        """Whether this rule's pattern matches a resolved path (``rel`` inside the root)."""
        return pattern_matches(self.pattern, rel, path)


@dataclass(frozen=True, slots=True)
class CommandRule:
    """Decide ``action`` for command segments starting with ``pattern``'s words.

    ``"git push"`` matches ``git push origin`` but never ``git pushx``.
    """

    pattern: str
    action: Decision

    def __post_init__(self) -> None:
        _check_decision(self.action, "CommandRule action")

    def matches(self, words: tuple[str, ...]) -> bool:
        """Whether ``words`` (one simple command) starts with this rule's words."""
        head = tuple(self.pattern.split())
        return bool(head) and words[: len(head)] == head


CommandDecider = Callable[[str], "Decision | None"]
"""``decider(command) -> Decision | None``: overrides the static rules; ``None`` falls through."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspacePolicy:
    """The ACL a workspace session enforces (defaults: the ``coding`` preset).

    ``write``: writes inside the root; ``read_outside`` / ``write_outside``: the rest.
    ``path_rules`` are checked in order after ``denied_paths`` (bare, relative or absolute
    patterns). ``allow_shell=False`` removes the shell; otherwise ``command_rules`` then
    ``shell_default`` decide each command segment. ``command_decider`` may override the
    static rules for a whole command (an invalid return falls through).
    """

    write: Decision = "allow"
    read_outside: Decision = "ask"
    write_outside: Decision = "deny"
    path_rules: tuple[PathRule, ...] = ()
    denied_paths: tuple[str, ...] = ()
    allow_shell: bool = True
    shell_default: Decision = "ask"
    command_rules: tuple[CommandRule, ...] = ()
    command_decider: CommandDecider | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in ("write", "read_outside", "write_outside", "shell_default"):
            _check_decision(getattr(self, name), f"WorkspacePolicy.{name}")
        object.__setattr__(self, "path_rules", tuple(self.path_rules))
        object.__setattr__(self, "denied_paths", tuple(self.denied_paths))
        object.__setattr__(self, "command_rules", tuple(self.command_rules))

    @classmethod
    def readonly(cls, **overrides: object) -> WorkspacePolicy:
        """Reads inside the root only; every write denied; no shell."""
        base = cls(write="deny", read_outside="deny", write_outside="deny", allow_shell=False)
        return replace(base, **overrides)  # type: ignore[arg-type]  # checked in __post_init__

    @classmethod
    def coding(cls, **overrides: object) -> WorkspacePolicy:
        """Writes inside allowed, outside reads ask, outside writes denied, shell asks.

        Writes that turn into code execution (``.git/hooks/``, ``.git/config``, the venv's
        ``bin/``) ask rather than allow; rules passed in ``path_rules`` come first.
        """
        given: Iterable[PathRule] = overrides.pop("path_rules", ())  # type: ignore[assignment]
        rules = tuple(given)
        base = cls(path_rules=rules + PROTECTED_RULES)
        return replace(base, **overrides)  # type: ignore[arg-type]  # checked in __post_init__

    @classmethod
    def trusted(cls, **overrides: object) -> WorkspacePolicy:
        """Reads anywhere, writes inside, outside writes ask, shell allowed."""
        base = cls(read_outside="allow", write_outside="ask", shell_default="allow")
        return replace(base, **overrides)  # type: ignore[arg-type]  # checked in __post_init__

    @classmethod
    def for_mode(cls, mode: WorkspaceMode, **overrides: object) -> WorkspacePolicy:
        """The preset for ``mode``; raises ``UserError`` for an unknown mode."""
        if mode not in get_args(WorkspaceMode):
            raise UserError(
                f"unknown workspace mode {mode!r}",
                hint="use 'readonly', 'coding' or 'trusted'",
            )
        preset: Callable[..., WorkspacePolicy] = getattr(cls, mode)
        return preset(**overrides)

    @property
    def can_write(self) -> bool:
        """Whether any write can ever be allowed (decides whether write tools exist)."""
        if self.write != "deny" or self.write_outside != "deny":
            return True
        return any(r.action != "deny" and "write" in r.ops for r in self.path_rules)

    def decide_path(self, rel: str | None, path: Path, op: FileOp) -> Decision:
        """The verdict for ``op`` on a resolved path (``rel`` is ``None`` outside the root)."""
        if any(pattern_matches(p, rel, path) for p in self.denied_paths):
            return "deny"
        for rule in self.path_rules:
            if op in rule.ops and rule.matches(rel, path):
                return rule.action
        if rel is not None:
            return "allow" if op == "read" else self.write
        return self.read_outside if op == "read" else self.write_outside

    def decide_command(self, command: str) -> Decision:
        """The static verdict for ``command`` (rules and decider only, no path claims).

        Raises ``WorkspaceError`` for a command nesting substitutions too deeply to read.
        """
        if not self.allow_shell:
            return "deny"
        if self.command_decider is not None:
            verdict = self.command_decider(command)
            if verdict in _RANK:
                return verdict
        segments = parse_command(command).segments
        if not segments:
            return self.shell_default
        return most_restrictive(*(self._decide_segment(words) for words in segments))

    def _decide_segment(self, words: tuple[str, ...]) -> Decision:
        stripped = words
        while stripped and "=" in stripped[0] and stripped[0].split("=", 1)[0].isidentifier():
            stripped = stripped[1:]  # leading VAR=value assignments
        verdict = self.shell_default
        rule = self._first_rule(stripped)
        if rule is not None:
            # An assignment (LD_PRELOAD=..., PATH=...) can change what an allowed binary
            # does; it never earns more than the default.
            allow_dodged = rule.action == "allow" and stripped != words
            verdict = self.shell_default if allow_dodged else rule.action
        # A wrapper (env, sudo, xargs...) or a directory prefix never dodges a deny or ask
        # rule: the command it really runs is judged too, and can only add restrictions.
        core = unwrapped(words)
        if core != stripped:
            inner = self._first_rule(core)
            if inner is not None:
                verdict = most_restrictive(verdict, inner.action)
        return verdict

    def _first_rule(self, words: tuple[str, ...]) -> CommandRule | None:
        return next((r for r in self.command_rules if r.matches(words)), None)


PROTECTED_RULES: tuple[PathRule, ...] = tuple(
    PathRule(pattern, "ask", frozenset(("write",)))
    for pattern in (
        ".git/hooks",
        ".git/config",
        ".venv/bin",
        ".venv/Scripts",
        "venv/bin",
        "venv/Scripts",
    )
)
"""Coding-mode rules: writes that turn into code execution ask rather than allow."""


def pattern_matches(pattern: str, rel: str | None, path: Path) -> bool:
    """Whether ``pattern`` (any of the three forms) matches a resolved path."""
    pattern = pattern.strip()
    if not pattern:
        return False
    if pattern.startswith(("/", "~")):
        return _subtree_match(_resolve_pattern(pattern), path.parts)
    stripped = pattern[2:] if pattern.startswith("./") else pattern
    stripped = stripped.rstrip("/")
    if stripped in ("", "."):
        return rel is not None  # the workspace root itself: everything inside
    if "/" in pattern:
        if rel is None:
            return False
        return _subtree_match(tuple(stripped.split("/")), _rel_parts(rel))
    segments = _rel_parts(rel) if rel is not None else path.parts[1:]
    return any(fnmatch.fnmatchcase(seg, stripped) for seg in segments)


def _rel_parts(rel: str) -> tuple[str, ...]:
    return () if rel == "." else tuple(rel.split("/"))


def _subtree_match(pattern_parts: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if len(parts) < len(pattern_parts):
        return False
    return all(fnmatch.fnmatchcase(p, g) for p, g in zip(parts, pattern_parts, strict=False))


def _resolve_pattern(pattern: str) -> tuple[str, ...]:
    """Absolute pattern parts, with the literal (glob-free) prefix resolved through symlinks."""
    parts = Path(os.path.expanduser(pattern)).parts
    literal = 0
    while literal < len(parts) and not any(ch in parts[literal] for ch in "*?["):
        literal += 1
    prefix = Path(os.path.realpath(Path(*parts[:literal]))).parts if literal else ("/",)
    return tuple(prefix) + tuple(parts[literal:])


def expand_grants(readable: Iterable[str], writable: Iterable[str]) -> tuple[PathRule, ...]:
    """``readable=`` / ``writable=`` grants as allow rules (writable grants also read)."""
    rules = [PathRule(p, "allow", frozenset(("read", "write"))) for p in writable]
    rules += [PathRule(p, "allow", frozenset(("read",))) for p in readable]
    return tuple(rules)
