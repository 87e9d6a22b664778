"""Unreadable rows: a typed error naming the run and the row, and nothing else touched."""

from __future__ import annotations

from typing import Any

import pytest
from lovia.checkpointer import RunHead
from lovia.exceptions import StoreError
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .conftest import Backend

GOOD: list[TranscriptEntry] = [InputEntry("user", "hello"), AssistantTextEntry("hi")]
OTHER: list[TranscriptEntry] = [InputEntry("user", "other"), AssistantTextEntry("fine")]

# (column, value) written over one stored row
CORRUPTIONS = {
    "truncated-json": ("entries", '[{"type":"input","role":"user","content":"hel'),
    "not-json": ("entries", "<<garbage>>"),
    "unknown-entry-type": ("entries", '[{"type":"hologram","content":"x"}]'),
    "not-a-list": ("entries", '{"type":"input"}'),
    "invalid-part": ("entries", '[{"type":"input","role":"user","content":[{"type":"image"}]}]'),
    "bad-base64": (
        "entries",
        '[{"type":"tool_result","call_id":"c","output":"o","parts":'
        '[{"type":"image","data":"!!","mime_type":"image/png"}]}]',
    ),
    "newer-schema-version": ("version", 2),
}


def _snapshot_tables(backend: Backend) -> list[Any]:
    return [
        backend.sql("SELECT * FROM session_runs ORDER BY id"),
        backend.sql("SELECT * FROM snapshot_turns ORDER BY id"),
        backend.sql("SELECT * FROM snapshot_heads ORDER BY run_id"),
    ]


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=list(CORRUPTIONS))
async def test_a_bad_session_row_names_the_run_and_the_row(
    db_backend: Backend, corruption: str
) -> None:
    store = db_backend.session()
    await store.append("s", GOOD, run_id="good")
    await store.append("s", OTHER, run_id="bad")
    await store.append("neighbour", OTHER, run_id="n1")
    column, value = CORRUPTIONS[corruption]
    db_backend.sql(f"UPDATE session_runs SET {column} = ? WHERE run_id = ?", (value, "bad"))
    ((row_id,),) = db_backend.sql("SELECT id FROM session_runs WHERE run_id = 'bad'")
    before = _snapshot_tables(db_backend)

    for read in (store.load, store.segments):
        with pytest.raises(StoreError) as info:
            await read("s")
        assert info.value.run_id == "bad"
        assert info.value.row == row_id
        assert "'bad'" in str(info.value) and f"row {row_id}" in str(info.value)
        assert info.value.hint

    # Maintenance refuses too, and rolls back instead of rewriting around the bad row.
    with pytest.raises(StoreError):
        await store.rewind("s", keep_entries=1)
    with pytest.raises(StoreError):
        await store.trim_tool_results("s", keep_chars=0, keep_runs=0)
    assert _snapshot_tables(db_backend) == before
    assert await store.load("neighbour") == OTHER


async def test_a_newer_schema_version_says_to_upgrade(db_backend: Backend) -> None:
    store = db_backend.session()
    await store.append("s", GOOD, run_id="r")
    db_backend.sql("UPDATE session_runs SET version = 7")
    with pytest.raises(StoreError) as info:
        await store.load("s")
    assert "version 7" in str(info.value)
    assert info.value.hint is not None and "upgrade lovia" in info.value.hint


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=list(CORRUPTIONS))
async def test_a_bad_checkpoint_row_names_the_run_and_the_row(
    db_backend: Backend, corruption: str
) -> None:
    store = db_backend.checkpointer()
    await store.append("bad", GOOD, RunHead(agent_name="a"))
    await store.append("bad", OTHER, RunHead(agent_name="a"))
    await store.append("fine", OTHER, RunHead(agent_name="a", status="completed"))
    column, value = CORRUPTIONS[corruption]
    ((row_id,),) = db_backend.sql("SELECT max(id) FROM snapshot_turns WHERE run_id = 'bad'")
    db_backend.sql(f"UPDATE snapshot_turns SET {column} = ? WHERE id = ?", (value, row_id))
    before = _snapshot_tables(db_backend)

    with pytest.raises(StoreError) as info:
        await store.load("bad")
    assert (info.value.run_id, info.value.row) == ("bad", row_id)
    assert _snapshot_tables(db_backend) == before
    fine = await store.load("fine")
    assert fine is not None and fine.entries == tuple(OTHER)


