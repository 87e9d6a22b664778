"""Pieces shared by the per-session leases of every store.

A lease makes one run at a time own a session. The backends differ in how they exclude
(an asyncio lock in memory, a lease row with an expiry in SQLite, an advisory lock in
PostgreSQL) but agree on the arguments, the error, and the polling cadence.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..exceptions import SessionBusyError, UserError
from ._rows import check_id


def check_lease_args(session_id: str, timeout: float | None) -> None:
    """Refuse a blank session id or a negative timeout."""
    check_id("session_id", session_id, hint="lease the same session_id the run appends to")
    if timeout is not None and timeout < 0:
        raise UserError(
            f"lease timeout must be >= 0 seconds or None, got {timeout!r}",
            hint="timeout=None waits without limit; wait=False fails at once",
        )


def busy(session_id: str, *, waited: float | None) -> SessionBusyError:
    """The error for a session another run holds."""
    how = "is leased by another run" if waited is None else f"stayed leased for {waited:g}s"
    return SessionBusyError(
        f"session {session_id!r} {how}",
        hint="two runs on one session would interleave their history; wait for the other run "
        "(lease(..., wait=True, timeout=...)) or use another session_id",
    )


class Backoff:
    """Poll delays for a cross-process lease: short at first, capped, bounded by a deadline."""

    def __init__(self, timeout: float | None, *, first: float = 0.005, cap: float = 0.1) -> None:
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._delay = first
        self._cap = cap

    async def wait(self) -> bool:
        """Sleep before the next attempt; ``False`` once the deadline has passed."""
        if self._deadline is None:
            delay = self._delay
        else:
            left = self._deadline - time.monotonic()
            if left <= 0:
                return False
            delay = min(self._delay, left)
        await asyncio.sleep(delay)
        self._delay = min(self._delay * 2, self._cap)
        return True


class LocalLeases:
    """In-process leases: one ``asyncio.Lock`` per session id, owned by one store."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def hold(
        self, session_id: str, *, wait: bool, timeout: float | None
    ) -> AsyncIterator[None]:
        """Hold ``session_id`` for the block, or raise ``SessionBusyError``."""
        check_lease_args(session_id, timeout)
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        if not wait or timeout == 0:
            if lock.locked():
                raise busy(session_id, waited=None)
            await lock.acquire()
        elif timeout is None:
            await lock.acquire()
        else:
            try:
                await asyncio.wait_for(lock.acquire(), timeout)
            except asyncio.TimeoutError:
                raise busy(session_id, waited=timeout) from None
        try:
            yield
        finally:
            lock.release()
