"""``TaskSet``: the one place the runtime creates, cancels and drains background tasks.

Structured concurrency without ``asyncio.TaskGroup`` (the floor is Python 3.10, and the
tool phase needs two endings a task group does not offer): the owner either waits for
every task (a budget trip lets in-flight calls finish) or cancels and drains them (a
cancel, or any exception, leaves nothing running). Either way no task outlives its owner:
``async with TaskSet()`` cancels and drains whatever is left on exit.

Failures do not propagate out of the tasks by themselves; the tool phase reports each
task's outcome through its queue, so the owner decides what a failure means.

``FirstStepHost`` is the 3.11 half of ``TaskSet.spawn_lone`` (a lone tool call's first step
run at once, as a task that is not the run's): one task per run lent to every such step,
because making a task per call costs more there than a call that returns at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

__all__ = ["FirstStepHost", "TaskSet"]

_EAGER = sys.version_info >= (3, 12)
"""``asyncio.Task(eager_start=True)`` exists from 3.12."""
_STEP_AS = (3, 11) <= sys.version_info < (3, 12)
"""3.11: ``Task.cancelling()`` exists, and the task-entering helpers are frozen."""


class TaskSet:
    """A set of owned tasks (see the module docstring)."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start ``coro`` as a task owned by this set."""
        task = asyncio.ensure_future(coro)
        self.adopt(task)
        return task

    def spawn_lone(self, coro: Coroutine[Any, Any, Any], host: FirstStepHost) -> None:
        """Start ``coro`` with its first step run at once, never as the caller's task.

        A coroutine that finishes without suspending then costs no wait on the loop. From
        3.12 that is a task with ``eager_start``; on 3.11 the step runs as ``host``'s task
        (``FirstStepHost``), so ``asyncio.current_task()``, ``asyncio.timeout()`` and task
        groups in the step act on that task, which carries the coroutine on if it
        suspends; on 3.10 it is a plain task.
        """
        if _EAGER:
            loop = asyncio.get_running_loop()
            self.adopt(asyncio.Task(coro, loop=loop, eager_start=True))  # type: ignore[call-arg,unused-ignore]
        elif _STEP_AS:
            host.start(coro, self)
        else:
            self.spawn(coro)

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """Own ``task`` (nothing to own once it is done)."""
        if task.done():
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel_and_drain(self) -> None:
        """Cancel every running task and wait until all have finished.

        Shielded from a second cancellation of the caller, so a cancelled owner still
        leaves no task behind; the drain is bounded by the tasks reacting to cancellation.
        """
        pending = [t for t in self._tasks if not t.done()]
        if not pending:
            return
        for task in pending:
            task.cancel()
        drained = asyncio.ensure_future(asyncio.wait(pending))
        try:
            await asyncio.shield(drained)
        except asyncio.CancelledError:
            await drained
            raise

    async def __aenter__(self) -> TaskSet:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.cancel_and_drain()


