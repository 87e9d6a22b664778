"""``ScriptedProvider``: the public, deterministic test double for a model.

A script is a FIFO of steps. Each step is an ``AssistantTurn`` to replay (build them with
``text()``, ``call()`` and ``batch()``) or an exception instance to raise. Text streams
character by character, tool calls arrive as one fragment each, and every reply ends with
a ``FinishDelta``. A call past the end of the script raises ``AssertionError``;
``unused_steps`` and ``assert_consumed()`` report what the test never reached.

Exceptions can also fail *mid-stream*: ``fail_after(exc, turn, deltas=n)`` streams the
first ``n`` deltas of ``turn`` and then raises ``exc`` (for the retry tests).

Every view the provider is sent is recorded in O(1): the provider keeps a reference to
the view, its length and its first entry, and converts to messages only when a test reads
``calls`` (the run's transcript is append-only, apart from its system head).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union, overload

from .events import ReasoningDelta, TextDelta
from .messages import AssistantTurn, Message, ToolCall, Usage
from .providers.base import FinishDelta, ModelDelta, ModelSettings, ToolCallDelta, UsageDelta
from .transcript import TranscriptEntry, entries_to_messages

if TYPE_CHECKING:
    from .tools.base import Tool

__all__ = [
    "MidStreamFailure",
    "ScriptStep",
    "ScriptedProvider",
    "batch",
    "call",
    "fail_after",
    "text",
]


@dataclass(frozen=True, slots=True)
class MidStreamFailure:
    """A step that streams the first ``deltas`` deltas of ``turn`` and then raises ``error``."""

    error: BaseException
    turn: AssistantTurn
    deltas: int


ScriptStep = Union[AssistantTurn, BaseException, MidStreamFailure]
"""One step of a script: a reply, an exception to raise, or a mid-stream failure."""


def text(
    content: str, *, reasoning: str | None = None, usage: Usage | None = None
) -> AssistantTurn:
    """A final text reply (optionally with reasoning)."""
    return AssistantTurn(content=content, reasoning=reasoning, usage=usage, finish_reason="stop")


def call(
    name: str,
    args: dict[str, Any] | str | None = None,
    *,
    call_id: str | None = None,
    content: str = "",
    usage: Usage | None = None,
) -> AssistantTurn:
    """A reply with one tool call; ``args`` may be a dict or raw JSON text (even invalid).

    The default ``call_id`` is ``call_<name>``.
    """
    return AssistantTurn(
        content=content,
        tool_calls=(_tool_call(name, args, call_id),),
        usage=usage,
        finish_reason="tool_calls",
    )


def batch(
    *calls: tuple[str, dict[str, Any] | str | None] | tuple[str, dict[str, Any] | str | None, str],
    content: str = "",
    usage: Usage | None = None,
) -> AssistantTurn:
    """A reply with several tool calls: ``batch(("a", {...}), ("b", {...}, "id_b"))``.

    Without an explicit id, the n-th call gets ``call_<n>_<name>`` (unique per batch).
    """
    tool_calls = []
    for i, item in enumerate(calls):
        name, args = item[0], item[1]
        call_id = item[2] if len(item) > 2 else f"call_{i}_{name}"
        tool_calls.append(_tool_call(name, args, call_id))
    return AssistantTurn(
        content=content, tool_calls=tuple(tool_calls), usage=usage, finish_reason="tool_calls"
    )


def fail_after(error: BaseException, turn: AssistantTurn, *, deltas: int) -> MidStreamFailure:
    """A step that streams ``deltas`` deltas of ``turn`` and then raises ``error``."""
    return MidStreamFailure(error, turn, deltas)


def _tool_call(name: str, args: dict[str, Any] | str | None, call_id: str | None) -> ToolCall:
    arguments = args if isinstance(args, str) else json.dumps(args or {})
    return ToolCall(call_id or f"call_{name}", name, arguments)


def _deltas_of(turn: AssistantTurn) -> tuple[ModelDelta, ...]:
    out: list[ModelDelta] = []
    if turn.reasoning:
        out.extend(ReasoningDelta(ch) for ch in turn.reasoning)
    out.extend(TextDelta(ch) for ch in turn.content)
    for i, c in enumerate(turn.tool_calls):
        out.append(ToolCallDelta(i, c.id, c.name, c.arguments))
    if turn.usage is not None:
        out.append(UsageDelta(turn.usage))
    out.append(FinishDelta(turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Recorded:
    """One view, recorded in O(1): a reference, its length, and its first and last entries.

    The run's transcript is append-only except for its system head, which may be replaced
    (kept here as ``first``) or, on a handoff to or from a system-less agent, inserted or
    removed; ``last`` locates the recorded span again after such a shift.
    """

    view: Sequence[TranscriptEntry]
    length: int
    first: TranscriptEntry | None
    last: TranscriptEntry | None

    def entries(self) -> list[TranscriptEntry]:
        n = self.length
        if n == 0 or self.first is None:
            return []
        view = self.view
        shift = 0
        for d in (0, 1, -1):
            if 0 <= n - 1 + d < len(view) and view[n - 1 + d] is self.last:
                shift = d
                break
        rest = list(view[1 + shift : n + shift]) if n > 1 else []
        return [self.first, *rest]


class _LazyCalls(Sequence[list[Message]]):
    """``provider.calls``: each recorded view converted to messages on access."""

    def __init__(self, records: list[_Recorded]) -> None:
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> list[Message]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[Message]]: ...

    def __getitem__(self, index: int | slice) -> list[Message] | list[list[Message]]:
        if isinstance(index, slice):
            return [entries_to_messages(r.entries()) for r in self._records[index]]
        return entries_to_messages(self._records[index].entries())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return repr(list(self))


class ScriptedProvider:
    """A provider that replays a script of canned replies (see the module docstring).

    ``supports_json_schema`` is ``False`` by default, so structured output goes through the
    system-prompt fallback; pass ``True`` to exercise the native path (the request's
    ``response_format`` is recorded in ``response_formats``).
    """

    name = "scripted"

    def __init__(
        self,
        script: Iterable[ScriptStep] = (),
        *,
        model: str = "scripted-model",
        supports_json_schema: bool = False,
        supports_vision: bool = False,
    ) -> None:
        self.model = model
        self.supports_json_schema = supports_json_schema
        self.supports_vision = supports_vision
        # Deltas are built here, not per call, so a replay costs O(1) plus its deltas.
        self._script: list[tuple[ScriptStep, tuple[ModelDelta, ...]]] = [
            (step, _prepare(step)) for step in script
        ]
        self._next = 0
        self._records: list[_Recorded] = []
        self.tools: list[tuple[str, ...]] = []
        """The tool names offered on each call."""
        self.response_formats: list[dict[str, Any] | None] = []
        """The ``response_format`` sent on each call."""
        self.settings: list[ModelSettings | None] = []
        """The ``ModelSettings`` sent on each call."""

    def __repr__(self) -> str:
        return f"ScriptedProvider(steps={len(self._script)}, used={self._next})"

    # -- what the run sent ------------------------------------------------------------

    @property
    def calls(self) -> Sequence[list[Message]]:
        """Every view sent, as lossy chat messages (``list[list[Message]]``-like)."""
        return _LazyCalls(self._records)

    @property
    def views(self) -> list[list[TranscriptEntry]]:
        """Every view sent, as entries."""
        return [r.entries() for r in self._records]

    @property
    def unused_steps(self) -> list[ScriptStep]:
        """Script steps never reached."""
        return [step for step, _ in self._script[self._next :]]

    def assert_consumed(self) -> None:
        """Raise ``AssertionError`` if some script steps were never used."""
        if self._next < len(self._script):
            raise AssertionError(
                f"ScriptedProvider has {len(self._script) - self._next} unused step(s): "
                f"{self.unused_steps!r}"
            )

    # -- the Provider protocol --------------------------------------------------------

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Replay the next step of the script."""
        n = len(entries)
        self._records.append(
            _Recorded(entries, n, entries[0] if n else None, entries[n - 1] if n else None)
        )
        self.tools.append(tuple(t.name for t in tools))
        self.response_formats.append(response_format)
        self.settings.append(settings)
        if self._next >= len(self._script):
            raise AssertionError("ScriptedProvider ran out of canned responses")
        step, deltas = self._script[self._next]
        self._next += 1
        if isinstance(step, BaseException):
            raise step
        for delta in deltas:
            yield delta
        if isinstance(step, MidStreamFailure):
            raise step.error


def _prepare(step: ScriptStep) -> tuple[ModelDelta, ...]:
    if isinstance(step, AssistantTurn):
        return _deltas_of(step)
    if isinstance(step, MidStreamFailure):
        return _deltas_of(step.turn)[: step.deltas]
    if isinstance(step, BaseException):
        return ()
    raise TypeError(f"a script step must be an AssistantTurn or an exception, got {step!r}")
