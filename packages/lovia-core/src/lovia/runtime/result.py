"""``RunResult`` and ``RunHandle``: what a run returns and how a caller drives it.

The stream contract ``RunHandle`` keeps:

* Iteration is single-shot; a second ``async for`` raises ``RuntimeError``.
* Iteration never raises for a run failure: it ends with exactly one ``RunCompleted`` or
  ``RunFailed`` and stops. Errors become exceptions only at ``result()``.
* ``result()`` drives an unconsumed stream itself. If the consumer broke out early,
  ``result()`` raises instead of returning a partial result (and closes the run).
* asyncio task cancellation and other ``BaseException``s propagate unchanged.

To keep streaming cheap, ``__anext__`` hands out the run generator's own awaitable: the
handle adds no generator layer per event.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..events import Event
from ..messages import Message, Usage
from ..transcript import TranscriptEntry, entries_to_messages

if TYPE_CHECKING:
    from ..agent import Agent
    from ..approvals import ApprovalChannel
    from .loop import RunLoop

__all__ = ["RunHandle", "RunResult"]

T = TypeVar("T")


@dataclass(slots=True, eq=False, repr=False, kw_only=True)
class RunResult(Generic[T]):
    """The outcome of a successful run."""

    output: T
    """The final output: text, or a validated ``output_type`` value."""
    entries: list[TranscriptEntry]
    """This run's own entries: no system head, no prior history."""
    final_agent: Agent[Any]
    """The agent active when the run ended (a handoff target, possibly)."""
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    finish_reason: str | None = None
    """The last model call's finish reason; ``None`` when unreported or replayed."""
    last_input_tokens: int | None = None
    """The final model call's input tokens (not a sum)."""
    run_id: str | None = None
    session_id: str | None = None

    @property
    def messages(self) -> list[Message]:
        """The lossy chat view of ``entries``."""
        return entries_to_messages(self.entries)

    def __repr__(self) -> str:
        out = repr(self.output)
        if len(out) > 60:
            out = out[:57] + "..."
        return (
            f"RunResult(output={out}, agent={self.final_agent.name!r}, turns={self.turns}, "
            f"entries={len(self.entries)}, tokens={self.usage.total_tokens})"
        )


_FRESH, _ITERATING, _DONE = 0, 1, 2


class RunHandle(Generic[T]):
    """A run in progress: async-iterable for events, awaitable for the ``RunResult``.

    Obtain one from ``Runner.stream`` (or ``agent.stream``). ``cancel(reason)`` fires the
    run's cancel token; ``approvals`` decides gated tool calls by call id.
    """

    __slots__ = ("_agen", "_loop", "_state")

    def __init__(self, loop: RunLoop[T]) -> None:
        self._loop = loop
        self._agen: AsyncGenerator[Event, None] | None = None
        self._state = _FRESH

    def __repr__(self) -> str:
        state = ("fresh", "iterating", "done")[self._state]
        return f"RunHandle(agent={self._loop.agent.name!r}, state={state})"

    # -- iteration --------------------------------------------------------------------

    def __aiter__(self) -> RunHandle[T]:
        if self._state != _FRESH:
            raise RuntimeError("a RunHandle can be iterated only once")
        self._state = _ITERATING
        self._agen = self._loop.stream()
        return self

    def __anext__(self) -> Awaitable[Event]:
        agen = self._agen
        if agen is None:  # anext(handle) without `async for`: start iterating
            agen = self.__aiter__()._agen
            assert agen is not None
        return agen.__anext__()

    # -- results ----------------------------------------------------------------------

    async def result(self) -> RunResult[T]:
        """The run's result: drives the stream if nobody iterated it; raises its error.

        Raises ``RuntimeError`` if the consumer stopped iterating before the terminal event.
        """
        loop = self._loop
        if self._state == _FRESH:
            async for _ in self:
                pass
        if not loop.finished:
            # Abandoned mid-stream: tear the run down rather than return a partial result.
            if self._agen is not None:
                await self._agen.aclose()
            raise RuntimeError(
                "the run's stream was abandoned before it finished, so it has no result; "
                "iterate the handle to its end (or do not iterate it and await result())"
            )
        self._state = _DONE
        if loop.error is not None:
            raise loop.error
        assert loop.result is not None
        return loop.result

    def __await__(self) -> Generator[Any, None, RunResult[T]]:
        return self.result().__await__()

    # -- control ----------------------------------------------------------------------

    def cancel(self, reason: str | None = None) -> None:
        """Cancel the run (idempotent); the stream ends with ``RunFailed(RunCancelled)``."""
        self._loop.cancel_token.cancel(reason)

    @property
    def approvals(self) -> ApprovalChannel:
        """The out-of-band channel deciding this run's gated tool calls by call id."""
        return self._loop.approvals

    @property
    def run_id(self) -> str:
        """The run's id: the checkpoint's ``run_id``, or one generated for the run."""
        return self._loop.run_id
