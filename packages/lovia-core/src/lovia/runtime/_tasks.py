"""``TaskSet``: the one place the runtime creates, cancels and drains background tasks.

Structured concurrency without ``asyncio.TaskGroup`` (the floor is Python 3.10, and the
tool phase needs two endings a task group does not offer): the owner either waits for
every task (a budget trip lets in-flight calls finish) or cancels and drains them (a
cancel, or any exception, leaves nothing running). Either way no task outlives its owner:
``async with TaskSet()`` cancels and drains whatever is left on exit.

Failures do not propagate out of the tasks by themselves; the tool phase reports each
task's outcome through its queue, so the owner decides what a failure means.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

__all__ = ["TaskSet"]

_EAGER = sys.version_info >= (3, 12)
"""``asyncio.Task(eager_start=True)`` exists from 3.12."""
_STEP_AS = (3, 11) <= sys.version_info < (3, 12)
"""3.11: ``create_task(context=)`` exists, and the task-entering helpers are frozen."""


class TaskSet:
    """A set of owned tasks (see the module docstring)."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, eager: bool = False) -> asyncio.Task[Any]:
        """Start ``coro`` as a task owned by this set.

        ``eager`` runs its first step at once, inside the new task: a coroutine that
        finishes without suspending costs no wait on the loop. From 3.12 that is
        ``eager_start``; on 3.11 the task is made first and the step runs with that task
        entered as the current one (``_step_as``), so ``asyncio.current_task()``,
        ``asyncio.timeout()`` and task groups in the step act on the new task.
        """
        if eager and _EAGER:
            loop = asyncio.get_running_loop()
            task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
        elif eager and _STEP_AS:
            task, finished = _step_as(coro)
            if finished:
                # Its one remaining step only ends it: nothing to own, cancel or wait for.
                return task
        else:
            task = asyncio.ensure_future(coro)
        if task.done():
            return task  # finished in its first step: nothing left to own
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

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


_FIRST_STEP_DONE = object()
_HANDED = object()  # the first step's outcome was handed to the task


def _step_as(coro: Coroutine[Any, Any, Any]) -> tuple[asyncio.Task[Any], bool]:
    """3.11's eager start: make the task, then run ``coro``'s first step as that task.

    Returns the task and whether ``coro`` finished in that step.

    The helpers that switch the current task are private, but 3.11 is frozen, and 3.12+
    takes the public ``eager_start`` path instead. The step runs in the task's own copy of
    the context, as the task's steps do.
    """
    from asyncio.tasks import _enter_task, _leave_task  # type: ignore[attr-defined,unused-ignore]

    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    rest = _Rest(coro)
    if loop.get_task_factory() is None:
        # What ``loop.create_task`` does without a factory, minus its Python layer: this
        # runs once per lone call, so every turn of a one-call run.
        task: asyncio.Task[Any] = asyncio.Task(rest, loop=loop, context=context)  # type: ignore[call-arg,unused-ignore]
    else:
        task = loop.create_task(rest, context=context)  # type: ignore[call-arg,unused-ignore]
    current = asyncio.current_task(loop)
    if current is not None:
        _leave_task(loop, current)
    _enter_task(loop, task)
    try:
        rest.first = context.run(coro.send, None)
    except StopIteration:
        rest.first = _FIRST_STEP_DONE
    except BaseException as exc:  # noqa: BLE001 - raised again from the task's first step
        rest.first, rest.error = _FIRST_STEP_DONE, exc
    finally:
        _leave_task(loop, task)
        if current is not None:
            _enter_task(loop, current)
    return task, rest.first is _FIRST_STEP_DONE and rest.error is None


class _Rest(Coroutine[Any, Any, Any]):
    """The task's coroutine on 3.11: the rest of a body whose first step already ran.

    The task's first ``send`` hands it what the step awaited (or ends, or raises what the
    step raised); later ``send``/``throw`` calls (results, errors, a cancellation) go to the
    body unchanged, so the body cannot tell it was started early.
    """

    __slots__ = ("_body", "error", "first")

    def __init__(self, body: Coroutine[Any, Any, Any]) -> None:
        self._body = body
        self.first: Any = _HANDED
        self.error: BaseException | None = None

    def send(self, value: Any) -> Any:
        first, self.first = self.first, _HANDED
        if first is _HANDED:
            return self._body.send(value)
        if self.error is not None:
            raise self.error
        if first is _FIRST_STEP_DONE:
            raise StopIteration
        return first  # the task now waits on it, as if the body had just yielded it

    def throw(self, *args: Any) -> Any:
        first, self.first = self.first, _HANDED
        if first is _FIRST_STEP_DONE:
            raise StopIteration  # the body already ended (its outcome is delivered)
        # A cancel before the task's first step reaches the body's await.
        return self._body.throw(*args)

    def close(self) -> None:
        self._body.close()

    def __await__(self) -> Any:
        return self._body.__await__()
