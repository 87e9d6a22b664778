"""SQLite stores: ``SQLiteSession`` and ``SQLiteCheckpointer`` (stdlib ``sqlite3`` only).

Tables (one file can hold both stores):

* ``session_runs``: one row per run, ``UNIQUE(session_id, run_id)``; an append is an
  ``INSERT OR IGNORE``, and when the row already exists its entries are compared so a
  differing re-append raises ``StoreError``. ``load`` orders by the autoincrement ``id``
  (insertion order); a stored row is never rewritten except by explicit maintenance.
* ``session_leases``: one row per leased session with an ``owner`` and an ``expires_at``,
  written under ``BEGIN IMMEDIATE``. The holder renews it while it runs. A lease whose
  holder died is taken over once it expires, or at once when the owner was a process on
  this host (same host name and, on Linux, same PID namespace) that no longer exists.
* ``snapshot_turns`` (one row per non-empty checkpoint append) and ``snapshot_heads`` (one
  row per run, replaced on every append), written together in one transaction.

Every row carries a schema version; see ``_rows`` for how unreadable rows are reported.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, overload
from urllib.parse import parse_qs, unquote, urlsplit
from uuid import uuid4

from ..checkpointer import Checkpointer, RunHead, RunSnapshot
from ..exceptions import StoreError, UserError
from ..session import Segment, Session
from ..transcript import TranscriptEntry
from . import _maintenance, _rows
from ._lease import Backoff, busy, check_lease_args
from ._sqlite_db import SQLiteDatabase

__all__ = ["SQLiteCheckpointer", "SQLiteSession", "from_url"]

logger = logging.getLogger(__name__)


class SQLiteSession:
    """A ``Session`` in an SQLite file, safe to share between processes.

    ``path`` is a file path or ``":memory:"`` (one private database per instance).
    ``wal=True`` turns on WAL mode (readers never block the writer; faster commits).
    ``lease_ttl`` is how long, in seconds, a lease outlives a holder that stopped renewing
    it (a crashed process on another host); the holder renews it every ``lease_ttl / 3``.
    Close with ``await store.aclose()`` or use ``async with``.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, wal: bool = False, lease_ttl: float = 30.0
    ) -> None:
        if lease_ttl <= 0:
            raise UserError(
                f"lease_ttl must be > 0 seconds, got {lease_ttl!r}",
                hint="the default of 30 s suits most runs; the holder renews it while running",
            )
        self._db = SQLiteDatabase(path, wal=wal)
        self._lease_ttl = lease_ttl

    async def __aenter__(self) -> SQLiteSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the database connection (idempotent)."""
        await self._db.close()

    async def segments(self, session_id: str) -> list[Segment]:
        """Every segment of ``session_id`` in insertion order."""
        return _rows.decode_segments(await self._db.read(lambda c: _select_runs(c, session_id)))

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat history of ``session_id``."""
        return _rows.decode_history(await self._db.read(lambda c: _select_runs(c, session_id)))

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Add one segment; idempotent per ``run_id`` (see ``Session.append``)."""
        run_id, encoded, encoded_meta = _rows.encode_segment(session_id, entries, run_id, meta)

        def insert(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "INSERT OR IGNORE INTO session_runs"
                " (session_id, run_id, entries, meta, version, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, run_id, encoded, encoded_meta, _rows.ROW_VERSION, time.time()),
            )
            if cur.rowcount == 0:
                row = conn.execute(
                    "SELECT entries FROM session_runs WHERE session_id = ? AND run_id = ?",
                    (session_id, run_id),
                ).fetchone()
                _rows.check_reappend(session_id, run_id, row[0] if row else None, encoded)

        await self._db.write(insert)
        return run_id

    async def clear(self, session_id: str) -> None:
        """Delete every segment of ``session_id``."""
        await self._db.write(
            lambda c: c.execute("DELETE FROM session_runs WHERE session_id = ?", (session_id,))
        )

    def lease(
        self, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``session_id`` for one run, across processes (see ``Session.lease``)."""
        return self._hold(session_id, wait=wait, timeout=timeout)

    async def trim_tool_results(
        self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1
    ) -> int:
        """Cut stored tool outputs to ``keep_chars`` in all but the last ``keep_runs`` runs.

        Returns how many results were trimmed. Idempotent; pairing and ``is_error`` are
        kept; one transaction, rolled back on any error. ``UserError`` for negative args.
        """
        _maintenance.check_trim_args(keep_chars, keep_runs)

        def trim(conn: sqlite3.Connection) -> int:
            rows = _select_runs(conn, session_id)
            updates, trimmed = _maintenance.trim_rows(rows, keep_chars, keep_runs)
            conn.executemany(
                "UPDATE session_runs SET entries = ?, version = ? WHERE id = ?", updates
            )
            return trimmed

        return await self._db.write(trim)

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of the history; returns how many went.

        Later runs are deleted; the run the cut lands in is truncated tool-consistently and
        loses its ``meta``. ``0`` empties the session; a cut past the end is a no-op.
        """
        _maintenance.check_rewind_args(keep_entries)

        def rewind(conn: sqlite3.Connection) -> int:
            rows = _select_runs(conn, session_id)
            truncate, gone, removed = _maintenance.rewind_rows(rows, keep_entries)
            if truncate is not None:
                conn.execute(
                    "UPDATE session_runs SET entries = ?, meta = '{}', version = ? WHERE id = ?",
                    truncate,
                )
            conn.executemany("DELETE FROM session_runs WHERE id = ?", [(i,) for i in gone])
            return removed

        return await self._db.write(rewind)

    @asynccontextmanager
    async def _hold(
        self, session_id: str, *, wait: bool, timeout: float | None
    ) -> AsyncIterator[None]:
        check_lease_args(session_id, timeout)
        owner = f"{_host_id()}:{os.getpid()}:{uuid4().hex}"
        backoff = Backoff(timeout)
        ttl = self._lease_ttl
        # A cancelled attempt cannot stop its worker thread. Checked inside the transaction,
        # this flag stops an attempt that has not run yet; the release undoes one that has.
        abandoned = threading.Event()

        def take(conn: sqlite3.Connection) -> bool:
            return not abandoned.is_set() and _take_lease(conn, session_id, owner, ttl)

        try:
            while not await self._db.write(take):
                if not wait or not await backoff.wait():
                    raise busy(session_id, waited=timeout if wait else None)
        except asyncio.CancelledError:
            abandoned.set()
            await asyncio.shield(self._release(session_id, owner))
            raise
        renewer = asyncio.create_task(self._renew(session_id, owner))
        try:
            yield
        finally:
            renewer.cancel()
            try:
                # wait() neither raises the renewer's outcome nor swallows our own cancel.
                await asyncio.wait([renewer])
            finally:
                # Shielded: a cancelled run must still hand the session back promptly.
                try:
                    await asyncio.shield(self._release(session_id, owner))
                except StoreError:
                    # Not raised over the run's own outcome; the lease then lapses with
                    # its expiry (lease_ttl) instead.
                    logger.warning(
                        "releasing the lease on session %r failed", session_id, exc_info=True
                    )

    async def _release(self, session_id: str, owner: str) -> None:
        await self._db.write(
            lambda c: c.execute(
                "DELETE FROM session_leases WHERE session_id = ? AND owner = ?",
                (session_id, owner),
            )
        )

    async def _renew(self, session_id: str, owner: str) -> None:
        while True:
            await asyncio.sleep(self._lease_ttl / 3)
            try:
                kept = await self._db.write(
                    lambda c: _renew_lease(c, session_id, owner, time.time() + self._lease_ttl)
                )
            except StoreError:
                # The run goes on; the next renewal may succeed before the lease expires.
                logger.warning("renewing the lease on session %r failed", session_id, exc_info=True)
                continue
            if not kept:
                logger.warning(
                    "lost the lease on session %r (it expired and another run took it)", session_id
                )
                return


class SQLiteCheckpointer:
    """A ``Checkpointer`` in an SQLite file, safe to share between processes.

    ``path`` is a file path or ``":memory:"``; ``wal=True`` turns on WAL mode (recommended:
    a checkpoint then costs well under a millisecond). Close with ``await store.aclose()``
    or use ``async with``.
    """

    def __init__(self, path: str | os.PathLike[str], *, wal: bool = False) -> None:
        self._db = SQLiteDatabase(path, wal=wal)

    async def __aenter__(self) -> SQLiteCheckpointer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the database connection (idempotent)."""
        await self._db.close()

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Add ``entries`` (no row when empty) and replace the head, in one transaction."""
        encoded, encoded_head = _rows.encode_checkpoint(run_id, entries, head)

        def append(conn: sqlite3.Connection) -> None:
            if encoded is not None:
                conn.execute(
                    "INSERT INTO snapshot_turns (run_id, entries, version) VALUES (?, ?, ?)",
                    (run_id, encoded, _rows.ROW_VERSION),
                )
            conn.execute(
                "INSERT INTO snapshot_heads (run_id, head, version, updated_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
                " head = excluded.head, version = excluded.version,"
                " updated_at = excluded.updated_at",
                (run_id, encoded_head, _rows.ROW_VERSION, head.updated_at),
            )

        await self._db.write(append)

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of ``run_id``, or ``None``; ``StoreError`` names an unreadable row."""

        def select(conn: sqlite3.Connection) -> tuple[Any, list[Any]]:
            head = conn.execute(
                "SELECT head, version FROM snapshot_heads WHERE run_id = ?", (run_id,)
            ).fetchone()
            turns = conn.execute(
                "SELECT id, entries, version FROM snapshot_turns WHERE run_id = ? ORDER BY id",
                (run_id,),
            ).fetchall()
            return head, turns

        head_row, turns = await self._db.read(select)
        return _rows.build_snapshot(run_id, head_row, turns)

    async def delete(self, run_id: str) -> None:
        """Forget ``run_id`` (idempotent)."""

        def delete(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM snapshot_turns WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM snapshot_heads WHERE run_id = ?", (run_id,))

        await self._db.write(delete)


def _select_runs(conn: sqlite3.Connection, session_id: str) -> list[_rows.SessionRow]:
    rows: list[_rows.SessionRow] = conn.execute(
        "SELECT id, run_id, entries, meta, version FROM session_runs"
        " WHERE session_id = ? ORDER BY id",
        (session_id,),
    ).fetchall()
    return rows


def _take_lease(conn: sqlite3.Connection, session_id: str, owner: str, ttl: float) -> bool:
    now = time.time()
    row = conn.execute(
        "SELECT owner, expires_at FROM session_leases WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is not None and row[1] > now and not _holder_is_dead(row[0]):
        return False
    conn.execute(
        "INSERT OR REPLACE INTO session_leases (session_id, owner, expires_at) VALUES (?, ?, ?)",
        (session_id, owner, now + ttl),
    )
    return True


def _renew_lease(conn: sqlite3.Connection, session_id: str, owner: str, expires: float) -> bool:
    cur = conn.execute(
        "UPDATE session_leases SET expires_at = ? WHERE session_id = ? AND owner = ?",
        (expires, session_id, owner),
    )
    return cur.rowcount == 1


@functools.cache
def _host_id() -> str:
    """This host as lease owners name it: the host name, plus the PID namespace on Linux.

    Containers sharing a volume may share a host name while their pids mean different
    processes; a holder is only judged by its pid when that pid is in our namespace.
    """
    try:
        namespace = f"/pidns{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        namespace = ""
    return socket.gethostname().replace(":", "_") + namespace


def _holder_is_dead(owner: str) -> bool:
    """Whether ``owner`` was a process on this host that no longer exists.

    Only on POSIX: ``os.kill(pid, 0)`` probes without signalling there (on Windows it would
    terminate the process). Other holders are trusted until their lease expires.
    """
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if os.name != "posix" or host != _host_id() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        return False
    return False


@overload
def from_url(url: str, *, kind: Literal["session"]) -> Session: ...
@overload
def from_url(url: str, *, kind: Literal["checkpointer"]) -> Checkpointer: ...
def from_url(url: str, *, kind: Literal["session", "checkpointer"]) -> Session | Checkpointer:
    """An SQLite store from ``sqlite:///abs/path.db``, ``sqlite://rel/path.db`` or
    ``sqlite://:memory:``; ``?wal=1`` turns on WAL (the ``lovia.stores`` entry point)."""
    parts = urlsplit(url)
    path = unquote(parts.netloc + parts.path)
    if not path:
        raise UserError(
            f"no database path in {url!r}",
            hint="use sqlite:///absolute/path.db or sqlite://:memory:",
        )
    if path == "/:memory:":
        path = ":memory:"
    wal_values = parse_qs(parts.query).get("wal", ["0"])
    wal = wal_values[-1].lower() in ("1", "true", "yes", "on")
    if kind == "session":
        return SQLiteSession(path, wal=wal)
    return SQLiteCheckpointer(path, wal=wal)
