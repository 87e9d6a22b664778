"""The tool phase of a turn: serial preflight, concurrent execution, one dispatch point.

``ToolCallProcessor.run_batch`` takes a turn's calls in request order.

* **Preflight** runs serially, in request order, on the loop's generator body: cancel
  check, budget check and tool-call count, lookup, handoff dedup, argument parsing, then
  the approval flow. Approval backpressure and budget accounting are therefore exactly
  those of a serial run.
* **Execution**: ready calls run as tasks (``TaskSet``). Their events (``ToolCallStarted``,
  ``ToolCallFailed``, completion) go into ONE queue (``_Inbox``) that the batch drains on the
  generator body: that is the single point where events reach hooks and the stream and
  where each result is appended (and, once checkpoints land, saved).
* Results are appended in **completion** order, paired with their calls by ``call_id``
  (duplicate ids pair by occurrence). A call rejected before execution (unknown tool, bad
  arguments, second handoff, denied) gets an error result and a
  ``ToolCallCompleted(is_error=True)`` with no ``ToolCallStarted``.
* **A lone call** (nothing in flight, and it is the batch's last call or a barrier) starts
  as an eager task (``TaskSet.spawn(eager=True)``; 3.11 and later): its first step runs at
  once, so a call that completes without suspending costs no watcher and no loop
  iteration. It is still a task of its own (a tool's ``asyncio.timeout()`` or task group
  must never act on the run's task), its events and outcome go through the queue and the
  one drain point (same order, hooks, append and save), and cancellation, aborts and budget
  trips treat it like any dispatched call.
* ``Tool.parallel=False`` makes a barrier: in-flight calls finish, the tool runs alone,
  then dispatch resumes. Handoff tools are always barriers, so the first handoff of a turn
  wins without a race; a second one is rejected in preflight, before its ``on_handoff``.
* A budget trip stops dispatch, lets in-flight calls finish and be recorded, then ends the
  run with ``BudgetExceeded`` (interrupted; the undispatched calls stay pending for a
  resume). ``RunCancelled`` cancels the in-flight siblings at once and appends nothing for
  them. The cancel check after a completed result runs once that result's
  ``ToolCallCompleted`` was emitted: every appended result reaches hooks and the stream.
* Approvals resolve consumer (``ApprovalRequired.approve()/reject()`` or
  ``handle.approvals``), then ``Agent.approval_handler`` (``"ask"`` defers to the consumer),
  then deny. A streaming consumer may decide late, while other calls run; once nothing else
  is running, an undecided call is denied, so nothing ever hangs (a cancel while it waits
  records nothing, so a resume asks again). A raising predicate or
  handler denies the call and emits ``ToolCallFailed``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..events import (
    ApprovalRequired,
    Event,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallStarted,
    ToolFailure,
)
from ..exceptions import BudgetExceeded, InvalidToolArguments, RunCancelled, UserError
from ..messages import ToolCall
from ..tools.base import ToolOutcome, parse_tool_arguments, run_tool
from ..transcript import ToolCallEntry, ToolResultEntry
from ._tasks import TaskSet

if TYPE_CHECKING:
    from ..approvals import ApprovalChannel
    from ..handoff import Handoff
    from ..run_context import RunContext
    from ..tools.base import Tool
    from .run_state import RunState

__all__ = ["PlannedCall", "ToolCallProcessor"]

_log = logging.getLogger("lovia.runtime")


@dataclass(slots=True)
class PlannedCall:
    """One requested call: what the model asked and where its entry sits."""

    call: ToolCall
    index: int
    """Position of its ``ToolCallEntry`` in the transcript (for the wire-safe rewrite)."""


@dataclass(slots=True)
class _Ready:
    planned: PlannedCall
    tool: Tool
    args: dict[str, Any]
    handoff: Handoff | None
    needs_approval: bool


@dataclass(slots=True)
class _Done:
    ready: _Ready
    outcome: ToolOutcome | None
    error: BaseException | None


_WAKE = object()  # queue item: something outside the queue changed (approval, cancel)


class _Inbox:
    """The batch's queue: many producers on the loop, one consumer (the drain).

    A deque and at most one waiting future: what ``asyncio.Queue`` does for this case, at a
    fraction of its cost per turn (a lone call's items are taken without any wait).
    """

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def empty(self) -> bool:
        return not self._items

    def get_nowait(self) -> Any:
        return self._items.popleft()

    async def get(self) -> Any:
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            await waiter
        return self._items.popleft()


class ToolCallProcessor:
    """Runs one turn's tool calls (see the module docstring). Built per tool phase."""

    def __init__(
        self,
        state: RunState,
        ctx: RunContext[Any],
        *,
        approvals: ApprovalChannel,
        interactive: bool,
        truncated: bool,
        on_result: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self.state = state
        self.ctx = ctx
        self.approvals = approvals
        self.interactive = interactive
        self.truncated = truncated
        """The reply hit its token limit: bad JSON is reported as a cut-off call."""
        self.on_result = on_result
        """The checkpoint save after each result (``None``: the run has no checkpoint)."""
        self.queue = _Inbox()
        self.tasks = TaskSet()
        self.inflight = 0
        self.handoff_claimed = state.pending_handoff is not None
        """A handoff of this turn was accepted (a resumed turn may already have one)."""
        self.budget_error: BudgetExceeded | None = None
        self._watcher: asyncio.Future[None] | None = None
        self._completed_since_check = False

    # -- the batch --------------------------------------------------------------------

    async def run_batch(self, calls: Sequence[PlannedCall]) -> AsyncGenerator[Event, None]:
        """Preflight, dispatch and drain ``calls``; yields every tool event in order."""
        try:
            for planned in calls:
                if self.budget_error is not None:
                    break  # a tool tripped the run's budget: dispatch nothing more
                try:
                    events, ready = self._preflight(planned)
                    if ready is not None and callable(ready.tool.needs_approval):
                        events, ready = await self._ask_predicate(ready)
                except BudgetExceeded as exc:
                    self.budget_error = exc
                    break
                for event in events:
                    yield event
                if ready is None:
                    continue
                if ready.needs_approval:
                    async with aclosing(self._approve(ready)) as approval_events:
                        async for event in approval_events:
                            yield event
                    if ready.needs_approval:  # still set: denied
                        continue
                barrier = ready.handoff is not None or not ready.tool.parallel
                if barrier:
                    async with aclosing(self._drain_inflight()) as drained:
                        async for event in drained:
                            yield event
                if not self.inflight and (barrier or planned is calls[-1]):
                    self._start_inline(ready)  # nothing runs beside it: no task, no hop
                else:
                    self._dispatch(ready)
                if barrier:
                    async with aclosing(self._drain_inflight()) as drained:
                        async for event in drained:
                            yield event
            while self.inflight:  # the last drain, inlined: one generator layer less
                queued = await self._next_event()
                if queued is not None:
                    yield queued
            if self._completed_since_check:
                self.ctx.cancel_token.check()  # after the last completed result
            if self.budget_error is not None:
                raise self.budget_error
        finally:
            await self.tasks.cancel_and_drain()  # in-flight calls (on abort) and the watcher

    # -- preflight --------------------------------------------------------------------

    def _preflight(self, planned: PlannedCall) -> tuple[list[Event], _Ready | None]:
        """Checks for one call: events to emit, and the call if it may proceed.

        Synchronous (one coroutine less per call): a callable ``needs_approval``, which may
        be async, is asked afterwards by ``_ask_predicate``.
        """
        ctx = self.ctx
        ctx.cancel_token.check()
        budget = ctx.budget
        if budget is not None:
            budget.check(self.state.budget_usage())
            budget.count_tool_call()
        call = planned.call
        active = self.state.active
        tool = active.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(active.tools)) or "none"
            return [self._reject(planned, f"unknown tool {call.name!r} (available: {names})")], None
        handoff = active.handoffs.get(call.name)
        if handoff is not None and self.handoff_claimed:
            message = "only the first handoff of a turn is applied; this one was not performed"
            return [self._reject(planned, message)], None
        try:
            args = parse_tool_arguments(call.arguments, truncated=self.truncated)
        except InvalidToolArguments as exc:
            # The stored call must stay valid JSON on re-send; the error result says why.
            self.state.transcript[planned.index] = ToolCallEntry(call.id, call.name, "{}")
            return [self._reject(planned, str(exc))], None
        if handoff is not None:
            self.handoff_claimed = True
        needs = tool.needs_approval
        return [], _Ready(planned, tool, args, handoff, False if callable(needs) else bool(needs))

    async def _ask_predicate(self, ready: _Ready) -> tuple[list[Event], _Ready | None]:
        """``_preflight``'s last check for a tool whose ``needs_approval`` is a predicate."""
        planned = ready.planned
        call = planned.call
        predicate = ready.tool.needs_approval
        assert callable(predicate)
        try:
            verdict = predicate(ready.args, self.ctx)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except (RunCancelled, BudgetExceeded):
            raise
        except Exception as exc:  # noqa: BLE001 - fail closed: a raising predicate denies
            _log.warning("approval predicate of %r raised; denying", call.name, exc_info=True)
            denied = self._reject(planned, f"the approval check failed ({exc!r}); call denied")
            return [ToolCallFailed(exc, call), denied], None
        ready.needs_approval = bool(verdict)
        return [], ready

    def _reject(self, planned: PlannedCall, message: str) -> ToolCallCompleted:
        output = f"Tool error: {message}"
        self.state.append(ToolResultEntry(planned.call.id, output, is_error=True))
        return ToolCallCompleted(planned.call, None, True, output)

    # -- approvals --------------------------------------------------------------------

    async def _approve(self, ready: _Ready) -> AsyncGenerator[Event, None]:
        """Resolve a gated call; leaves ``ready.needs_approval`` set only when denied."""
        call = ready.planned.call
        approvals = self.approvals
        future = approvals.register(call.id, call=call)
        future.add_done_callback(self._wake)
        try:
            async with aclosing(self._decide(call, future)) as events:
                async for event in events:
                    yield event
        finally:
            if not future.done():
                # Undecided (nobody answered, or the run is ending): no stale entry may stay
                # on the channel, where a late answer would look accepted.
                approvals.discard(call.id)
        if not future.done():
            # Cancelled while undecided: nobody denied it, so no result is recorded and the
            # call stays pending; a resume asks again.
            self.ctx.cancel_token.check()
        approved, reason = future.result() if future.done() else (False, "nobody approved the call")
        if approved:
            ready.needs_approval = False
            return
        yield self._reject(ready.planned, f"the call was denied ({reason or 'not approved'})")

    async def _decide(
        self, call: ToolCall, future: asyncio.Future[tuple[bool, str | None]]
    ) -> AsyncGenerator[Event, None]:
        """Consumer (on the event), then ``approval_handler``, then a late consumer answer
        while other calls still run. Returns with ``future`` undecided when nobody decided."""
        approvals = self.approvals

        def decide(approved: bool, reason: str | None) -> None:
            approvals.resolve(call.id, approved, reason=reason)

        yield ApprovalRequired(call, decide)
        if not future.done():
            try:
                decision = await self._ask_handler(call)
            except (RunCancelled, BudgetExceeded):
                raise
            except Exception as exc:  # noqa: BLE001 - fail closed: a raising handler denies
                _log.warning("approval_handler raised for %r; denying", call.name, exc_info=True)
                yield ToolCallFailed(exc, call)
                decision = False
            if decision is not None:
                approvals.resolve(call.id, decision)
        if not future.done() and self.interactive:
            # The consumer may still answer out of band while other calls run.
            while not future.done() and self.inflight:
                pending = await self._next_event()
                if pending is not None:
                    yield pending

    async def _ask_handler(self, call: ToolCall) -> bool | None:
        """The agent's ``approval_handler`` verdict; ``None`` means ask the consumer."""
        handler = self.state.active.agent.approval_handler
        if handler is None:
            return None
        verdict = handler(call, self.ctx)
        if inspect.isawaitable(verdict):
            # A handler may wait on a human; a cancel must not wait for it.
            verdict = await self.ctx.cancel_token.race(verdict)
        if verdict is True or verdict == "allow":
            return True
        if verdict is False or verdict == "deny":
            return False
        if verdict == "ask":
            return None
        raise UserError(
            f"approval_handler returned {verdict!r}",
            hint='return True/False or "allow"/"deny"/"ask"',
        )

    # -- execution --------------------------------------------------------------------

    def _dispatch(self, ready: _Ready) -> None:
        self.inflight += 1
        self.tasks.spawn(self._execute(ready))

    async def _execute(self, ready: _Ready) -> None:
        """A call's task body: every outcome goes to the queue, nothing is appended here."""
        queue = self.queue
        call = ready.planned.call
        queue.put_nowait(ToolCallStarted(call))
        if _log.isEnabledFor(logging.INFO):  # (every call: no Logger.info call when it is off)
            _log.info("tool.start: %s call_id=%s", call.name, call.id)
        try:
            outcome = await self._invoke(ready, queue.put_nowait)
        except asyncio.CancelledError as exc:
            # The batch cancels its calls only on its way out, when nothing drains the queue
            # any more, so this reaches the drain only when the tool raised it itself (an
            # awaited future cancelled elsewhere): the batch raises it (it propagates, as
            # documented) instead of waiting forever for an outcome. Nothing is appended.
            queue.put_nowait(_Done(ready, None, exc))
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the batch, which re-raises it
            queue.put_nowait(_Done(ready, None, exc))
            return
        queue.put_nowait(_Done(ready, outcome, None))

    async def _invoke(self, ready: _Ready, emit: Callable[[Event], None]) -> ToolOutcome:
        """Run the call (a handoff or a tool) in its span; ``emit`` takes its failure events."""
        call = ready.planned.call
        ctx = self.ctx
        tracer = ctx.tracer
        assert tracer is not None  # the loop always sets one
        with tracer.span("tool_call", name=call.name, call_id=call.id) as span:
            if ready.handoff is not None:
                outcome = await self._run_handoff(ready, emit)
            else:
                agent = self.state.active.agent
                outcome = await run_tool(
                    ready.tool,
                    ready.args,
                    ctx,
                    default_retries=agent.default_tool_retries,
                    default_timeout=agent.default_tool_timeout,
                    max_output_chars=agent.max_tool_output_chars,
                    agent_renderer=agent.tool_result_renderer,
                    on_error=lambda exc: emit(ToolCallFailed(exc, call)),
                )
            if outcome.error is not None:
                span.record_exception(outcome.error)
        return outcome

    def _start_inline(self, ready: _Ready) -> None:
        """Start a lone call as an eagerly started task (3.11+), else as a plain task.

        The call runs in a task of its own either way: a tool's ``asyncio.timeout()``,
        ``asyncio.wait_for`` (3.12+ builds it on the current task), task groups and
        ``asyncio.current_task()`` must see the call's task, never the run's. An eager start
        runs the first step at once, so a call that completes without suspending costs no
        loop iteration; its events and outcome still go through the queue and the drain.
        """
        if self._completed_since_check:
            # The drain would run this check before a task's first step: keep that order.
            self._completed_since_check = False
            self.ctx.cancel_token.check()
        self.inflight += 1
        self.tasks.spawn(self._execute(ready), eager=True)

    async def _run_handoff(self, ready: _Ready, emit: Callable[[Event], None]) -> ToolOutcome:
        from ..handoff import _HandoffSignal

        try:
            signal = await ready.tool.invoke(ready.args, self.ctx)
        except (RunCancelled, BudgetExceeded):
            raise
        except Exception as exc:  # noqa: BLE001 - a failed on_handoff is a result, no swap
            _log.warning("handoff %r failed; not applied", ready.tool.name, exc_info=True)
            emit(ToolCallFailed(exc, ready.planned.call))
            return ToolOutcome(
                output=f"Tool error: handoff failed: {exc!r}", raw=None, is_error=True, error=exc
            )
        assert isinstance(signal, _HandoffSignal)
        self.state.pending_handoff = signal
        name = signal.handoff.target.name
        return ToolOutcome(output=f"Transferred to {name}.", raw=None, is_error=False)

    # -- the single drain point -------------------------------------------------------

    async def _drain_inflight(self) -> AsyncGenerator[Event, None]:
        """Emit queued events until no call is in flight."""
        while self.inflight:
            event = await self._next_event()
            if event is not None:
                yield event

    async def _next_event(self) -> Event | None:
        """Take one queue item; returns the event to emit (``None`` for wake-ups)."""
        if self._completed_since_check:
            # The cancel check after a completed result runs once its event was emitted, so
            # a result that was appended and saved always reaches hooks and the stream.
            self._completed_since_check = False
            self.ctx.cancel_token.check()
        queue = self.queue
        if queue.empty():
            if self._watcher is None:
                self._watch_cancel()
            item = await queue.get()
        else:
            item = queue.get_nowait()  # (a lone inline call's items are all there already)
        if item is _WAKE:
            self.ctx.cancel_token.check()
            return None
        if isinstance(item, _Done):
            return await self._complete(item)
        event: Event = item
        return event

    async def _complete(self, done: _Done) -> Event:
        self.inflight -= 1
        if done.error is not None:
            if isinstance(done.error, BudgetExceeded):
                # The run's own budget: stop dispatch, let the others finish, end the run.
                self.budget_error = self.budget_error or done.error
                return ToolCallFailed(done.error, done.ready.planned.call)
            raise done.error
        outcome = done.outcome
        assert outcome is not None
        call = done.ready.planned.call
        failure = None
        metadata = None
        if outcome.error is not None:
            # The developer sees what the model only reads about: type, message, traceback.
            failure = ToolFailure.from_exception(outcome.error)
            metadata = {"error": failure.to_dict()}
            _log.warning(
                "tool.error: %s call_id=%s raised %s",
                call.name,
                call.id,
                failure.type,
                exc_info=outcome.error,
            )
        elif outcome.is_error:
            _log.info("tool.error: %s call_id=%s", call.name, call.id)
        self.state.append(
            ToolResultEntry(
                call.id,
                outcome.output,
                outcome.raw,
                outcome.is_error,
                outcome.parts,
                metadata=metadata,
            )
        )
        if self.on_result is not None:
            await self.on_result()
        self._completed_since_check = True
        return ToolCallCompleted(call, outcome.raw, outcome.is_error, outcome.output, failure)

    def _watch_cancel(self) -> None:
        """Wake the drain when the cancel token fires while the loop waits on the queue."""
        self._watcher = self.tasks.spawn(self.ctx.cancel_token.wait())
        self._watcher.add_done_callback(self._wake)

    def _wake(self, _: object) -> None:
        self.queue.put_nowait(_WAKE)
