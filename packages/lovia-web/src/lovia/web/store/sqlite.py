"""``SQLiteChatStore``: the ``ChatStore`` in one SQLite file.

The core's ``SQLiteSession`` and ``SQLiteCheckpointer`` and this module's two tables share the
file (WAL on by default, so readers of the event log never block the run writing it). Like
the core stores, one connection serialised by a lock runs every statement in a worker thread,
and writes take ``BEGIN IMMEDIATE`` so two processes wait on each other instead of failing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lovia.exceptions import StoreError
from lovia.stores.sqlite import SQLiteCheckpointer, SQLiteSession
from lovia.stores.sqlite_file import open_sqlite, run_transaction

from ..eventlog import EventRecord, EventRetention
from .base import ChatMeta, ChatStore

__all__ = ["SQLiteChatStore"]

T = TypeVar("T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS chat_sessions (
        id TEXT PRIMARY KEY,
        agent TEXT NOT NULL,
        title TEXT NOT NULL,
        pinned INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        active_run_id TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS run_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        UNIQUE (run_id, seq)
    )""",
    "CREATE INDEX IF NOT EXISTS run_events_session ON run_events (session_id, id)",
)

_META_COLUMNS = "id, agent, title, pinned, created_at, updated_at, active_run_id"


def _meta(row: tuple[Any, ...]) -> ChatMeta:
    return ChatMeta(row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6])


