"""SQLite specifics: WAL mode, ``:memory:``, text stored verbatim, closed stores."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from lovia.checkpointer import RunHead
from lovia.exceptions import StoreError
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.transcript import InputEntry


async def test_wal_mode_is_switched_on_when_asked(tmp_path: Path) -> None:
    for wal, expected in ((True, "wal"), (False, "delete")):
        path = tmp_path / f"{expected}.db"
        async with SQLiteSession(path, wal=wal) as store:
            await store.append("s", [InputEntry("user", "hi")])
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == (expected,)
        conn.close()


async def test_a_memory_database_is_shared_by_every_call_of_one_store() -> None:
    async with SQLiteSession(":memory:") as store:
        await store.append("s", [InputEntry("user", "hi")], run_id="r")
        assert await store.load("s") == [InputEntry("user", "hi")]
    async with SQLiteCheckpointer(":memory:") as checkpointer:
        await checkpointer.append("r", [InputEntry("user", "hi")], RunHead(agent_name="a"))
        assert await checkpointer.load("r") is not None


async def test_non_ascii_text_is_stored_verbatim(tmp_path: Path) -> None:
    async with SQLiteSession(tmp_path / "s.db") as store:
        await store.append("s", [InputEntry("user", "こんにちは — ünïcode")])
    with sqlite3.connect(tmp_path / "s.db") as conn:
        ((entries,),) = conn.execute("SELECT entries FROM session_runs").fetchall()
    conn.close()
    assert "こんにちは — ünïcode" in entries


async def test_a_closed_store_raises_store_error(tmp_path: Path) -> None:
    store = SQLiteSession(tmp_path / "s.db")
    await store.append("s", [InputEntry("user", "hi")])
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await store.load("s")


async def test_an_unwritable_path_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteSession(tmp_path / "missing-dir" / "s.db")
    with pytest.raises(StoreError) as info:
        await store.load("s")
    assert isinstance(info.value.__cause__, sqlite3.Error)
    assert info.value.hint
    await store.aclose()


async def test_a_failed_lease_release_does_not_mask_the_run_outcome(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteSession(tmp_path / "s.db")
    with pytest.raises(RuntimeError, match="the run's own"):
        async with store.lease("s"):
            await store.aclose()  # the release that follows cannot reach the database
            raise RuntimeError("the run's own")
    assert "releasing the lease on session 's' failed" in caplog.text
