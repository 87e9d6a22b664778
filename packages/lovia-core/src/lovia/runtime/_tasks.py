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
import sys
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

__all__ = ["TaskSet"]

_EAGER = sys.version_info >= (3, 12)
"""``asyncio.Task(eager_start=True)`` exists from 3.12."""


class TaskSet:
    """A set of owned tasks (see the module docstring)."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, eager: bool = False) -> asyncio.Task[Any]:
        """Start ``coro`` as a task owned by this set.

        ``eager`` runs its first step at once, inside the new task (3.12+; a plain task
        before): a coroutine that finishes without suspending costs no loop iteration.
        """
        if eager and _EAGER:
            loop = asyncio.get_running_loop()
            task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
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
