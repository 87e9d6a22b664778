"""The chat store under bad input and load: ids and titles no database can keep, corrupt
rows, racing writers, a long event log."""

from __future__ import annotations

import asyncio

import pytest
from lovia.exceptions import StoreError, UserError
from lovia.web import EventRecord, EventRetention
from lovia.web.store import RunRecord, ScheduleRow
from lovia.web.store.sql import SQLChatStore

from .conftest import Backend

_BAD_IDS = ["", "a\x00b", "lone\ud800", "\udfff"]


@pytest.mark.parametrize("bad", _BAD_IDS, ids=["empty", "nul", "high", "low"])
async def test_an_unstorable_id_is_refused_on_write_and_not_found_on_read(
    store: SQLChatStore, bad: str
) -> None:
    with pytest.raises(UserError) as caught:
        await store.create_session(bad, agent="helper", title="t")
    assert caught.value.hint
    with pytest.raises(UserError):
        await store.append_events("s", [EventRecord(bad, 1, "x", {})])
    with pytest.raises(UserError):
        await store.append_events(bad, [EventRecord("r", 1, "x", {})])
    with pytest.raises(UserError):
        await store.record_run_started(RunRecord(bad, "s", "helper", "chat"))
    with pytest.raises(UserError):
        await store.save_schedule(ScheduleRow(bad, "helper", None, {}, 1.0))
    with pytest.raises(UserError):
        await store.create_session("ok", agent="helper", title="t", parent_id=bad)
    assert await store.get_session(bad) is None
    assert await store.update_session(bad, title="x") is None
    assert not await store.set_title_if_unchanged(bad, expected="t", title="x")
    assert not await store.set_active_run(bad, None)
    assert not await store.delete_session(bad)
    assert await store.read_events(bad) == [] and await store.last_seq(bad) == 0
    assert await store.latest_run(bad) is None and not await store.has_run(bad, bad)
    assert await store.get_schedule(bad) is None and not await store.delete_schedule(bad)
    assert not await store.claim_fire(bad, expected_next=1.0, next_fire_at=2.0, active=True)
    assert await store.list_runs(session_id=bad) == []
    assert await store.rewind_session(bad, keep_entries=0) == 0
    assert await store.prune_events(bad) == 0
    await store.record_run_finished(bad, status="completed")  # nothing to close
    assert await store.list_sessions(limit=10, offset=0) == []  # nothing was stored


async def test_titles_and_search_are_cleaned_not_refused(store: SQLChatStore) -> None:
    meta = await store.create_session("s", agent="helper", title="a\x00b\ud800c")
    assert meta.title == "ab\ufffdc"
    # A pair written as two surrogate code points joins into the character it encodes.
    renamed = await store.update_session("s", title="smile \ud83d\ude00\x00")
    assert renamed is not None and renamed.title == "smile \U0001f600"
    found = await store.list_sessions(limit=5, offset=0, query="\x00smile\ud800")
    assert found == []  # the query is cleaned, then taken literally: "smile\ufffd" matches nothing
    assert [m.id for m in await store.list_sessions(limit=5, offset=0, query="mile \x00")] == ["s"]
    assert await store.set_title_if_unchanged("t", expected="\x00", title="\ud800") is False


async def test_event_data_with_nul_and_lone_surrogates_round_trips(store: SQLChatStore) -> None:
    data = {"text": "nul\x00 lone\ud800 pair\U0001f600", "nested": [{"k": "\udfff"}]}
    await store.append_events("s", [EventRecord("r", 1, "text\x00_delta", data)])
    [record] = await store.read_events("r")
    assert record.data == data and record.type == "text_delta"


async def test_data_that_is_not_json_is_refused_and_nothing_is_written(
    store: SQLChatStore,
) -> None:
    with pytest.raises(UserError):
        await store.append_events(
            "s", [EventRecord("r", 1, "x", {}), EventRecord("r", 2, "x", {"v": object()})]
        )
    with pytest.raises(UserError):
        await store.append_events("s", [EventRecord("r", True, "x", {})])
    with pytest.raises(UserError):
        await store.save_schedule(ScheduleRow("s", "helper", None, {"v": {1, 2}}, 1.0))
    with pytest.raises(UserError):
        await store.save_schedule(ScheduleRow("s", "helper", None, {}, float("nan")))
    with pytest.raises(UserError):
        await store.claim_fire("s", expected_next=float("inf"), next_fire_at=None, active=False)
    assert await store.read_events("r") == [] and await store.list_schedules() == []


