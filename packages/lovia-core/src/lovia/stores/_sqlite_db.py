"""One SQLite database file as the stores use it: a connection, its thread, its schema.

Why it looks like this:

* ``sqlite3`` blocks, so every call runs in a worker thread (``asyncio.to_thread``). One
  connection per store instance, serialised by a ``threading.Lock``, keeps ``:memory:``
  databases shared between calls and keeps transactions from interleaving in-process.
* Writers open ``BEGIN IMMEDIATE``: the write lock is taken up front, so two processes
  writing at once wait on the busy timeout instead of failing half-way with a deadlock
  (a deferred transaction that upgrades to a writer cannot wait).
* The connection runs in autocommit mode (``isolation_level=None``) and transactions are
  explicit, so a read-modify-write is exactly one transaction and an error rolls it back.
* ``PRAGMA journal_mode=WAL`` is retried within the busy timeout: SQLite answers it with
  "database is locked" at once, without its busy handler, when another connection is
  writing in rollback mode (as the first of many connections opening one new file together
  is while it converts the file to WAL).
* ``sqlite3`` errors are translated to ``StoreError`` here, at the seam.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..exceptions import StoreError

T = TypeVar("T")

logger = logging.getLogger(__name__)

_BUSY_TIMEOUT_SECONDS = 30.0

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS session_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        entries TEXT NOT NULL,
        meta TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (session_id, run_id)
    )""",
    "CREATE INDEX IF NOT EXISTS session_runs_order ON session_runs (session_id, id)",
    """CREATE TABLE IF NOT EXISTS session_leases (
        session_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS snapshot_turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        entries TEXT NOT NULL,
        version INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS snapshot_turns_order ON snapshot_turns (run_id, id)",
    """CREATE TABLE IF NOT EXISTS snapshot_heads (
        run_id TEXT PRIMARY KEY,
        head TEXT NOT NULL,
        version INTEGER NOT NULL,
        updated_at REAL NOT NULL
    )""",
)


class SQLiteDatabase:
    """A lazily opened SQLite connection with write/read transaction helpers."""

    def __init__(self, path: str | os.PathLike[str], *, wal: bool) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path))
        self.wal = wal
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction (rolled back if it raises)."""
        return await asyncio.to_thread(self._transaction, fn, "BEGIN IMMEDIATE")

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one read transaction (a consistent view across its queries)."""
        return await asyncio.to_thread(self._transaction, fn, "BEGIN")

    async def close(self) -> None:
        """Close the connection (idempotent); the store cannot be used afterwards."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _transaction(self, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
        with self._lock:
            try:
                conn = self._connection()
                conn.execute(begin)
                try:
                    result = fn(conn)
                except BaseException:
                    if conn.in_transaction:  # SQLite may already have rolled back itself
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                raise StoreError(
                    f"SQLite store {self.path!r} failed: {exc}",
                    hint="check the file is writable and not on a network filesystem; "
                    "with many writers pass wal=True",
                ) from exc

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(
                f"SQLite store {self.path!r} is closed",
                hint="aclose() ends a store for good; build a new one to use the file again",
            )
        if self._conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,  # guarded by self._lock; used from worker threads
            )
            try:
                if self.wal and self.path != ":memory:":
                    _switch_to_wal(conn, self.path)
                    # WAL + NORMAL survives process crashes (only power loss may drop the
                    # last commits) and keeps a checkpoint write well under a millisecond.
                    conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(f"PRAGMA busy_timeout={int(_BUSY_TIMEOUT_SECONDS * 1000)}")
                conn.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn


def _switch_to_wal(conn: sqlite3.Connection, path: str) -> None:
    """``PRAGMA journal_mode=WAL``, retried while the file is locked, up to the busy timeout."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_SECONDS
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + delay > deadline:
                raise
            logger.debug("switching %r to WAL: the file is locked; retrying", path)
        time.sleep(delay)  # in the store's worker thread, never on the event loop
        delay = min(delay * 2, 0.05)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    return code == 5 if code is not None else "locked" in str(exc)  # 5: SQLITE_BUSY
