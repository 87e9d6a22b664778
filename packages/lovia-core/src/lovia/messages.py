"""The lossy chat-shaped view (``Message``), token ``Usage`` and input helpers.

``Message`` is never authoritative: the canonical record is the transcript of
``TranscriptEntry`` values (``lovia.transcript``). Messages exist for people and for
guardrails, and as a convenient way to seed a run (``system()``, ``user()``, ``assistant()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .parts import ContentPart, normalize_content

__all__ = [
    "AssistantTurn",
    "InvalidArguments",
    "Message",
    "Role",
    "ToolCall",
    "Usage",
    "assistant",
    "system",
    "user",
]

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class InvalidArguments:
    """What ``ToolCall.args`` gives when the arguments are not a JSON object (falsy)."""

    error: str
    """Why they could not be parsed."""
    raw: str
    """The arguments as the model sent them."""

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the model asked for it; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"

    @property
    def args(self) -> dict[str, Any] | InvalidArguments:
        """The arguments parsed: a dict, or an ``InvalidArguments`` marker (falsy) when they
        are not valid JSON or not an object. Parsed on each access; empty text is ``{}``."""
        import json

        text = self.arguments.strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            return InvalidArguments(f"not valid JSON: {exc}", self.arguments)
        if not isinstance(value, dict):
            return InvalidArguments(f"a JSON {type(value).__name__}, not an object", self.arguments)
        return value


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message (lossy view)."""

    role: Role
    content: str | tuple[ContentPart, ...] = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


def system(content: str) -> Message:
    """A system message."""
    return Message("system", content)


def user(content: str | ContentPart | list[ContentPart] | tuple[ContentPart, ...]) -> Message:
    """A user message from text, one part, or a list of typed parts."""
    return Message("user", normalize_content(content))


def assistant(content: str, *, tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()) -> Message:
    """An assistant message (for seeding a conversation)."""
    return Message("assistant", content, tool_calls=tuple(tool_calls))


@dataclass(slots=True)
class Usage:
    """Token usage. ``input_tokens`` is the full prompt; the cache fields subdivide it.

    Mutable on purpose: the run accumulates into one live instance exposed as ``ctx.usage``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> Usage:
        """Fold ``other`` into this usage in place and return self."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.requests += other.requests
        return self

    def __add__(self, other: Usage) -> Usage:
        return Usage().add(self).add(other)

    def updated(self, report: Usage) -> Usage:
        """A new usage: ``report``'s non-zero fields over this one's.

        How one model call's several usage reports combine (a provider may send the input
        count first and the output count at the end); summing them would count twice.
        """
        return Usage(
            input_tokens=report.input_tokens or self.input_tokens,
            output_tokens=report.output_tokens or self.output_tokens,
            cache_read_tokens=report.cache_read_tokens or self.cache_read_tokens,
            cache_write_tokens=report.cache_write_tokens or self.cache_write_tokens,
            requests=report.requests or self.requests,
        )

    def copy(self) -> Usage:
        return Usage().add(self)

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "requests": self.requests,
        }

    @classmethod
    def from_dict(cls, data: dict[str, int]) -> Usage:
        return cls(**{k: int(v) for k, v in data.items() if k in _USAGE_FIELDS})


_USAGE_FIELDS = frozenset(
    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "requests")
)


@dataclass(frozen=True, slots=True)
class AssistantTurn:
    """One complete model reply: what the scripted provider replays and turn assembly builds."""

    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