class FirstStepHost:
    """Lends one task to the first steps of a run's lone calls (3.11; see ``spawn_lone``).

    Why it exists: a lone call's first step runs at once (no loop iteration per turn), but
    it must run as a task other than the run's, because a tool's ``asyncio.timeout()`` or
    task group acts on the current task. Making a task on 3.11 costs more than a whole call
    that returns at once, so the run keeps one host task whose coroutine (``_Carrier``)
    does nothing until a call is handed to it. Each lone call's first step runs with the
    host entered as the current task, in the call's own copy of the context. A step that
    finishes leaves the host idle for the next call; a step that suspends hands the call to
    the host task, which carries it on (owned by the call's ``TaskSet``, so it is cancelled
    and drained like any call), and the next lone call gets a new host. A call therefore
    sees one task across its suspensions, never the run's. Unlike a task per call, calls
    that finish in their first step share the host; a host with a cancel requested (by such
    a call, on its current task) is never lent again. The run's teardown cancels an idle
    host (``close``).
    """

    __slots__ = ("_carrier", "_task")

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self._carrier: _Carrier | None = None

    def start(self, coro: Coroutine[Any, Any, Any], owner: TaskSet) -> None:
        """Run ``coro``'s first step as the host; if it does not finish, ``owner`` owns the
        host task, which carries ``coro`` on."""
        from asyncio.tasks import _enter_task, _leave_task  # type: ignore[attr-defined,unused-ignore]

        loop = asyncio.get_running_loop()
        task, carrier = self._task, self._carrier
        if task is None or carrier is None or task.done() or task.cancelling():  # type: ignore[attr-defined,unused-ignore]  # 3.11+
            # (A host someone asked to cancel since it was last lent is never lent again.)
            if task is not None:
                owner.adopt(task)
            carrier = _Carrier(loop)
            task = loop.create_task(carrier)
            self._task, self._carrier = task, carrier
        context = contextvars.copy_context()
        current = asyncio.current_task(loop)
        if current is not None:
            _leave_task(loop, current)
        _enter_task(loop, task)
        error: BaseException | None = None
        try:
            first = context.run(coro.send, None)
        except StopIteration:
            first = _FINISHED
        except BaseException as exc:  # noqa: BLE001 - raised again from the host's next step
            first, error = _FINISHED, exc
        finally:
            _leave_task(loop, task)
            if current is not None:
                _enter_task(loop, current)
        if first is _FINISHED and error is None:
            return  # the host stays idle, for the next lone call
        self._task = self._carrier = None
        carrier.carry(coro, context, first, error)
        owner.adopt(task)

    def close(self) -> None:
        """Cancel an idle host (the run's teardown).

        Not awaited: an idle host runs no call, so it ends at its next step, as a call's
        task that already finished its work does, and the run's end costs no wait on the
        loop (which would keep many concurrent runs alive at once).
        """
        task, self._task, self._carrier = self._task, None, None
        if task is not None:
            task.cancel()


_FINISHED = object()  # the first step ended the call
_NOTHING = object()  # no first-step outcome waits to be handed to the host task


class _Carrier(Coroutine[Any, Any, Any]):
    """The host task's coroutine: idle until ``carry`` hands it a call, then that call.

    The host task's next step gets what the call's first step awaited (or the call's end,
    or what it raised); later ``send``/``throw`` calls (results, errors, a cancellation)
    go to the call, in its own context, so the call cannot tell it was started early.
    """

    __slots__ = ("_body", "_context", "_error", "_first", "_idle")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._idle: asyncio.Future[None] = loop.create_future()
        self._body: Coroutine[Any, Any, Any] | None = None
        self._context: contextvars.Context | None = None
        self._first: Any = _NOTHING
        self._error: BaseException | None = None

    def carry(
        self,
        body: Coroutine[Any, Any, Any],
        context: contextvars.Context,
        first: Any,
        error: BaseException | None,
    ) -> None:
        self._body, self._context, self._first, self._error = body, context, first, error
        if not self._idle.done():
            self._idle.set_result(None)  # wakes the host if it already waits

    def send(self, value: Any) -> Any:
        body = self._body
        if body is None:  # idle: wait for a call (what ``await self._idle`` would yield)
            idle = self._idle
            idle._asyncio_future_blocking = True
            return idle
        first, self._first = self._first, _NOTHING
        if first is _NOTHING:
            assert self._context is not None
            return self._context.run(body.send, value)
        if self._error is not None:
            raise self._error
        if first is _FINISHED:
            raise StopIteration
        return first  # the task now waits on it, as if the call had just yielded it

    def throw(self, *args: Any) -> Any:
        body = self._body
        if body is None:  # cancelled while idle
            error = args[0]
            raise error if isinstance(error, BaseException) else error(*args[1:2])
        first, self._first = self._first, _NOTHING
        if first is _FINISHED:
            raise StopIteration  # the call already ended (its outcome is delivered)
        assert self._context is not None
        # A cancel before the host took the call over reaches the call's await.
        return self._context.run(body.throw, *args)

    def close(self) -> None:
        if self._body is not None:
            self._body.close()

    def __await__(self) -> Any:
        raise TypeError("a host task's coroutine is not awaitable")
