"""One SQLite database file as the stores use it: a connection, its thread, its schema,
and the lease rows.

Why it looks like this:

* ``sqlite3`` blocks, so every call runs in a worker thread (``asyncio.to_thread``). One
  connection per store instance, serialised by a ``threading.Lock``, keeps ``:memory:``
  databases shared between calls and keeps transactions from interleaving in-process.
* The connection and the transactions follow ``lovia.stores.sqlite_file`` (autocommit with
  explicit transactions, writers ``BEGIN IMMEDIATE``, the switch to WAL retried within the
  busy timeout), which the memory archive and the chat store share.
* ``sqlite3`` errors are translated to ``StoreError`` here, at the seam.
* Leases are rows ``(key, owner, expires_at)`` (``session_leases``, ``run_leases``) written
  under ``BEGIN IMMEDIATE``; the holder renews its row while it runs. A lease whose holder
  died is taken over once it expires, or at once when the owner was a process on this host
  (same host name and, on Linux, same PID namespace) that no longer exists.
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
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from uuid import uuid4

from ..exceptions import StoreError
from ._lease import LeaseKind
from ._sql import Result, Script, Statements, statement
from .sqlite_file import open_sqlite, run_transaction

T = TypeVar("T")

logger = logging.getLogger(__name__)

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
    """CREATE TABLE IF NOT EXISTS run_leases (
        run_id TEXT PRIMARY KEY,
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
    """A lazily opened SQLite connection with write/read transaction helpers.

    ``migrate(sql)``, when given, is a script run once per connection right after the
    stores' tables are created, in the same ``BEGIN IMMEDIATE`` transaction (so two
    processes opening one file migrate it one after the other).
    """

    sql = Statements()

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        wal: bool,
        migrate: Callable[[Statements], Script[None]] | None = None,
    ) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path))
        self.wal = wal
        self._migrate = migrate
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False

    async def write(self, script: Script[T]) -> T:
        """Run ``script`` in one ``BEGIN IMMEDIATE`` transaction (rolled back if it raises)."""
        return await asyncio.to_thread(self._transaction, script, "BEGIN IMMEDIATE")

    async def read(self, script: Script[T]) -> T:
        """Run ``script`` in one read transaction (a consistent view across its queries)."""
        return await asyncio.to_thread(self._transaction, script, "BEGIN")

    async def close(self) -> None:
        """Close the connection (idempotent); the store cannot be used afterwards."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _transaction(self, script: Script[T], begin: str) -> T:
        with self._lock:
            try:
                conn = self._connection()
                return run_transaction(
                    conn, lambda c: _drive(c, script), write=begin == "BEGIN IMMEDIATE"
                )
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> StoreError:
        folder = Path(self.path).parent
        if self.path != ":memory:" and not folder.is_dir():
            return StoreError(
                f"SQLite store {self.path!r} cannot be opened: the folder {str(folder)!r} "
                "does not exist",
                hint="create the folder first (Path(path).parent.mkdir(parents=True)), or fix "
                "the path",
            )
        return StoreError(
            f"SQLite store {self.path!r} failed: {exc}",
            hint="check the file is writable and not on a network filesystem; "
            "with many writers pass wal=True",
        )

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(
                f"SQLite store {self.path!r} is closed",
                hint="aclose() ends a store for good; build a new one to use the file again",
            )
        if self._conn is None:
            migrate = self._migrate
            self._conn = open_sqlite(
                self.path,
                wal=self.wal,
                schema=_SCHEMA,
                setup=None if migrate is None else lambda conn: _drive(conn, migrate(self.sql)),
            )
        return self._conn


def _drive(conn: sqlite3.Connection, script: Script[T]) -> T:
    """Run each statement ``script`` yields and send it the result; return its value."""
    try:
        query = next(script)
        while True:
            cur = conn.execute(*query)
            query = script.send(Result(cur.rowcount, cur.fetchall()))
    except StopIteration as done:
        value: T = done.value
        return value


class LeaseRows:
    """The cross-process leases of one store kind, as rows of ``session_leases`` or
    ``run_leases`` (see the module docstring); a token is the ``(key, owner)`` written."""

    def __init__(self, db: SQLiteDatabase, kind: LeaseKind, ttl: float) -> None:
        self._db = db
        self._ttl = ttl
        self.renew_every: float | None = ttl / 3
        table, key = (
            ("session_leases", "session_id") if kind == "session" else ("run_leases", "run_id")
        )
        self._select = f"SELECT owner, expires_at FROM {table} WHERE {key} = ?"
        self._replace = (
            f"INSERT OR REPLACE INTO {table} ({key}, owner, expires_at) VALUES (?, ?, ?)"
        )
        self._renew = f"UPDATE {table} SET expires_at = ? WHERE {key} = ? AND owner = ?"
        self._delete = f"DELETE FROM {table} WHERE {key} = ? AND owner = ?"

    async def take(self, key: str) -> object | None:
        owner = f"{_host_id()}:{os.getpid()}:{uuid4().hex}"
        taken = await self._db.write(self._take(key, owner))
        return (key, owner) if taken else None

    async def renew(self, token: object) -> bool:
        key, owner = _token(token)
        return await self._db.write(self._extend(key, owner))

    async def release(self, token: object) -> None:
        key, owner = _token(token)
        await self._db.write(statement(self._delete, key, owner))

    def _take(self, key: str, owner: str) -> Script[bool]:
        now = time.time()
        held = yield self._select, (key,)
        if held.rows and held.rows[0][1] > now and not _holder_is_dead(held.rows[0][0]):
            return False
        yield self._replace, (key, owner, now + self._ttl)
        return True

    def _extend(self, key: str, owner: str) -> Script[bool]:
        renewed = yield self._renew, (time.time() + self._ttl, key, owner)
        return renewed.rowcount == 1


def _token(token: object) -> tuple[str, str]:
    assert isinstance(token, tuple)
    key, owner = token
    return key, owner


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
