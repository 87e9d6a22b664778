"""One model call: stream the provider, forward deltas, assemble the reply, retry.

Assembly rules (``TurnAssembly``): text and reasoning accumulate; tool calls are rebuilt
from their ``index`` slots (fragments of different calls may interleave; ``call_id`` and
``name`` arrive once, ``arguments`` concatenate byte for byte); an ``EntryCompletedDelta``
wins over what accumulated for the same content. The reply's entries are ordered
reasoning, text, tool calls.

Forwarding: the provider's ``TextDelta``/``ReasoningDelta`` objects are yielded unchanged
(no allocation per delta). Everything else is absorbed here.

Truncation: a stream must end with ``FinishDelta``; one that stops without it raises the
retryable truncation error here, for every provider (an adapter may raise it first).

Retries (``RetryPolicy``): the transcript only ever receives a *completed* reply. When a
retryable error interrupts a stream, the partial is dropped and the call re-streamed;
``OutputDiscarded`` is emitted only if text or reasoning had been forwarded (a partial
made only of tool-call fragments resets silently). ``restart_on_partial=False`` lets such
an error propagate, as does a non-retryable one. ``ContextOverflowError`` is never retried
blindly: the context policy gets one reactive chance (``on_overflow``) and the call is
retried once only if the policy produced a new view and nothing had been forwarded.
Retries add no turns.

Cancellation: while the provider streams, the turn has a one-shot callback on the run's
``CancelToken`` (the token is not polled per delta). When the token fires, the task
consuming the stream is cancelled, but only while it waits inside the provider's stream
(the generator is running, i.e. suspended at the provider's await). While the consumer
holds a delta, or a hook runs, a task cancel would land in their code, so the turn only
notes the cancel (``_due``, one flag read per forwarded delta) and raises ``RunCancelled``
when the consumer resumes the stream; a consumer that broke out and never resumes leaves
nothing waiting. Our ``CancelledError`` (only ours: on 3.11+ the task's cancel request is
withdrawn with ``uncancel()``, and another pending request, an outer ``asyncio.timeout()``
say, keeps it a ``CancelledError``) closes the provider stream and becomes
``RunCancelled``, as a cancel between turns does; the cut-off reply is dropped, like one
cut off by an error. The task cancelled is the one that last resumed the stream (a
``RunHandle`` passed to another task mid-stream is followed there).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from types import AsyncGeneratorType
from typing import TYPE_CHECKING, Any

from ..events import Event, OutputDiscarded, ReasoningDelta, TextDelta
from ..exceptions import ContextOverflowError
from ..messages import Usage
from ..providers.base import (
    EntryCompletedDelta,
    FinishDelta,
    ModelDelta,
    ModelSettings,
    ToolCallDelta,
    UsageDelta,
)
from ..transcript import AssistantTextEntry, ReasoningEntry, ToolCallEntry, TranscriptEntry

if TYPE_CHECKING:
    from ..cancellation import CancelToken
    from ..providers.base import Provider
    from ..retry import RetryPolicy
    from ..tools.base import Tool
    from ..tracing import Tracer

__all__ = ["ModelTurn", "TurnAssembly", "unique_call_id"]

_log = logging.getLogger("lovia.runtime")

_UNCANCEL = sys.version_info >= (3, 11)
"""``Task.cancelling()``/``uncancel()`` exist: our cancel request can be told from others."""
if sys.version_info >= (3, 12):
    _task_on = asyncio.current_task
    """The task running on a loop (C from 3.12)."""
else:
    # 3.10/3.11's current_task is Python (get_running_loop plus this dict's lookup, about
    # 160 ns) and the stream asks once per delta, so it reads the dict itself: those
    # versions are frozen, and 3.12+ takes the public C function above.
    _task_on = asyncio.tasks._current_tasks.get  # type: ignore[attr-defined,unused-ignore]
_INTERRUPT = "lovia: the run's cancel token fired during a model call"
"""The message of our task cancel (on 3.10, how our ``CancelledError`` is recognised)."""

OverflowHandler = Callable[[ContextOverflowError], Awaitable["Sequence[TranscriptEntry] | None"]]
"""Asks the context policy for a smaller view; ``None`` when it made no new decision."""


class TurnAssembly:
    """The pieces of one streamed reply, assembled into entries by ``entries()``."""

    __slots__ = (
        "_completed_reasoning",
        "_completed_text",
        "_slots",
        "finish_reason",
        "finished",
        "forwarded",
        "reasoning",
        "text",
        "usage",
    )

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self._slots: dict[int, list[Any]] = {}  # index -> [call_id, name, [fragments], entry]
        self._completed_reasoning: list[ReasoningEntry] = []
        self._completed_text: list[AssistantTextEntry] = []
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.finished = False
        """Whether the stream ended with ``FinishDelta`` (without it, it was truncated)."""
        self.forwarded = False
        """Whether text or reasoning reached the consumer (a restart must discard it)."""

    def feed(self, delta: ModelDelta) -> None:
        """Absorb a non-text delta."""
        if isinstance(delta, ToolCallDelta):
            slot = self._slots.get(delta.index)
            if slot is None:
                slot = self._slots[delta.index] = [None, None, [], None]
            if delta.call_id:
                slot[0] = delta.call_id
            if delta.name:
                slot[1] = delta.name
            if delta.arguments:
                slot[2].append(delta.arguments)
        elif isinstance(delta, UsageDelta):
            self.usage = delta.usage if self.usage is None else self.usage.updated(delta.usage)
        elif isinstance(delta, FinishDelta):
            self.finish_reason = delta.reason
            self.finished = True
        elif isinstance(delta, EntryCompletedDelta):
            self._complete(delta)
        elif isinstance(delta, TextDelta):  # a provider that bypassed the fast path
            self.text.append(delta.delta)
        elif isinstance(delta, ReasoningDelta):
            self.reasoning.append(delta.delta)

    @property
    def touched(self) -> bool:
        """Whether any delta arrived at all."""
        return bool(self.text or self.reasoning or self._slots or self.usage is not None) or bool(
            self._completed_reasoning or self._completed_text
        )

    @property
    def has_tool_fragments(self) -> bool:
        """Whether any tool-call piece arrived (a partial made only of these resets silently)."""
        return bool(self._slots)

    def _complete(self, delta: EntryCompletedDelta) -> None:
        entry = delta.entry
        if isinstance(entry, ReasoningEntry):
            self._completed_reasoning.append(entry)
        elif isinstance(entry, AssistantTextEntry):
            self._completed_text.append(entry)
        elif isinstance(entry, ToolCallEntry):
            index = delta.index if delta.index is not None else len(self._slots)
            slot = self._slots.setdefault(index, [None, None, [], None])
            slot[3] = entry

    def entries(self, provider: str | None, taken: dict[str, int]) -> list[TranscriptEntry]:
        """The reply as transcript entries: reasoning, then text, then tool calls.

        ``taken`` holds the call ids the run already used (``unique_call_id``); each call's
        id is made unique against it, so every consumer can pair a result with its call by id.
        """
        out: list[TranscriptEntry] = []
        if self._completed_reasoning:
            out.extend(self._completed_reasoning)
        elif self.reasoning:
            out.append(ReasoningEntry("".join(self.reasoning), provider=provider))
        if self._completed_text:
            out.extend(self._completed_text)
        elif self.text:
            content = "".join(self.text)
            if content:
                out.append(AssistantTextEntry(content))
        for index in sorted(self._slots):
            call_id, name, fragments, entry = self._slots[index]
            if entry is not None:  # the provider sent the whole entry
                call_id, name, arguments = entry.call_id, entry.name, entry.arguments
            elif name:
                call_id, arguments = call_id or "", "".join(fragments) or "{}"
            else:
                continue
            unique = unique_call_id(call_id, taken)
            if unique != call_id and _log.isEnabledFor(logging.INFO):
                # (Every turn for a server that repeats its ids: no Logger.info call when off.)
                _log.info("model.call_id_rewritten: %r -> %r", call_id, unique)
            if entry is None or unique != call_id:
                # Built once, with its unique id (some servers repeat an id every turn).
                entry = ToolCallEntry(unique, name, arguments)
            out.append(entry)
        return out


def unique_call_id(call_id: str, taken: dict[str, int]) -> str:
    """``call_id`` if the run has not used it yet, else the first free ``<id>_<n>``.

    Some OpenAI-compatible servers send blank or repeated ids; pairing results by id only
    works when ids are unique. The rewritten id is what the transcript keeps, so a replay
    sends the same id with the call and with its result, which is all a provider checks.
    ``taken`` maps every id the run used to the next suffix to try for it (amortised O(1)
    even when a server repeats one id every turn); the new id is recorded in it.
    """
    if call_id and call_id not in taken:
        taken[call_id] = 1
        return call_id
    base = call_id or "call"
    n = taken.get(base, 1)
    while f"{base}_{n}" in taken:
        n += 1
    taken[base] = n + 1
    unique = f"{base}_{n}"
    taken[unique] = 1
    return unique


class ModelTurn:
    """One model call with its retries; iterate ``stream()``, then read ``assembly``."""

    __slots__ = (
        "__weakref__",
        "_agen",
        "_due",
        "_fired",
        "_task",
        "assembly",
        "on_overflow",
        "provider",
        "response_format",
        "retry",
        "settings",
        "token",
        "tools",
        "tracer",
        "turn",
        "view",
    )

    def __init__(
        self,
        provider: Provider,
        view: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool],
        response_format: dict[str, Any] | None,
        settings: ModelSettings,
        retry: RetryPolicy | None,
        token: CancelToken,
        tracer: Tracer,
        turn: int,
        on_overflow: OverflowHandler,
    ) -> None:
        self.provider = provider
        self.view = view
        self.tools = tools
        self.response_format = response_format
        self.settings = settings
        self.retry = retry
        self.token = token
        self.tracer = tracer
        self.turn = turn
        self.on_overflow = on_overflow
        self.assembly: TurnAssembly
        self._agen: AsyncGenerator[Event, None] | None = None
        self._task: asyncio.Task[Any] | None = None
        """The task consuming the stream while a cancel may interrupt it (else ``None``)."""
        self._fired = False
        """Whether we cancelled ``_task`` and its ``CancelledError`` is still to come."""
        self._due = False
        """Whether the token fired while the consumer held a delta: the stream raises
        ``RunCancelled`` when the consumer resumes it (nothing to interrupt before)."""

    def stream(self) -> AsyncGenerator[Event, None]:
        """Yield the forwarded deltas (and ``OutputDiscarded`` on a restart).

        The generator is kept: a cancel tells from it whether its consumer waits inside
        the provider's stream (see the module docstring).
        """
        agen = self._agen = self._stream()
        return agen

    async def _stream(self) -> AsyncGenerator[Event, None]:
        """``stream()``'s generator.

        The provider loop is inlined here (not a helper generator): every generator layer
        costs about 0.15 us per delta, and deltas are the hot path.
        """
        attempt = 0
        started = time.monotonic()
        overflow_tried = False
        provider = self.provider
        while True:
            # A cancel during the reactive compaction (or anything else before a new
            # attempt) must not start the call: a provider that answers without
            # suspending would finish it before the interrupt could land.
            self.token.check()
            attempt += 1
            asm = self.assembly = TurnAssembly()
            text = asm.text
            reasoning = asm.reasoning
            feed = asm.feed
            interrupted = False  # our cancel reached the provider, which raised another error
            try:
                with self.tracer.span(
                    "model_call", model=provider.model, provider=provider.name, turn=self.turn
                ) as span:
                    stream = provider.stream(
                        self.view,
                        tools=self.tools,
                        response_format=self.response_format,
                        settings=self.settings,
                    )
                    # Armed for the provider's stream only: once per call, not per delta.
                    self._task = task = asyncio.current_task()
                    # A consumer may hand the stream to another task between deltas (a
                    # handle passed on mid-run). The cancel must follow it: cancelling the
                    # task that started the call would hit one that no longer iterates, and
                    # leave the call itself running. So after each yield, the task that
                    # resumed the generator becomes the one to cancel (one C call a delta).
                    loop = task.get_loop() if task is not None else None
                    on_cancel = self._on_cancel
                    self.token.add_callback(on_cancel)
                    try:
                        async for delta in stream:
                            kind = type(delta)
                            if kind is TextDelta:
                                text.append(delta.delta)  # type: ignore[union-attr]  # narrowed by kind
                                asm.forwarded = True
                                yield delta  # type: ignore[misc]  # TextDelta is an Event
                                if self._due:  # the cancel came while the consumer held it
                                    self.token.check()
                                if _task_on(loop) is not task and not self._fired:
                                    task = self._task = _task_on(loop)  # (handed over)
                            elif kind is ReasoningDelta:
                                reasoning.append(delta.delta)  # type: ignore[union-attr]  # narrowed
                                asm.forwarded = True
                                yield delta  # type: ignore[misc]  # ReasoningDelta is an Event
                                if self._due:  # the cancel came while the consumer held it
                                    self.token.check()
                                if _task_on(loop) is not task and not self._fired:
                                    task = self._task = _task_on(loop)  # (handed over)
                            else:
                                feed(delta)
                    except asyncio.CancelledError as exc:
                        if self._fired and self._ours(task, exc):
                            self.token.check()  # raises RunCancelled (the token has fired)
                        raise
                    finally:
                        self.token.remove_callback(on_cancel)
                        self._task = None
                        if self._fired:  # the provider turned our cancel into something else
                            interrupted = True
                            self._withdraw(task)
                        # An abandoned, failed or cancelled stream still releases its
                        # connection (for an HTTP adapter, the vendor stops generating).
                        close = getattr(stream, "aclose", None)
                        if close is not None:
                            await close()
                    if not asm.finished:
                        # The provider contract: a stream ends with FinishDelta. Enforced
                        # here, so every provider's truncation gets the retry.
                        from ..providers._http import truncated

                        raise truncated(provider.name, provider.model, empty=not asm.touched)
                    if asm.usage is not None:
                        span.set_attribute("input_tokens", asm.usage.input_tokens)
                        span.set_attribute("output_tokens", asm.usage.output_tokens)
                return
            except ContextOverflowError as exc:
                if overflow_tried or asm.forwarded:
                    raise
                overflow_tried = True
                self.view = await self._reactive_view(exc)
                attempt -= 1  # the reactive retry is the policy's, not the retry policy's
            except Exception as exc:  # noqa: BLE001 - the retry policy re-raises what it rejects
                if interrupted:
                    # The error is the provider's answer to our cancel (an adapter that wraps
                    # every read failure): the run was cancelled, not failed, and no retry.
                    self.token.check()
                if self._restart_discards(exc, attempt, asm, started):
                    yield OutputDiscarded(reason=str(exc) or type(exc).__name__)
                why = getattr(exc, "message", None) or exc
                _log.warning("model.retry: turn=%d attempt=%d error=%s", self.turn, attempt, why)
                assert self.retry is not None
                await self.retry.backoff(attempt, exc, self.token)

    def _on_cancel(self) -> None:
        """The token fired (in any thread): look at the consumer from its loop."""
        task = self._task
        if task is None:
            return
        try:
            task.get_loop().call_soon_threadsafe(_interrupt, weakref.ref(self))
        except RuntimeError:  # the loop is closed: nothing runs there to interrupt
            pass

    def _ours(self, task: asyncio.Task[Any] | None, exc: asyncio.CancelledError) -> bool:
        """Whether ``exc`` is our interrupt alone (withdrawing our cancel request on 3.11+)."""
        left = self._withdraw(task)
        if _UNCANCEL:
            # Zero left: nobody else asked to cancel the task (an outer timeout's request
            # stays counted, and its CancelledError propagates for it to turn into its own).
            return left == 0
        return exc.args[:1] == (_INTERRUPT,)

    def _withdraw(self, task: asyncio.Task[Any] | None) -> int:
        """Forget our cancel request; on 3.11+ the task's requests left (else 0)."""
        self._fired = False
        if _UNCANCEL and task is not None:
            return task.uncancel()  # type: ignore[attr-defined,no-any-return,unused-ignore]
        return 0

    async def _reactive_view(self, exc: ContextOverflowError) -> Sequence[TranscriptEntry]:
        """The policy's smaller view after an overflow; re-raises ``exc`` when it has none."""
        _log.info("context.overflow: turn=%d reported_window=%s", self.turn, exc.reported_window)
        view = await self.on_overflow(exc)
        if view is None:
            raise exc
        return view

    def _restart_discards(
        self, exc: Exception, attempt: int, asm: TurnAssembly, started: float
    ) -> bool:
        """Decide a retry after ``exc``: re-raises it when the call must not be retried,
        else says whether forwarded deltas must be discarded first."""
        retry = self.retry
        if retry is None or not retry.should_retry(exc, attempt):
            from ..providers.errors import note_attempts  # only on the way out

            note_attempts(exc, attempt, time.monotonic() - started)
            raise exc
        if asm.forwarded or asm.has_tool_fragments:
            if not retry.restart_on_partial:
                raise exc
            return asm.forwarded
        return False


def _interrupt(ref: weakref.ref[ModelTurn]) -> None:
    """On the turn's loop, between task steps: cancel the consuming task if it waits inside
    the provider's stream, else look again soon (see the module docstring).

    The turn is held weakly, so a stream its consumer dropped mid-delta is still collected
    (and closed) while this looks.
    """
    turn = ref()
    if turn is None:
        return
    task, agen = turn._task, turn._agen
    if task is None or agen is None or task.done():
        return  # the call ended (disarmed), or its task did
    if isinstance(agen, AsyncGeneratorType) and agen.ag_running:
        # The generator is mid-step and no task is running now, so the consuming task is
        # suspended at the provider's await: the cancel lands there and nowhere else.
        turn._task = None
        turn._fired = task.cancel(_INTERRUPT)
        return
    # Suspended at a yield: the consumer holds a delta (or broke out and never resumes).
    # A task cancel would land in the consumer's code, so the stream raises when resumed
    # instead; nothing waits on a timer, so an abandoned stream costs nothing.
    turn._task = None
    turn._due = True