class SQLiteChatStore(ChatStore):
    """A ``ChatStore`` in the SQLite file at ``path`` (created with its folder if missing)."""

    def __init__(
        self, path: str, *, wal: bool = True, retention: EventRetention | None = None
    ) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.retention = retention or EventRetention()
        self._session = SQLiteSession(path, wal=wal)
        self._checkpointer = SQLiteCheckpointer(path, wal=wal)
        self.session = self._session
        self.checkpointer = self._checkpointer
        self._wal = wal
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SQLiteChatStore({self.path!r})"

    # -- plumbing --------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = open_sqlite(self.path, wal=self._wal, schema=_SCHEMA)
        return self._conn

    def _run(self, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
        with self._lock:
            return run_transaction(self._connect(), fn, write=begin == "BEGIN IMMEDIATE")

    async def _call(self, fn: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        try:
            return await asyncio.to_thread(self._run, fn, "BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as exc:
            raise StoreError(
                f"the chat store at {self.path} failed: {exc}",
                hint="check that the database file is writable and not corrupt",
            ) from exc

    # -- chat metadata ---------------------------------------------------------------------

    async def create_session(self, session_id: str, *, agent: str, title: str) -> ChatMeta:
        now = time.time()

        def create(conn: sqlite3.Connection) -> ChatMeta:
            conn.execute(
                "INSERT OR IGNORE INTO chat_sessions (id, agent, title, pinned, created_at, "
                "updated_at) VALUES (?, ?, ?, 0, ?, ?)",
                (session_id, agent, title, now, now),
            )
            row = conn.execute(
                f"SELECT {_META_COLUMNS} FROM chat_sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return _meta(row)

        return await self._call(create, write=True)

    async def get_session(self, session_id: str) -> ChatMeta | None:
        def get(conn: sqlite3.Connection) -> ChatMeta | None:
            row = conn.execute(
                f"SELECT {_META_COLUMNS} FROM chat_sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return None if row is None else _meta(row)

        return await self._call(get, write=False)

    async def list_sessions(
        self, *, limit: int, offset: int, query: str | None = None
    ) -> list[ChatMeta]:
        where: str = ""
        args: tuple[str, ...] = ()  # SQLite's LIKE is case-insensitive for ASCII
        if query:
            escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where, args = "WHERE title LIKE ? ESCAPE '\\' ", (f"%{escaped}%",)

        def select(conn: sqlite3.Connection) -> list[ChatMeta]:
            rows = conn.execute(
                f"SELECT {_META_COLUMNS} FROM chat_sessions {where}"
                "ORDER BY pinned DESC, updated_at DESC, id LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()
            return [_meta(r) for r in rows]

        return await self._call(select, write=False)

    async def update_session(
        self, session_id: str, *, title: str | None = None, pinned: bool | None = None
    ) -> ChatMeta | None:
        now = time.time()

        def update(conn: sqlite3.Connection) -> ChatMeta | None:
            conn.execute(
                "UPDATE chat_sessions SET title = COALESCE(?, title), "
                "pinned = COALESCE(?, pinned), updated_at = ? WHERE id = ?",
                (title, None if pinned is None else int(pinned), now, session_id),
            )
            row = conn.execute(
                f"SELECT {_META_COLUMNS} FROM chat_sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return None if row is None else _meta(row)

        return await self._call(update, write=True)

    async def set_active_run(
        self, session_id: str, run_id: str | None, *, expected: str | None = None
    ) -> bool:
        now = time.time()

        def point(conn: sqlite3.Connection) -> bool:
            sql = "UPDATE chat_sessions SET active_run_id = ?, updated_at = ? WHERE id = ?"
            args: tuple[Any, ...] = (run_id, now, session_id)
            if expected is not None:
                sql += " AND active_run_id = ?"
                args += (expected,)
            return conn.execute(sql, args).rowcount == 1

        return await self._call(point, write=True)

    async def delete_session(self, session_id: str) -> bool:
        def delete(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT active_run_id FROM chat_sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM chat_sessions WHERE id = ?", (session_id,))
            conn.execute("DELETE FROM run_events WHERE session_id = ?", (session_id,))
            return row[0] or ""

        active = await self._call(delete, write=True)
        if active is None:
            return False
        await self.session.clear(session_id)
        if active:
            await self.checkpointer.delete(active)
        return True

    # -- the event log ---------------------------------------------------------------------

    async def append_events(self, session_id: str, records: Sequence[EventRecord]) -> None:
        rows = [
            (
                r.run_id,
                r.seq,
                session_id,
                r.type,
                json.dumps(r.data, ensure_ascii=False, separators=(",", ":")),
            )
            for r in records
        ]

        def insert(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO run_events (run_id, seq, session_id, type, data) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

        await self._call(insert, write=True)

    async def read_events(self, run_id: str, *, after: int = 0) -> list[EventRecord]:
        def select(conn: sqlite3.Connection) -> list[EventRecord]:
            rows = conn.execute(
                "SELECT seq, type, data FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq",
                (run_id, after),
            ).fetchall()
            return [EventRecord(run_id, seq, kind, json.loads(data)) for seq, kind, data in rows]

        return await self._call(select, write=False)

    async def last_seq(self, run_id: str) -> int:
        def select(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT MAX(seq) FROM run_events WHERE run_id = ?", (run_id,)
            ).fetchone()
            return int(row[0] or 0)

        return await self._call(select, write=False)

    async def latest_run(self, session_id: str) -> str | None:
        def select(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT run_id FROM run_events WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._call(select, write=False)

    async def has_run(self, session_id: str, run_id: str) -> bool:
        def select(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM run_events WHERE run_id = ? AND session_id = ? LIMIT 1",
                (run_id, session_id),
            ).fetchone()
            return row is not None

        return await self._call(select, write=False)

    async def prune_events(self, session_id: str) -> int:
        keep, cap = self.retention.runs_per_session, self.retention.max_events

        def prune(conn: sqlite3.Connection) -> int:
            live = {
                r[0]
                for r in conn.execute(
                    "SELECT active_run_id FROM chat_sessions WHERE active_run_id IS NOT NULL"
                )
            }
            # Runs of this session, newest first (by their last row).
            runs = [
                r[0]
                for r in conn.execute(
                    "SELECT run_id FROM run_events WHERE session_id = ? GROUP BY run_id "
                    "ORDER BY MAX(id) DESC",
                    (session_id,),
                )
            ]
            stale = [r for r in runs[keep:] if r not in live]
            deleted = 0
            for run_id in stale:
                deleted += conn.execute(
                    "DELETE FROM run_events WHERE run_id = ?", (run_id,)
                ).rowcount
            total = conn.execute("SELECT COUNT(*) FROM run_events").fetchone()[0]
            if total > cap:
                oldest = conn.execute(
                    "SELECT run_id, COUNT(*) FROM run_events GROUP BY run_id ORDER BY MAX(id)"
                ).fetchall()
                for run_id, count in oldest:
                    if total <= cap:
                        break
                    if run_id in live:
                        continue
                    conn.execute("DELETE FROM run_events WHERE run_id = ?", (run_id,))
                    total -= count
                    deleted += count
            return deleted

        return await self._call(prune, write=True)

    async def aclose(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        await self._session.aclose()
        await self._checkpointer.aclose()