async def test_a_corrupt_event_row_is_a_store_error_naming_the_run_and_seq(
    db_backend: Backend,
) -> None:
    store = db_backend.store()
    await store.append_events("s", [EventRecord("r", seq, "x", {"n": seq}) for seq in (1, 2, 3)])
    await store.append_events("s", [EventRecord("other", 1, "x", {})])
    db_backend.sql("UPDATE run_events SET data = ? WHERE run_id = 'r' AND seq = 2", ('{"n": ',))
    with pytest.raises(StoreError) as caught:
        await store.read_events("r")
    assert caught.value.run_id == "r" and caught.value.row == 2 and caught.value.hint
    assert "event 2" in str(caught.value)
    assert [e.seq for e in await store.read_events("r", after=2)] == [3]  # past the bad row
    assert len(await store.read_events("other")) == 1 and await store.last_seq("r") == 3
    db_backend.sql("UPDATE run_events SET data = '[1]' WHERE run_id = 'other'")
    with pytest.raises(StoreError):
        await store.read_events("other")
    assert await store.delete_session("s") is False  # no chat row: the events stay
    await store.create_session("s", agent="helper", title="t")
    assert await store.delete_session("s")  # deleting the chat clears the damaged log
    assert await store.read_events("r") == []


async def test_a_corrupt_run_or_schedule_row_does_not_fail_the_listing(
    db_backend: Backend,
) -> None:
    store = db_backend.store()
    for run in ("a", "b"):
        await store.record_run_started(
            RunRecord(run, "s", "helper", "chat", usage={"tokens": 1}, started_at=1.0)
        )
    db_backend.sql("UPDATE chat_runs SET usage_json = '{broken' WHERE run_id = 'a'")
    runs = {r.run_id: r.usage for r in await store.list_runs()}
    assert runs == {"a": None, "b": {"tokens": 1}}
    for sid in ("x", "y"):
        await store.save_schedule(ScheduleRow(sid, "helper", None, {"k": sid}, 5.0))
    db_backend.sql("UPDATE chat_schedules SET data = 'null' WHERE id = 'x'")
    assert [s.id for s in await store.list_schedules()] == ["y"]
    assert [s.id for s in await store.due_schedules(10.0)] == ["y"]
    with pytest.raises(StoreError) as caught:
        await store.get_schedule("x")
    assert caught.value.hint and "'x'" in str(caught.value)


async def test_concurrent_appends_to_one_run_from_many_tasks(store: SQLChatStore) -> None:
    async def writer(first: int) -> None:
        for start in range(first, 400, 40):  # ten tasks, each its own stripe of seqs
            await store.append_events(
                "s", [EventRecord("r", seq, "x", {"seq": seq}) for seq in range(start, start + 4)]
            )

    await asyncio.gather(*(writer(1 + 4 * i) for i in range(10)))
    events = await store.read_events("r")
    assert [e.seq for e in events] == list(range(1, 401))
    assert all(e.data == {"seq": e.seq} for e in events)
    # Two writers racing for the same seqs: exactly one batch lands, whole.
    results = await asyncio.gather(
        *(
            store.append_events(
                "s", [EventRecord("r", 401, "x", {}), EventRecord("r", 402, "x", {})]
            )
            for _ in range(5)
        ),
        return_exceptions=True,
    )
    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, StoreError) for r in results if r is not None)
    assert await store.last_seq("r") == 402


async def test_a_4k_event_log_reads_back_in_order(store: SQLChatStore) -> None:
    for start in range(1, 4001, 500):
        await store.append_events(
            "s",
            [
                EventRecord("r", seq, "text_delta", {"delta": "x" * 40})
                for seq in range(start, start + 500)
            ],
        )
    events = await store.read_events("r")
    assert len(events) == 4000 and [e.seq for e in events] == list(range(1, 4001))
    assert [e.seq for e in await store.read_events("r", after=3990)] == list(range(3991, 4001))
    assert await store.read_events("r", after=4000) == []


async def test_a_closed_store_says_so(backend: Backend) -> None:
    store = backend.store()
    await store.create_session("s", agent="helper", title="t")
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreError):
        await store.get_session("s")


async def test_a_zero_retention_keeps_only_the_live_run(backend: Backend) -> None:
    store = backend.store(retention=EventRetention(runs_per_session=0, max_events=0))
    await store.create_session("s", agent="helper", title="t")
    await store.create_session("t", agent="helper", title="t")
    await store.set_active_run("s", "live")
    await store.append_events("s", [EventRecord("done", 1, "x", {})])
    await store.append_events("s", [EventRecord("live", 1, "x", {})])
    await store.append_events("t", [EventRecord("other", 1, "x", {})])
    assert await store.prune_events("s") == 2  # its own finished run, then another past the cap
    assert await store.read_events("done") == [] and await store.read_events("other") == []
    assert len(await store.read_events("live")) == 1
    assert await store.list_sessions(limit=0, offset=0) == []


async def test_racing_creates_of_one_chat_agree_on_the_first(db_backend: Backend) -> None:
    first, second = db_backend.store(), db_backend.store()
    metas = await asyncio.gather(
        *(
            s.create_session("same", agent=f"agent-{i}", title=f"t{i}")
            for i, s in enumerate([first, second] * 10)
        )
    )
    assert len({(m.agent, m.title, m.created_at) for m in metas}) == 1
    assert len(await first.list_sessions(limit=10, offset=0)) == 1
