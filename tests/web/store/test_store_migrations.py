"""Migrations: a database written by the first chat-store schema (before parent_id,
title_provisional, chat_runs and chat_schedules) opens and is migrated in place; migrating
is idempotent, refuses a newer database, and is safe when two openers race."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from lovia.exceptions import StoreError
from lovia.web.store import RunRecord, ScheduleRow
from lovia.web.store.sql import SCHEMA_VERSION
from lovia.web.store.sqlite import SQLiteChatStore

from .conftest import Backend

# The schema of lovia/web/store/sqlite.py before the version table existed, verbatim.
_V1_SQLITE = (
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
_V1_ROWS = (
    "INSERT INTO chat_sessions VALUES ('old', 'helper', 'Old chat', 1, 1.0, 2.0, NULL)",
    "INSERT INTO run_events (run_id, seq, session_id, type, data) "
    "VALUES ('r', 1, 'old', 'text_delta', '{\"delta\":\"hi\"}')",
)


def _old_file(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in (*_V1_SQLITE, *_V1_ROWS):
        conn.execute(statement)
    conn.close()


def _old_postgres(backend: Backend) -> None:
    import psycopg

    with psycopg.connect(backend.location, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{backend.schema}"')
    for statement in (*_V1_SQLITE, *_V1_ROWS):
        backend.sql(statement.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"))


def _make_old(backend: Backend) -> None:
    if backend.name == "sqlite":
        Path(backend.location).parent.mkdir(parents=True, exist_ok=True)
        _old_file(Path(backend.location))
    else:
        _old_postgres(backend)


async def test_an_old_database_is_migrated_in_place(db_backend: Backend) -> None:
    _make_old(db_backend)
    store = db_backend.store()
    old = await store.get_session("old")
    assert old is not None
    assert (old.title, old.pinned, old.parent_id) == ("Old chat", True, None)
    assert not old.title_provisional  # an existing title is kept as the user saw it
    assert [e.data for e in await store.read_events("r")] == [{"delta": "hi"}]
    # The new columns and tables work on the migrated database.
    child = await store.create_session("new", agent="helper", title="t", parent_id="old")
    assert child.parent_id == "old" and child.title_provisional
    await store.record_run_started(RunRecord("r", "old", "helper", "chat"))
    await store.save_schedule(ScheduleRow("s", "helper", "old", {"k": 1}, 5.0))
    assert [r.run_id for r in await store.list_runs()] == ["r"]
    assert [s.id for s in await store.due_schedules(10.0)] == ["s"]
    assert db_backend.sql("SELECT version FROM chat_schema_version") == [(SCHEMA_VERSION,)]


async def test_reopening_a_migrated_database_changes_nothing(db_backend: Backend) -> None:
    _make_old(db_backend)
    first = db_backend.store()
    await first.update_session("old", title="renamed")
    await first.aclose()
    again = db_backend.store()
    meta = await again.get_session("old")
    assert meta is not None and meta.title == "renamed"
    assert db_backend.sql("SELECT COUNT(*) FROM chat_schema_version") == [(1,)]


async def test_two_openers_migrate_one_old_database_once(db_backend: Backend) -> None:
    _make_old(db_backend)
    stores = [db_backend.store() for _ in range(4)]
    found = await asyncio.gather(*(s.get_session("old") for s in stores))
    assert all(m is not None and m.title == "Old chat" for m in found)
    assert db_backend.sql("SELECT version FROM chat_schema_version") == [(SCHEMA_VERSION,)]


async def test_a_newer_database_is_refused_with_a_hint(db_backend: Backend) -> None:
    store = db_backend.store()
    await store.create_session("s", agent="helper", title="t")
    db_backend.sql("UPDATE chat_schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    newer = db_backend.store()
    with pytest.raises(StoreError) as caught:
        await newer.get_session("s")
    assert "newer" in str(caught.value) and caught.value.hint


async def test_a_fresh_file_is_created_with_its_folder(tmp_path: Path) -> None:
    store = SQLiteChatStore(str(tmp_path / "a" / "b" / "chat.db"))
    try:
        assert await store.list_sessions(limit=5, offset=0) == []
    finally:
        await store.aclose()
    assert (tmp_path / "a" / "b" / "chat.db").is_file()
