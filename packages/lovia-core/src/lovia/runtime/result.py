"""``RunResult`` and ``RunHandle``: what a run returns and how a caller drives it.

The stream contract ``RunHandle`` keeps:

* Iteration is single-shot; a second ``async for`` raises ``RunHandleError`` (a
  ``UserError`` that is also a ``RuntimeError``, with a hint).
* Iteration never raises for a run failure: it ends with exactly one ``RunCompleted`` or
  ``RunFailed`` and stops. Errors become exceptions only at ``result()``.
* ``result()`` drives an unconsumed stream itself. While another task iterates the handle
  (one task forwarding events, another awaiting the result), it waits for that iteration
  to end. If the consumer broke out early (the iterating task is this one, or it ended
  before the terminal event), ``result()`` raises ``RunHandleError`` instead of returning
  a partial result (and closes the run).
* asyncio task cancellation and other ``BaseException``s propagate unchanged.

To keep streaming cheap, ``__anext__`` hands out the run generator's own awaitable: the
handle adds no generator layer per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..events import Event, RunFailed
from ..exceptions import UserError
from ..messages import Message, Usage
from ..transcript import TranscriptEntry, entries_to_messages

if TYPE_CHECKING:
    from ..agent import Agent
    from ..approvals import ApprovalChannel
    from .loop import RunLoop

__all__ = ["RunHandle", "RunHandleError", "RunResult", "build_result"]

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


def build_result(
    output: Any,
    entries: Sequence[TranscriptEntry],
    *,
    agent: Agent[Any],
    usage: Usage,
    turns: int,
    finish_reason: str | None,
    last_input_tokens: int | None,
    run_id: str,
    session_id: str | None,
) -> RunResult[Any]:
    """The one way a run's result is built (a finished run and a replayed one alike)."""
    return RunResult(
        output=output,
        entries=list(entries),
        final_agent=agent,
        usage=usage,
        turns=turns,
        finish_reason=finish_reason,
        last_input_tokens=last_input_tokens,
        run_id=run_id,
        session_id=session_id,
    )


class RunHandleError(UserError, RuntimeError):
    """A ``RunHandle`` was used against its contract (iterated twice, abandoned, ...)."""


_FRESH, _ITERATING, _DONE = 0, 1, 2


class RunHandle(Generic[T]):
    """A run in progress: async-iterable for events, awaitable for the ``RunResult``.

    Obtain one from ``Runner.stream`` (or ``agent.stream``). ``cancel(reason)`` fires the
    run's cancel token; ``approvals`` decides gated tool calls by call id.
    """

    __slots__ = ("_agen", "_iterator", "_loop", "_state")

    def __init__(self, loop: RunLoop[T]) -> None:
        self._loop = loop
        self._agen: AsyncGenerator[Event, None] | None = None
        self._state = _FRESH
        self._iterator: asyncio.Task[Any] | None = None
        """The task that iterates the handle (``result()`` from another task waits for it)."""

    def __repr__(self) -> str:
        state = ("fresh", "iterating", "done")[self._state]
        return f"RunHandle(agent={self._loop.agent.name!r}, state={state})"

    # -- iteration --------------------------------------------------------------------

    def __aiter__(self) -> RunHandle[T]:
        if self._state != _FRESH:
            raise RunHandleError(
                "a RunHandle can be iterated only once",
                hint="keep the events you need from the first iteration, or await "
                "handle.result() for the outcome; start a new run for a new stream",
            )
        self._state = _ITERATING
        self._iterator = asyncio.current_task()
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

        Awaited while another task iterates the handle, it waits for that iteration to end.
        Raises ``RunHandleError`` if the consumer stopped iterating before the terminal event.
        """
        loop = self._loop
        if self._state == _FRESH:
            async for _ in self:
                pass
        elif loop.terminal is None:
            iterator = self._iterator
            elsewhere = iterator is not None and iterator is not asyncio.current_task()
            if elsewhere and iterator is not None and not iterator.done():
                # Another task forwards the events: wait for its terminal (or for that task
                # to end without one, which is an abandoned stream).
                reached = loop.terminal_reached()
                await asyncio.wait((reached, iterator), return_when=asyncio.FIRST_COMPLETED)
        terminal = loop.terminal
        if terminal is None:
            # Abandoned mid-stream: tear the run down rather than return a partial result.
            if self._agen is not None:
                await self._agen.aclose()
            raise RunHandleError(
                "the run's stream was abandoned before it finished, so it has no result",
                hint="iterate the handle to its end (or do not iterate it and await result())",
            )
        self._state = _DONE
        if isinstance(terminal, RunFailed):
            raise terminal.error
        return terminal.result

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
