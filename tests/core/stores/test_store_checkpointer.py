"""The Checkpointer contract and its value types, run against every backend."""

from __future__ import annotations

import json

import pytest
from lovia.checkpointer import CheckpointOptions, RunHead, RunSnapshot
from lovia.exceptions import StoreError, UserError
from lovia.messages import Usage
from lovia.parts import ImagePart, TextPart
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .conftest import Backend

TURN_1: list[TranscriptEntry] = [InputEntry("user", "hi"), ToolCallEntry("c1", "add", '{"a": 1}')]
TURN_2: list[TranscriptEntry] = [ToolResultEntry("c1", "2")]
TURN_3: list[TranscriptEntry] = [AssistantTextEntry("the answer is 2")]


def head(status: str = "running", **kwargs: object) -> RunHead:
    return RunHead(agent_name="main", status=status, updated_at=1.5, **kwargs)  # type: ignore[arg-type]


async def test_appends_accumulate_entries_and_replace_the_head(backend: Backend) -> None:
    store = backend.checkpointer()
    await store.append("run", TURN_1, head(turns=1))
    await store.append("run", TURN_2, head(turns=1))
    final = head("completed", turns=2, output={"answer": 2}, usage=Usage(10, 5, requests=2))
    await store.append("run", TURN_3, final)
    assert await store.load("run") == RunSnapshot("run", (*TURN_1, *TURN_2, *TURN_3), final)


async def test_an_unknown_run_loads_as_none(backend: Backend) -> None:
    assert await backend.checkpointer().load("missing") is None


async def test_a_head_only_append_updates_the_head(backend: Backend) -> None:
    store = backend.checkpointer()
    await store.append("run", TURN_1, head())
    await store.append("run", [], head("interrupted", error={"type": "RunCancelled"}))
    snapshot = await store.load("run")
    assert snapshot is not None
    assert snapshot.entries == tuple(TURN_1)
    assert snapshot.head.status == "interrupted"
    assert snapshot.head.error == {"type": "RunCancelled"}


async def test_a_head_only_append_adds_no_entry_row(db_backend: Backend) -> None:
    store = db_backend.checkpointer()
    await store.append("run", TURN_1, head())
    await store.append("run", [], head("interrupted"))
    await store.append("run", [], head("running"))
    assert db_backend.sql("SELECT count(*) FROM snapshot_turns WHERE run_id = ?", ("run",)) == [
        (1,)
    ]


async def test_runs_are_isolated_and_delete_is_idempotent(backend: Backend) -> None:
    store = backend.checkpointer()
    await store.append("a", TURN_1, head())
    await store.append("b", TURN_3, head("completed"))
    await store.delete("a")
    await store.delete("a")
    await store.delete("never")
    assert await store.load("a") is None
    snapshot = await store.load("b")
    assert snapshot is not None and snapshot.entries == tuple(TURN_3)


async def test_multimodal_entries_and_context_state_round_trip(backend: Backend) -> None:
    entries: list[TranscriptEntry] = [
        InputEntry("user", (TextPart("look"), ImagePart(data="aGk=", mime_type="image/png"))),
        ToolResultEntry("c1", "image", parts=(ImagePart(url="https://x.invalid/a.png"),)),
    ]
    state = {"compaction": {"cleared": ["c0"], "ratio": 1.25}, "note": "ünïcode"}
    store = backend.checkpointer()
    await store.append("run", entries, head(context_state=state, last_input_tokens=1234))
    snapshot = await store.load("run")
    assert snapshot is not None
    assert snapshot.entries == tuple(entries)
    assert snapshot.head.context_state == state
    assert snapshot.head.last_input_tokens == 1234


async def test_the_stored_head_is_frozen_against_later_mutation(backend: Backend) -> None:
    usage = Usage(1, 1)
    state: dict[str, object] = {"k": [1]}
    store = backend.checkpointer()
    await store.append("run", TURN_1, head(usage=usage, context_state=state))
    usage.add(Usage(100, 100))
    state["k"] = "changed"
    loaded = await store.load("run")
    assert loaded is not None
    loaded.head.usage.add(Usage(7, 7))
    again = await store.load("run")
    assert again is not None
    assert again.head.usage == Usage(1, 1)
    assert again.head.context_state == {"k": [1]}


async def test_a_non_json_safe_output_is_a_user_error_and_stores_nothing(
    backend: Backend,
) -> None:
    store = backend.checkpointer()
    with pytest.raises(UserError):
        await store.append("run", TURN_1, head("completed", output=object()))
    assert await store.load("run") is None


