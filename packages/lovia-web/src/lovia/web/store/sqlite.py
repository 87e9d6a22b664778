"""``SQLiteChatStore``: the ``ChatStore`` in one SQLite file (or one ``:memory:`` database).

The chat tables, the core's ``SQLiteSession`` and its ``SQLiteCheckpointer`` share the file
(WAL on by default, so readers of the event log never block the run writing it); each keeps
its own connection, serialised by a lock, with writes under ``BEGIN IMMEDIATE`` so two
processes wait on each other instead of failing. ``":memory:"`` is one private database:
the chat tables, the transcripts and the checkpoints then share a single connection. The
behaviour is ``lovia.web.store.sql``'s, shared with PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

from lovia.stores.sql import LeaseRows, SQLCheckpointer, SQLiteDatabase, SQLSession
from lovia.stores.sqlite import SQLiteCheckpointer, SQLiteSession

from ..eventlog import EventRetention
from .sql import SQLChatStore, migrate

__all__ = ["SQLiteChatStore"]

_LEASE_TTL = 30.0


class SQLiteChatStore(SQLChatStore):
    """A ``ChatStore`` in the SQLite file at ``path`` (created with its folder if missing);
    an older file is migrated in place when first opened."""

    def __init__(
        self, path: str, *, wal: bool = True, retention: EventRetention | None = None
    ) -> None:
        self.path = path
        if path == ":memory:":
            db = SQLiteDatabase(path, wal=False, migrate=migrate)
            session: SQLSession = SQLSession(db, LeaseRows(db, "session", _LEASE_TTL))
            checkpointer: SQLCheckpointer = SQLCheckpointer(db, LeaseRows(db, "run", _LEASE_TTL))
        else:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            db = SQLiteDatabase(path, wal=wal, migrate=migrate)
            session = SQLiteSession(path, wal=wal)
            checkpointer = SQLiteCheckpointer(path, wal=wal)
        super().__init__(db, session, checkpointer, retention=retention)

    def __repr__(self) -> str:
        return f"SQLiteChatStore({self.path!r})"
