"""``WorkspacePolicy``: one allow / ask / deny ACL for paths and shell commands.

Path decisions, in order of precedence:

1. ``denied_paths`` (any op) -> deny; they beat every grant.
2. Secret files (``secret_paths``, default ``DEFAULT_SECRET_PATHS``: ``.env``, keys,
   credentials) -> deny for any op, unless ``allow_secrets`` names them; a grant
   (``readable=``, an allow ``PathRule``) never lifts this, and one naming a secret is
   rejected when the policy is built.
3. The first ``PathRule`` whose pattern and ops match -> its action.
4. Mode defaults: reads inside the root are always allowed; ``write`` for writes inside,
   ``read_outside`` and ``write_outside`` for the rest.

Patterns come in three addressing forms (an empty pattern never matches):

- absolute or ``~``: the resolved path and its subtree (a symlinked prefix in the pattern is
  resolved too, so ``/tmp/x`` still matches when ``/tmp`` is a link);
- containing ``/``: workspace-relative subtree (``./`` and a trailing ``/`` are ignored);
- bare (``.env*``): gitignore-like, matches the basename or any ancestor segment. Inside the
  root only the segments below the root count.

Each component is an ``fnmatch`` glob. Deny matches (``denied_paths``, secrets) ignore
case: a case-insensitive filesystem opens ``.ENV`` as ``.env``, and a false match can only
deny. A secret pattern matches its segments at any depth, inside or outside the root
(``.aws/credentials`` matches ``~/.aws/credentials``), and names ending in a template or
public-key suffix (``.env.example``, ``id_rsa.pub``: ``NOT_SECRET_SUFFIXES``) are not
secrets. Command decisions split compound commands into
segments (``command_guard``), judge each by the first ``CommandRule`` matching it as a
word-boundary prefix (else ``shell_default``) and keep the most restrictive verdict.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from lovia.exceptions import UserError

from .command_guard import parse_command, unwrapped

__all__ = [
    "CommandDecider",
    "CommandRule",
    "DEFAULT_SECRET_PATHS",
    "Decision",
    "FileOp",
    "NOT_SECRET_SUFFIXES",
    "PROTECTED_RULES",
    "PathRule",
    "PermissionDecision",
    "RuleTuple",
    "Ruling",
    "WorkspaceMode",
    "WorkspacePolicy",
    "expand_grants",
    "most_restrictive",
    "pattern_matches",
    "secret_matches",
    "strictest",
]

Decision = Literal["allow", "ask", "deny"]
"""A verdict: ``allow`` runs, ``ask`` goes through the approval channel, ``deny`` raises."""
FileOp = Literal["read", "write"]
"""What a file operation does to a path."""
WorkspaceMode = Literal["readonly", "coding", "trusted"]
"""A preset policy (see ``WorkspacePolicy.readonly/coding/trusted``)."""

DEFAULT_SECRET_PATHS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".git-credentials",
    ".aws/credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
)
"""Secret files denied in every mode unless ``allow_secrets`` names them."""

NOT_SECRET_SUFFIXES: tuple[str, ...] = (".example", ".sample", ".template", ".dist", ".pub")
"""A name matching a secret pattern but ending in one of these is a template or a public
key (``.env.example``, ``id_ed25519.pub``): it names what a secret holds, not its value."""

_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
_ALL_OPS: frozenset[FileOp] = frozenset(("read", "write"))


def most_restrictive(*decisions: Decision) -> Decision:
    """The most restrictive of ``decisions`` (deny > ask > allow); ``allow`` when empty."""
    best: Decision = "allow"
    for decision in decisions:
        if _RANK[decision] > _RANK[best]:
            best = decision
    return best


RuleTuple = tuple[Decision, str, str | None]
"""``(decision, rule, pattern)``: the internal form of a ``Ruling`` (no object per decision)."""


def strictest(rulings: Iterable[RuleTuple]) -> RuleTuple:
    """The first most restrictive of ``rulings``, as ``most_restrictive`` picks a verdict;
    an allow by default when there are none."""
    best: RuleTuple = ("allow", "default", None)
    rank = -1
    for ruling in rulings:
        if _RANK[ruling[0]] > rank:
            best, rank = ruling, _RANK[ruling[0]]
    return best


@dataclass(frozen=True, slots=True)
class Ruling:
    """A verdict and the rule that decided it (``WorkspacePolicy.explain_path`` and
    ``explain_command``)."""

    decision: Decision
    rule: str
    """The setting that decided: ``denied_paths``, ``secret_paths``, ``path_rules``,
    ``read_inside`` (reads inside the root), ``write``, ``read_outside``, ``write_outside``,
    ``allow_shell``, ``command_decider``, ``command_rules`` or ``shell_default``; a session
    adds ``proc`` (per-process ``/proc`` paths) and ``recursive_read`` (a tree a command
    reads holds a denied entry, or is too big to check)."""
    pattern: str | None = None
    """The matching rule's pattern (or the word or path it was judged on), when there is one."""


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """One decision a workspace session made, as its observers receive it."""

    kind: Literal["path", "command"]
    subject: str
    """The path as the session shows it (relative inside the root), or the command."""
    op: Literal["read", "write", "run"]
    decision: Decision
    rule: str
    """See ``Ruling.rule``."""
    pattern: str | None
    enforced: bool
    """``True`` when the operation itself was gated; ``False`` for a check made ahead of it
    (the tools' ``needs_approval`` predicates call ``decide_path``/``decide_command``)."""


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
    ``path_rules`` are checked in order after ``denied_paths`` and the secret files
    (``secret_paths`` minus ``allow_secrets``; bare, relative or absolute patterns).
    ``allow_shell=False`` removes the shell; otherwise ``command_rules`` then
    ``shell_default`` decide each command segment. ``command_decider`` may override the
    static rules for a whole command (an invalid return falls through). Raises
    ``UserError`` when an allow rule names a secret that ``allow_secrets`` does not.
    """

    write: Decision = "allow"
    read_outside: Decision = "ask"
    write_outside: Decision = "deny"
    path_rules: tuple[PathRule, ...] = ()
    denied_paths: tuple[str, ...] = ()
    secret_paths: tuple[str, ...] = DEFAULT_SECRET_PATHS
    allow_secrets: tuple[str, ...] = ()
    allow_shell: bool = True
    shell_default: Decision = "ask"
    command_rules: tuple[CommandRule, ...] = ()
    command_decider: CommandDecider | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in ("write", "read_outside", "write_outside", "shell_default"):
            _check_decision(getattr(self, name), f"WorkspacePolicy.{name}")
        object.__setattr__(self, "path_rules", tuple(self.path_rules))
        object.__setattr__(self, "denied_paths", tuple(self.denied_paths))
        object.__setattr__(self, "secret_paths", tuple(self.secret_paths))
        object.__setattr__(self, "allow_secrets", tuple(self.allow_secrets))
        object.__setattr__(self, "command_rules", tuple(self.command_rules))
        for rule in self.path_rules:
            if rule.action == "allow" and self._names_secret(rule.pattern):
                raise UserError(
                    f"the grant {rule.pattern!r} names a secret file, and grants never "
                    "lift the default secret deny",
                    hint=f"to let the agent read it, pass allow_secrets=({rule.pattern!r},)",
                )

    def _names_secret(self, pattern: str) -> bool:
        """Whether a grant pattern, read as a path, is a secret not in ``allow_secrets``."""
        path = Path(os.path.expanduser(pattern.strip()))
        if not path.parts:
            return False
        rel = None if path.is_absolute() else path.as_posix()
        return self.is_secret(rel, path if path.is_absolute() else Path("/", path))

    @classmethod
    def readonly(cls, **overrides: object) -> WorkspacePolicy:
        """Reads inside the root only; every write denied; no shell."""
        base = {"write": "deny", "read_outside": "deny", "write_outside": "deny"}
        return cls(**(base | {"allow_shell": False} | overrides))  # type: ignore[arg-type]

    @classmethod
    def coding(cls, **overrides: object) -> WorkspacePolicy:
        """Writes inside allowed, outside reads ask, outside writes denied, shell asks.

        Writes that turn into code execution (``.git/hooks/``, ``.git/config``, the venv's
        ``bin/``) ask rather than allow; rules passed in ``path_rules`` come first.
        """
        given: Iterable[PathRule] = overrides.pop("path_rules", ())  # type: ignore[assignment]
        rules = tuple(given)
        return cls(path_rules=rules + PROTECTED_RULES, **overrides)  # type: ignore[arg-type]

    @classmethod
    def trusted(cls, **overrides: object) -> WorkspacePolicy:
        """Reads anywhere, writes inside, outside writes ask, shell allowed."""
        base = {"read_outside": "allow", "write_outside": "ask", "shell_default": "allow"}
        return cls(**(base | overrides))  # type: ignore[arg-type]  # checked in __post_init__

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

    def is_secret(self, rel: str | None, path: Path) -> bool:
        """Whether a resolved path is a secret file that ``allow_secrets`` does not allow."""
        if not secret_matches(self.secret_paths, rel, path):
            return False
        return not any(pattern_matches(p, rel, path) for p in self.allow_secrets)

    def hard_denied(self, rel: str | None, path: Path) -> bool:
        """Whether any op on the path is denied before rules: ``denied_paths`` or a secret."""
        return self.hard_ruling(rel, path) is not None

    def hard_ruling(self, rel: str | None, path: Path) -> RuleTuple | None:
        """The deny of ``hard_denied`` with its rule (``denied_paths`` and the pattern, or
        ``secret_paths``); ``None`` when the path is not hard denied."""
        for pattern in self.denied_paths:
            if pattern_matches(pattern, rel, path, fold_case=True):
                return ("deny", "denied_paths", pattern)
        if self.is_secret(rel, path):
            return ("deny", "secret_paths", None)
        return None

    def decide_path(self, rel: str | None, path: Path, op: FileOp) -> Decision:
        """The verdict for ``op`` on a resolved path (``rel`` is ``None`` outside the root)."""
        return self.path_ruling(rel, path, op)[0]

    def explain_path(self, rel: str | None, path: Path, op: FileOp) -> Ruling:
        """``decide_path`` with the rule that decided."""
        return Ruling(*self.path_ruling(rel, path, op))

    def path_ruling(self, rel: str | None, path: Path, op: FileOp) -> RuleTuple:
        """``explain_path`` as a plain tuple (what the session's gate uses)."""
        hard = self.hard_ruling(rel, path)
        if hard is not None:
            return hard
        for rule in self.path_rules:
            if op in rule.ops and rule.matches(rel, path):
                return (rule.action, "path_rules", rule.pattern)
        if rel is not None:
            return ("allow", "read_inside", None) if op == "read" else (self.write, "write", None)
        if op == "read":
            return (self.read_outside, "read_outside", None)
        return (self.write_outside, "write_outside", None)

    def decide_command(self, command: str) -> Decision:
        """The static verdict for ``command`` (rules and decider only, no path claims).

        Raises ``WorkspaceError`` for a command nesting substitutions too deeply to read.
        """
        return self.command_ruling(command)[0]

    def explain_command(self, command: str) -> Ruling:
        """``decide_command`` with the rule that decided."""
        return Ruling(*self.command_ruling(command))

    def command_ruling(self, command: str) -> RuleTuple:
        """``explain_command`` as a plain tuple."""
        if not self.allow_shell:
            return ("deny", "allow_shell", None)
        if self.command_decider is not None:
            verdict = self.command_decider(command)
            if verdict in _RANK:
                return (verdict, "command_decider", None)
        segments = parse_command(command).segments
        if not segments:
            return (self.shell_default, "shell_default", None)
        return strictest(self._segment_ruling(words) for words in segments)

    def _segment_ruling(self, words: tuple[str, ...]) -> RuleTuple:
        stripped = words
        while stripped and "=" in stripped[0] and stripped[0].split("=", 1)[0].isidentifier():
            stripped = stripped[1:]  # leading VAR=value assignments
        ruling: RuleTuple = (self.shell_default, "shell_default", None)
        rule = self._first_rule(stripped)
        # An assignment (LD_PRELOAD=..., PATH=...) can change what an allowed binary
        # does; it never earns more than the default.
        if rule is not None and not (rule.action == "allow" and stripped != words):
            ruling = (rule.action, "command_rules", rule.pattern)
        # A wrapper (env, sudo, xargs...) or a directory prefix never dodges a deny or ask
        # rule: the command it really runs is judged too, and can only add restrictions.
        core = unwrapped(words)
        if core != stripped:
            inner = self._first_rule(core)
            if inner is not None:
                ruling = strictest((ruling, (inner.action, "command_rules", inner.pattern)))
        return ruling

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


def pattern_matches(pattern: str, rel: str | None, path: Path, *, fold_case: bool = False) -> bool:
    """Whether ``pattern`` (any of the three forms) matches a resolved path.

    ``fold_case`` ignores case (deny matches only: it can only widen them).
    """
    pattern = pattern.strip()
    if not pattern:
        return False
    if pattern.startswith(("/", "~")):
        resolved = _resolve_pattern(pattern)  # resolved before folding: links keep their case
        if fold_case:
            resolved, path = tuple(part.lower() for part in resolved), _lower(path)
        return _subtree_match(resolved, path.parts)
    if fold_case:
        pattern, rel, path = pattern.lower(), None if rel is None else rel.lower(), _lower(path)
    stripped = pattern[2:] if pattern.startswith("./") else pattern
    stripped = stripped.rstrip("/")
    if stripped in ("", "."):
        return rel is not None  # the workspace root itself: everything inside
    if "/" in pattern:
        if rel is None:
            return False
        return _subtree_match(tuple(stripped.split("/")), _rel_parts(rel))
    return any(fnmatch.fnmatchcase(seg, stripped) for seg in _segments(rel, path))


def secret_matches(patterns: tuple[str, ...], rel: str | None, path: Path) -> bool:
    """Whether any secret pattern (segments, matched at any depth, any case) matches a
    resolved path; a name ending in ``NOT_SECRET_SUFFIXES`` never does."""
    single, multi = _secret_matcher(patterns)
    below = _segments(rel, path)
    if single is not None:
        for seg in below:
            if single.fullmatch(seg) and not seg.lower().endswith(NOT_SECRET_SUFFIXES):
                return True
    # A multi-segment window must end below the root, as bare patterns do, but may start
    # above it (a root at ~/.aws still holds .aws/credentials).
    for wanted in multi:
        for i, seg in enumerate(below):
            if not wanted[-1].fullmatch(seg) or seg.lower().endswith(NOT_SECRET_SUFFIXES):
                continue
            parts = path.parts[1:]
            end = len(parts) - len(below) + i  # where ``seg`` sits in the full path
            start = end - len(wanted) + 1
            if start >= 0 and all(
                glob.fullmatch(part) for glob, part in zip(wanted, parts[start:end], strict=False)
            ):
                return True
    return False


@functools.lru_cache(maxsize=32)
def _secret_matcher(
    patterns: tuple[str, ...],
) -> tuple[re.Pattern[str] | None, tuple[tuple[re.Pattern[str], ...], ...]]:
    """One case-insensitive regex for the one-segment patterns, and each multi-segment
    pattern as a regex per segment: compiled once per pattern set, not per decision."""
    single: list[str] = []
    multi: list[tuple[re.Pattern[str], ...]] = []
    for pattern in patterns:
        segments = [seg for seg in pattern.strip().split("/") if seg not in ("", ".")]
        if len(segments) == 1:
            single.append(fnmatch.translate(segments[0]))
        elif segments:
            multi.append(tuple(re.compile(fnmatch.translate(seg), re.I) for seg in segments))
    joined = re.compile("|".join(f"(?:{p})" for p in single), re.I) if single else None
    return joined, tuple(multi)


def _segments(rel: str | None, path: Path) -> tuple[str, ...]:
    """The segments a bare pattern looks at: below the root inside it, all of them outside."""
    return _rel_parts(rel) if rel is not None else path.parts[1:]


def _lower(path: Path) -> Path:
    return Path(str(path).lower())


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
