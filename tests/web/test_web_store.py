"""SQLiteChatStore on a real SQLite file: metadata, the event log and its retention."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lovia.exceptions import StoreError
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web import EventRecord, EventRetention, SQLiteChatStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteChatStore]:
    s = SQLiteChatStore(str(tmp_path / "nested" / "chat.db"))
    yield s
    await s.aclose()


async def test_sessions_list_pinned_first_then_most_recent(store: SQLiteChatStore) -> None:
    for sid in ("a", "b", "c"):
        await store.create_session(sid, agent="helper", title=sid.upper())
    await store.update_session("a", pinned=True)
    await store.update_session("b", title="renamed")
    listed = await store.list_sessions(limit=10, offset=0)
    assert [m.id for m in listed] == ["a", "b", "c"]
    assert listed[1].title == "renamed"
    assert [m.id for m in await store.list_sessions(limit=1, offset=1)] == ["b"]
    assert await store.update_session("missing", title="x") is None
    again = await store.create_session("a", agent="other", title="ignored")
    assert again.agent == "helper" and again.pinned  # an existing id is left unchanged


async def test_active_run_pointer_clears_only_when_it_still_names_the_run(
    store: SQLiteChatStore,
) -> None:
    await store.create_session("s", agent="helper", title="t")
    assert await store.set_active_run("s", "run-2")
    assert not await store.set_active_run("s", None, expected="run-1")
    assert (await store.get_session("s")).active_run_id == "run-2"  # type: ignore[union-attr]
    assert await store.set_active_run("s", None, expected="run-2")
    assert (await store.get_session("s")).active_run_id is None  # type: ignore[union-attr]


async def test_event_log_reads_after_a_seq_and_refuses_a_duplicate(
    store: SQLiteChatStore,
) -> None:
    await store.append_events(
        "s", [EventRecord("r", seq, "text_delta", {"d": "ü"}) for seq in (1, 2, 3)]
    )
    assert [e.seq for e in await store.read_events("r", after=1)] == [2, 3]
    assert (await store.read_events("r"))[0].data == {"d": "ü"}
    assert await store.last_seq("r") == 3 and await store.last_seq("other") == 0
    assert await store.latest_run("s") == "r"
    with pytest.raises(StoreError) as caught:
        await store.append_events(
            "s", [EventRecord("r", 4, "done", {}), EventRecord("r", 3, "x", {})]
        )
    assert await store.last_seq("r") == 3  # the failed batch left nothing behind
    assert caught.value.hint


async def test_delete_removes_transcript_metadata_and_events(store: SQLiteChatStore) -> None:
    await store.create_session("s", agent="helper", title="t")
    await store.session.append(
        "s", [InputEntry("user", "hi"), AssistantTextEntry("yo")], run_id="r"
    )
    await store.append_events("s", [EventRecord("r", 1, "done", {})])
    assert await store.delete_session("s")
    assert await store.get_session("s") is None
    assert await store.session.load("s") == []
    assert await store.read_events("r") == []
    assert not await store.delete_session("s")


async def test_retention_keeps_recent_runs_per_session_and_a_total_cap(tmp_path: Path) -> None:
    store = SQLiteChatStore(
        str(tmp_path / "r.db"), retention=EventRetention(runs_per_session=2, max_events=5)
    )
    try:
        await store.create_session("s", agent="helper", title="t")
        for run in ("r1", "r2", "r3"):
            await store.append_events("s", [EventRecord(run, seq, "x", {}) for seq in (1, 2)])
        assert await store.prune_events("s") == 2  # r1 is the third-newest run
        assert await store.read_events("r1") == []
        # A live run (the session's active_run_id) is never pruned, even past the cap.
        await store.set_active_run("s", "r4")
        await store.append_events("s", [EventRecord("r4", seq, "x", {}) for seq in range(1, 5)])
        # r2 falls out of the two newest runs (r4, r3); then 6 rows exceed the cap of 5, so
        # the oldest finished run, r3, goes too.
        assert await store.prune_events("s") == 4
        assert len(await store.read_events("r4")) == 4
        assert await store.read_events("r2") == [] and await store.read_events("r3") == []
    finally:
        await store.aclose()


async def test_search_matches_titles_and_takes_wildcards_literally(
    store: SQLiteChatStore,
) -> None:
    for sid, title in [
        ("a", "Plan 100% done"),
        ("b", "Plan 1000 done"),
        ("c", "my_file"),
        ("d", "myXfile"),
    ]:
        await store.create_session(sid, agent="helper", title=title)
    found = await store.list_sessions(limit=10, offset=0, query="100%")
    assert [m.id for m in found] == ["a"]
    assert [m.id for m in await store.list_sessions(limit=10, offset=0, query="y_f")] == ["c"]
    assert {m.id for m in await store.list_sessions(limit=10, offset=0, query="PLAN")} == {"a", "b"}