@pytest.mark.parametrize(
    ("column", "value"),
    [("head", '{"agent_name": "a", "status": "paused"}'), ("head", '{"agent_na'), ("version", 9)],
    ids=["unknown-status", "truncated-json", "newer-schema-version"],
)
async def test_a_bad_head_row_names_the_run(
    db_backend: Backend, column: str, value: object
) -> None:
    store = db_backend.checkpointer()
    await store.append("bad", GOOD, RunHead(agent_name="a"))
    db_backend.sql(f"UPDATE snapshot_heads SET {column} = ? WHERE run_id = 'bad'", (value,))
    with pytest.raises(StoreError) as info:
        await store.load("bad")
    assert (info.value.run_id, info.value.row) == ("bad", "head")


async def test_maintenance_rolls_back_rows_it_already_changed(db_backend: Backend) -> None:
    """The first run is trimmed (or cut) before the bad second run is reached: rolled back."""
    store = db_backend.session()
    big: list[TranscriptEntry] = [
        InputEntry("user", "q"),
        ToolCallEntry("c1", "read", "{}"),
        ToolResultEntry("c1", "x" * 500),
        AssistantTextEntry("a"),
    ]
    await store.append("s", big, run_id="first")
    await store.append("s", OTHER, run_id="bad")
    db_backend.sql("UPDATE session_runs SET entries = '[' WHERE run_id = 'bad'")
    before = _snapshot_tables(db_backend)
    with pytest.raises(StoreError) as info:
        await store.trim_tool_results("s", keep_chars=10, keep_runs=0)
    assert info.value.run_id == "bad"
    with pytest.raises(StoreError):
        await store.rewind("s", keep_entries=2)
    assert _snapshot_tables(db_backend) == before
    db_backend.sql("DELETE FROM session_runs WHERE run_id = 'bad'")
    assert await store.load("s") == big


@pytest.mark.parametrize(
    "head",
    [
        '{"agent_name": "a", "usage": {"input_tokens": "many"}}',
        '{"agent_name": "a", "turns": "three"}',
        '{"agent_name": "a", "error": "not an object"}',
        '["agent_name"]',
    ],
    ids=["bad-usage", "bad-turns", "bad-error", "not-an-object"],
)
async def test_a_head_with_wrong_field_types_names_the_run(db_backend: Backend, head: str) -> None:
    store = db_backend.checkpointer()
    await store.append("bad", GOOD, RunHead(agent_name="a"))
    db_backend.sql("UPDATE snapshot_heads SET head = ? WHERE run_id = 'bad'", (head,))
    with pytest.raises(StoreError) as info:
        await store.load("bad")
    assert (info.value.run_id, info.value.row) == ("bad", "head")


@pytest.mark.parametrize("meta", ['{"summary": "cut sh', "[1, 2]"], ids=["truncated", "not-object"])
async def test_a_bad_meta_column_names_the_run_and_the_row(db_backend: Backend, meta: str) -> None:
    store = db_backend.session()
    await store.append("s", GOOD, run_id="bad", meta={"summary": "kept"})
    db_backend.sql("UPDATE session_runs SET meta = ? WHERE run_id = 'bad'", (meta,))
    ((row_id,),) = db_backend.sql("SELECT id FROM session_runs WHERE run_id = 'bad'")
    with pytest.raises(StoreError) as info:
        await store.segments("s")
    assert (info.value.run_id, info.value.row) == ("bad", row_id)
    assert await store.load("s") == GOOD  # the history itself is intact
