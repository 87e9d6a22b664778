"""Events a run emits: to hooks (``AgentHooks``) and to ``Runner.stream`` consumers.

Events are plain slotted dataclasses grouped by category bases, so a handler can subscribe
to a family with ``isinstance`` (``@hooks.on(ToolEvent)``). Deltas are provisional until
``MessageCompleted``; every stream ends with exactly one ``RunCompleted`` or ``RunFailed``.

``TextDelta`` and ``ReasoningDelta`` are also the provider stream's text pieces
(``lovia.providers.base`` re-exports them): the loop forwards the provider's own objects,
so streaming costs no allocation per delta.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .messages import ToolCall

if TYPE_CHECKING:
    from .agent import Agent
    from .runtime.result import RunResult
    from .transcript import TranscriptEntry

__all__ = [
    "ApprovalRequired",
    "CompactionNotice",
    "ContextCompacted",
    "ContextEvent",
    "DeltaEvent",
    "ErrorEvent",
    "Event",
    "HandoffOccurred",
    "MessageCompleted",
    "MessageEvent",
    "OutputDiscarded",
    "ReasoningDelta",
    "RunCompleted",
    "RunEvent",
    "RunFailed",
    "RunStarted",
    "TextDelta",
    "ToolCallCompleted",
    "ToolCallFailed",
    "ToolCallStarted",
    "ToolEvent",
    "ToolFailure",
    "TransitionEvent",
    "TurnEnded",
    "TurnEvent",
    "TurnStarted",
    "UserMessageInjected",
]


class Event:
    """Base of every event."""

    __slots__ = ()


class RunEvent(Event):
    """Run lifecycle: started, completed, failed."""

    __slots__ = ()


class TurnEvent(Event):
    """Turn boundaries."""

    __slots__ = ()


class DeltaEvent(Event):
    """Provisional streamed output."""

    __slots__ = ()


class MessageEvent(Event):
    """Entries that reached the transcript."""

    __slots__ = ()


class ToolEvent(Event):
    """Tool calls, their results and approvals."""

    __slots__ = ()


class TransitionEvent(Event):
    """Control moving between agents."""

    __slots__ = ()


class ErrorEvent(Event):
    """Something failed."""

    __slots__ = ()


class ContextEvent(Event):
    """The context policy changed the view."""

    __slots__ = ()


@dataclass(slots=True)
class RunStarted(RunEvent):
    agent: Agent[Any]


@dataclass(slots=True)
class TurnStarted(TurnEvent):
    agent: Agent[Any]
    turn: int


@dataclass(slots=True)
class TurnEnded(TurnEvent):
    agent: Agent[Any]
    turn: int


@dataclass(slots=True)
class TextDelta(DeltaEvent):
    """A piece of assistant text (provisional until ``MessageCompleted``)."""

    delta: str


@dataclass(slots=True)
class ReasoningDelta(DeltaEvent):
    """A piece of reasoning text (provisional)."""

    delta: str


@dataclass(slots=True)
class OutputDiscarded(DeltaEvent):
    """Deltas streamed so far for this turn are void: the provider failed mid-stream and the
    turn is being re-streamed."""

    reason: str = ""


@dataclass(slots=True)
class MessageCompleted(MessageEvent):
    """A model reply landed in the transcript as ``entries``."""

    entries: list[TranscriptEntry]


@dataclass(slots=True)
class UserMessageInjected(MessageEvent):
    """A mailbox message became a user entry at the start of ``turn``."""

    content: Any
    turn: int


@dataclass(slots=True)
class ToolCallStarted(ToolEvent):
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolFailure:
    """Why a tool raised, for the developer (the model sees only ``output``)."""

    type: str
    """The exception's class name."""
    message: str
    traceback: str
    """The formatted traceback, chained causes included."""

    @classmethod
    def from_exception(cls, error: BaseException) -> ToolFailure:
        import traceback

        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return cls(type(error).__name__, str(error), text)

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback}


@dataclass(slots=True)
class ToolCallCompleted(ToolEvent):
    """A call got its result: ``result`` is the raw value, ``output`` what the model saw.

    ``failure`` says why a tool that raised failed (type, message, traceback); ``None``
    for a success and for a call rejected before it ran.
    """

    call: ToolCall
    result: Any
    is_error: bool
    output: str
    failure: ToolFailure | None = None


@dataclass(slots=True)
class ToolCallFailed(ToolEvent):
    """A tool attempt, predicate or handler raised (observability only; not terminal)."""

    error: BaseException
    call: ToolCall


@dataclass(slots=True)
class ApprovalRequired(ToolEvent):
    """A gated call waits for a decision: call ``approve()`` or ``reject()``.

    Nobody deciding means deny: the run never waits forever on this event.
    """

    call: ToolCall
    _decide: Callable[[bool, str | None], None] | None = field(
        default=None, repr=False, compare=False
    )

    def approve(self) -> None:
        if self._decide is not None:
            self._decide(True, None)

    def reject(self, reason: str | None = None) -> None:
        if self._decide is not None:
            self._decide(False, reason)


@dataclass(slots=True)
class HandoffOccurred(TransitionEvent):
    from_agent: Agent[Any]
    to_agent: Agent[Any]


@dataclass(frozen=True, slots=True)
class CompactionNotice:
    """A JSON-safe account of a compaction: why, how much, and human-readable ``detail``."""

    reason: str
    reactive: bool = False
    summary: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    detail: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "reactive": self.reactive,
            "summary": self.summary,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "detail": list(self.detail),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionNotice:
        return cls(
            reason=str(data.get("reason", "")),
            reactive=bool(data.get("reactive", False)),
            summary=data.get("summary"),
            tokens_before=int(data.get("tokens_before", 0)),
            tokens_after=int(data.get("tokens_after", 0)),
            detail=tuple(str(d) for d in data.get("detail", ())),
        )


@dataclass(slots=True)
class ContextCompacted(ContextEvent):
    session_id: str | None
    entries_before: int
    entries_after: int
    notice: CompactionNotice


@dataclass(slots=True)
class RunCompleted(RunEvent):
    result: RunResult[Any]


@dataclass(slots=True)
class RunFailed(RunEvent, ErrorEvent):
    error: BaseException
