"""``CancelToken``: cooperative cancellation of a run.

A token is a one-way latch. ``cancel()`` flips it once (later calls are no-ops and keep the
first reason); the run loop polls ``check()`` at its documented points (between turns, at
each tool preflight, after each completed result) and awaits ``wait()`` where it must stop
promptly (retry backoff, pending approvals). A model call in flight registers a one-shot
callback (``add_callback``) for its duration instead, so a cancel abandons it at once
(``runtime/model_turn.py``) without a check per streamed delta. Only *our* cancellation
becomes ``RunCancelled``; asyncio task cancellation stays ``CancelledError`` and propagates
as is.

The ``asyncio.Event`` behind ``wait()`` is created lazily by the first waiter (one per event
loop that waits), so a token can be built outside any loop (a web handler, a test module, a
sync caller) and used by every task of the loop that runs the work. ``cancel()`` may be
called from another thread: waiters on a loop other than the caller's are woken through that
loop's ``call_soon_threadsafe``. Callbacks run in the thread that calls ``cancel()``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .exceptions import RunCancelled

__all__ = ["CancelToken"]

_T = TypeVar("_T")

_log = logging.getLogger("lovia.runtime")


class CancelToken:
    """A cooperative, idempotent cancel signal shared by a run and its agent-as-tool sub-runs.

    Pass one as ``Runner.run(..., cancel_token=token)`` or use ``handle.cancel()``; tools read
    it as ``ctx.cancel_token``. Cancelling abandons a model call in flight (its stream is
    closed) but cannot interrupt a sync tool's worker thread.
    """

    __slots__ = ("_callbacks", "_cancelled", "_events", "_reason")

    def __init__(self) -> None:
        self._cancelled = False
        self._reason: str | None = None
        # One event per loop that has waited: an asyncio.Event is bound to a single loop.
        self._events: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}
        # Callback -> itself: a dict so removal is O(1) and ``pop`` claims a callback
        # atomically (cancel() in one thread, add/remove in another, each calls it once).
        self._callbacks: dict[Callable[[], object], Callable[[], object]] = {}

    def __repr__(self) -> str:
        state = f"cancelled, reason={self._reason!r}" if self._cancelled else "active"
        return f"CancelToken({state})"

    @property
    def is_cancelled(self) -> bool:
        """Whether ``cancel()`` has been called."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """The reason given to the first ``cancel()`` call (``None`` when none was given)."""
        return self._reason

    def cancel(self, reason: str | None = None) -> None:
        """Fire the token and wake every waiter. Idempotent: the first reason is kept."""
        if self._cancelled:
            return
        self._reason = reason
        self._cancelled = True
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, event in list(self._events.items()):
            if loop is current:
                event.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(event.set)
        self._events.clear()
        for callback in list(self._callbacks):
            self._claim_and_call(callback)

    def add_callback(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` once when the token fires (at once if it already has).

        It runs in the thread that calls ``cancel()``, so it must be quick and thread-safe
        (an asyncio user hands over with ``loop.call_soon_threadsafe``). An exception it
        raises is logged, never raised into ``cancel()``. Remove it with ``remove_callback``
        when it is no longer wanted.
        """
        self._callbacks[callback] = callback
        if self._cancelled:  # fired before (or while) we registered: cancel() may have missed it
            self._claim_and_call(callback)

    def remove_callback(self, callback: Callable[[], object]) -> None:
        """Forget ``callback`` (a no-op if it already ran or was never added)."""
        self._callbacks.pop(callback, None)

    def _claim_and_call(self, callback: Callable[[], object]) -> None:
        if self._callbacks.pop(callback, None) is None:
            return  # removed, or another thread claimed it
        try:
            callback()
        except Exception:  # noqa: BLE001 - one broken callback must not stop the cancel
            _log.warning("cancel callback %r raised", callback, exc_info=True)

    def check(self) -> None:
        """Raise ``RunCancelled`` (carrying the reason) if the token has fired."""
        if self._cancelled:
            raise RunCancelled(_message(self._reason), reason=self._reason)

    async def wait(self) -> None:
        """Return once the token has fired (immediately if it already has)."""
        if self._cancelled:
            return
        loop = asyncio.get_running_loop()
        event = self._events.get(loop)
        if event is None:
            for stale in [old for old in self._events if old.is_closed()]:
                del self._events[stale]
            event = self._events[loop] = asyncio.Event()
            if self._cancelled:  # cancel() ran in another thread while we registered
                return
        await event.wait()

    async def race(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable`` but raise ``RunCancelled`` as soon as the token fires.

        Whichever side loses is cancelled and drained before this returns, so no task
        outlives the call. If the work finished, its result wins over a simultaneous cancel.
        """
        if self._cancelled:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never started: close it so it is not reported unawaited
            self.check()
        work = asyncio.ensure_future(awaitable)
        watcher = asyncio.ensure_future(self.wait())
        try:
            await asyncio.wait((work, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _cancel_and_drain(work, watcher)
        if not work.cancelled() or not self._cancelled:
            return work.result()
        raise RunCancelled(_message(self._reason), reason=self._reason)


async def _cancel_and_drain(*tasks: asyncio.Future[Any]) -> None:
    losers = [task for task in tasks if not task.done()]
    for task in losers:
        task.cancel()
    if losers:
        # asyncio.wait never raises the losers' CancelledError into the caller.
        await asyncio.wait(losers)


def _message(reason: str | None) -> str:
    return f"run cancelled: {reason}" if reason else "run cancelled"