async def test_a_failed_write_rolls_back_the_entries_too(db_backend: Backend) -> None:
    store = db_backend.checkpointer()
    await store.append("run", TURN_1, head())
    # Make the head write fail inside the database, after the entry row was inserted.
    if db_backend.name == "sqlite":
        db_backend.sql(
            "CREATE TRIGGER no_heads BEFORE UPDATE ON snapshot_heads"
            " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )
    else:
        db_backend.sql(
            "CREATE FUNCTION no_heads() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"
        )
        db_backend.sql(
            "CREATE TRIGGER no_heads BEFORE UPDATE ON snapshot_heads"
            " FOR EACH ROW EXECUTE FUNCTION no_heads()"
        )
    with pytest.raises(StoreError, match="injected failure"):
        await store.append("run", TURN_2, head("completed"))
    snapshot = await store.load("run")
    assert snapshot is not None
    assert snapshot.entries == tuple(TURN_1)
    assert snapshot.head.status == "running"


async def test_snapshots_persist_across_store_instances(db_backend: Backend) -> None:
    await db_backend.checkpointer().append("run", TURN_1, head())
    snapshot = await db_backend.checkpointer().load("run")
    assert snapshot == RunSnapshot("run", tuple(TURN_1), head())


# -- value types -----------------------------------------------------------------------------


def test_snapshot_round_trips_through_json() -> None:
    snapshot = RunSnapshot(
        "run", (*TURN_1, *TURN_2), head("failed", error={"type": "X", "message": "é"})
    )
    assert RunSnapshot.from_dict(json.loads(snapshot.to_json())) == snapshot
    assert "é" in snapshot.to_json()


def test_snapshot_missing_optional_head_fields_take_defaults() -> None:
    data = {"run_id": "r", "entries": [], "head": {"agent_name": "main"}}
    snapshot = RunSnapshot.from_dict(data)
    assert snapshot.head.status == "running"
    assert snapshot.head.usage == Usage()
    assert snapshot.head.output is None and snapshot.head.context_state == {}


@pytest.mark.parametrize(
    "data",
    [
        {"run_id": "r", "version": 99, "entries": [], "head": {"agent_name": "a"}},
        {"run_id": "r", "entries": [{"type": "hologram"}], "head": {"agent_name": "a"}},
        {"run_id": "r", "entries": [], "head": {"agent_name": "a", "status": "paused"}},
        {"run_id": "r", "entries": [], "head": None},
        {"run_id": "r", "entries": [], "head": {"agent_name": "a", "usage": {"requests": "x"}}},
        {"run_id": "r", "entries": [], "head": {"agent_name": "a", "updated_at": None}},
        {
            "run_id": "r",
            "entries": [{"type": "input", "role": "user", "content": [{"type": "image"}]}],
            "head": {"agent_name": "a"},
        },
        {"run_id": "r", "entries": {"type": "input"}, "head": {"agent_name": "a"}},
    ],
    ids=[
        "newer-version",
        "unknown-entry",
        "unknown-status",
        "no-head",
        "bad-usage",
        "bad-time",
        "invalid-part",
        "entries-not-a-list",
    ],
)
def test_snapshot_from_bad_data_raises_store_error_naming_the_run(data: object) -> None:
    with pytest.raises(StoreError) as info:
        RunSnapshot.from_dict(data)
    assert info.value.run_id == "r"
    assert info.value.hint


@pytest.mark.parametrize("data", [None, [], {"entries": []}, {"run_id": 5}])
def test_data_that_is_not_a_snapshot_raises_store_error(data: object) -> None:
    with pytest.raises(StoreError) as info:
        RunSnapshot.from_dict(data)
    assert info.value.run_id is None and info.value.hint


class _Nothing:
    """A stand-in checkpointer: validation never calls it."""

    async def append(self, run_id: str, entries: object, head: RunHead) -> None: ...
    async def load(self, run_id: str) -> RunSnapshot | None: ...
    async def delete(self, run_id: str) -> None: ...


SNAPSHOT = RunSnapshot("r1", (), head())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"checkpointer": _Nothing(), "run_id": "  "},
        {"checkpointer": _Nothing(), "run_id": ""},
        {"checkpointer": _Nothing(), "run_id": "r2", "resume_from": SNAPSHOT},
        {"resume_from": SNAPSHOT, "delete_on_success": True},
        {},
        {"checkpointer": _Nothing(), "run_id": "r", "if_run_exists": "maybe"},
        {"checkpointer": _Nothing(), "resume_from": SNAPSHOT, "if_run_exists": "restart"},
    ],
    ids=[
        "blank-run-id",
        "empty-run-id",
        "resume-from-mismatch",
        "delete-without-checkpointer",
        "missing-parts",
        "unknown-policy",
        "restart-with-resume-from",
    ],
)
def test_checkpoint_options_are_validated_eagerly(kwargs: dict[str, object]) -> None:
    with pytest.raises(UserError) as info:
        CheckpointOptions(**kwargs)  # type: ignore[arg-type]
    assert info.value.hint


def test_checkpoint_options_fill_in_the_run_id() -> None:
    assert CheckpointOptions(resume_from=SNAPSHOT).run_id == "r1"
    generated = CheckpointOptions(_Nothing()).run_id
    assert generated is not None and len(generated) == 32
    assert CheckpointOptions(_Nothing(), "mine", if_run_exists="resume_only").run_id == "mine"
