"""Leases: one holder at a time per key, a session id (sessions) or a run id (checkpointers).

Every store's ``Leases`` excludes in two layers:

* In this process, an ``asyncio.Lock`` per key: a second holder here waits on it (or fails
  fast) without asking the database, and a key nobody holds or waits for is forgotten.
* Across processes, the store's ``LeaseBackend``, when it has one: SQLite writes a lease row
  with an expiry that the holder renews (``_sqlite_db.LeaseRows``); PostgreSQL takes an
  advisory lock on a connection of its own, outside the pool (``_postgres_db.AdvisoryLocks``).
  The in-memory stores have none. Taking it is polled (short at first, capped) up to the
  deadline. An attempt always runs to its end, even when the caller is cancelled, and a
  lease it took is then handed straight back, so a cancelled waiter never leaves a key held.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal, Protocol

from ..exceptions import LoviaError, RunBusyError, SessionBusyError, StoreError, UserError
from ._rows import check_id

logger = logging.getLogger(__name__)

LeaseKind = Literal["session", "run"]
"""What the keys of a ``Leases`` name: session ids, or run ids."""


class LeaseBackend(Protocol):
    """How a store keeps other processes off a key."""

    renew_every: float | None
    """Seconds between renewals while a lease is held; ``None``: it needs none."""

    async def take(self, key: str) -> object | None:
        """A token for ``key``, now ours; ``None`` while another process holds it."""
        ...

    async def renew(self, token: object) -> bool:
        """Extend a held lease; ``False`` when it was lost (it expired and was taken)."""
        ...

    async def release(self, token: object) -> None:
        """Hand a held lease back."""
        ...


class Leases:
    """The leases of one store: ``hold(key)`` for the ``async with`` block, or raise the
    kind's busy error (``SessionBusyError``, ``RunBusyError``)."""

    def __init__(self, kind: LeaseKind, backend: LeaseBackend | None = None) -> None:
        self.kind: LeaseKind = kind
        self._backend = backend
        self._local: dict[str, _LocalKey] = {}

    @asynccontextmanager
    async def hold(
        self, key: str, *, wait: bool = True, timeout: float | None = None
    ) -> AsyncIterator[None]:
        """Hold ``key`` for the block (``wait``/``timeout`` as in ``Session.lease``)."""
        check_id(f"{self.kind}_id", key, hint=f"lease the {self.kind}_id the run uses")
        if timeout is not None and (isinstance(timeout, bool) or timeout < 0):
            raise UserError(
                f"lease timeout must be >= 0 seconds or None, got {timeout!r}",
                hint="timeout=None waits without limit; wait=False fails at once",
            )
        wait = wait and timeout != 0
        deadline = None if timeout is None else time.monotonic() + timeout
        backend = self._backend
        async with self._hold_here(key, wait=wait, timeout=timeout):
            if backend is None:
                yield
                return
            token = await self._take(backend, key, wait=wait, deadline=deadline, timeout=timeout)
            renewer = None
            if backend.renew_every is not None:
                renewer = asyncio.create_task(self._renew(backend, token, key))
            try:
                # The holder's own errors pass through untranslated: only our SQL is ours.
                yield
            finally:
                if renewer is not None:
                    renewer.cancel()
                    # wait() neither raises the renewer's outcome nor swallows our own cancel.
                    await asyncio.wait([renewer])
                await self._release(backend, token, key)

    @asynccontextmanager
    async def _hold_here(
        self, key: str, *, wait: bool, timeout: float | None
    ) -> AsyncIterator[None]:
        local = self._local.get(key)
        if local is None:
            local = self._local[key] = _LocalKey()
        local.users += 1
        try:
            if not wait:
                if local.users > 1:  # another task here holds it, or is first in line
                    raise self.busy(key, waited=None)
                await local.lock.acquire()  # free: returns at once
            elif timeout is None:
                await local.lock.acquire()
            else:
                try:
                    await asyncio.wait_for(local.lock.acquire(), timeout)
                except asyncio.TimeoutError:
                    raise self.busy(key, waited=timeout) from None
            try:
                yield
            finally:
                local.lock.release()
        finally:
            local.users -= 1
            if not local.users:
                del self._local[key]

    async def _take(
        self,
        backend: LeaseBackend,
        key: str,
        *,
        wait: bool,
        deadline: float | None,
        timeout: float | None,
    ) -> object:
        backoff = _Backoff(deadline)
        while True:
            attempt = asyncio.ensure_future(backend.take(key))
            try:
                token = await asyncio.shield(attempt)
            except asyncio.CancelledError:
                await asyncio.shield(_undo(backend, attempt))
                raise
            if token is not None:
                return token
            if not wait or not await backoff.wait():
                raise self.busy(key, waited=timeout if wait else None)

    async def _renew(self, backend: LeaseBackend, token: object, key: str) -> None:
        assert backend.renew_every is not None
        while True:
            await asyncio.sleep(backend.renew_every)
            try:
                kept = await backend.renew(token)
            except StoreError:
                # The holder goes on; the next renewal may succeed before the lease expires.
                logger.warning("renewing the lease on %s %r failed", self.kind, key, exc_info=True)
                continue
            if not kept:
                logger.warning(
                    "lost the lease on %s %r (it expired and another run took it)", self.kind, key
                )
                return

    async def _release(self, backend: LeaseBackend, token: object, key: str) -> None:
        try:
            # Shielded: a cancelled holder must still hand the key back promptly.
            await asyncio.shield(backend.release(token))
        except StoreError:
            # Not raised over the holder's own outcome; the lease then lapses by itself
            # (an SQLite lease expires, a PostgreSQL lock goes with its connection).
            logger.warning("releasing the lease on %s %r failed", self.kind, key, exc_info=True)

    def busy(self, key: str, *, waited: float | None) -> LoviaError:
        """The error for a key another holder keeps (``waited``: how long we waited)."""
        if self.kind == "session":
            how = "is leased by another run" if waited is None else f"stayed leased for {waited:g}s"
            return SessionBusyError(
                f"session {key!r} {how}",
                hint="two runs on one session would interleave their history; wait for the "
                "other run (lease(..., wait=True, timeout=...)) or use another session_id",
            )
        how = "is in progress" if waited is None else f"stayed in progress for {waited:g}s"
        return RunBusyError(
            f"run {key!r} {how} in another task or process",
            hint="a run_id is an idempotency key: wait for the first run (a completed run is "
            "then replayed) or pass a new run_id",
        )


class _LocalKey:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0  # tasks holding or waiting for the key in this process


async def _undo(backend: LeaseBackend, attempt: asyncio.Future[object | None]) -> None:
    """Let a cancelled caller's attempt finish, and hand back what it took."""
    try:
        token = await attempt
    except Exception:  # noqa: BLE001 - the caller is gone; a failed attempt took nothing
        return
    if token is not None:
        await backend.release(token)


class _Backoff:
    """Poll delays for a cross-process lease: short at first, capped, bounded by a deadline."""

    def __init__(self, deadline: float | None, *, first: float = 0.005, cap: float = 0.1) -> None:
        self._deadline = deadline
        self._delay = first
        self._cap = cap

    async def wait(self) -> bool:
        """Sleep before the next attempt; ``False`` once the deadline has passed."""
        delay = self._delay
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                return False
            delay = min(delay, left)
        await asyncio.sleep(delay)
        self._delay = min(self._delay * 2, self._cap)
        return True
