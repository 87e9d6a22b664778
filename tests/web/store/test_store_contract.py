"""The ChatStore contract on every backend (SQLite file, in-memory, PostgreSQL): chat
metadata, the event log and its retention, deletion, rewind, run records and schedules."""

from __future__ import annotations

import asyncio

import pytest
from lovia.exceptions import StoreError, UserError
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web import EventRecord, EventRetention
from lovia.web.store import RunRecord, ScheduleRow
from lovia.web.store.sql import SQLChatStore

from .conftest import Backend


def _events(run: str, seqs: range | tuple[int, ...], kind: str = "x") -> list[EventRecord]:
    return [EventRecord(run, seq, kind, {"n": seq}) for seq in seqs]


# -- chat metadata --------------------------------------------------------------------------


async def test_sessions_list_pinned_first_then_most_recent(store: SQLChatStore) -> None:
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


async def test_a_new_chat_has_a_provisional_title_and_a_parent(store: SQLChatStore) -> None:
    meta = await store.create_session("p", agent="helper", title="first words")
    assert meta.title_provisional and meta.parent_id is None and meta.active_run_id is None
    child = await store.create_session("c", agent="helper", title="task", parent_id="p")
    assert child.parent_id == "p"
    assert await store.get_session("c") == child
    assert await store.get_session("nope") is None


async def test_a_rename_clears_provisional_and_wins_over_a_generated_title(
    store: SQLChatStore,
) -> None:
    await store.create_session("s", agent="helper", title="hello there")
    await store.create_session("t", agent="helper", title="hello there")
    # The generated title lands while the title is still the provisional one.
    assert await store.set_title_if_unchanged("s", expected="hello there", title="Greeting")
    meta = await store.get_session("s")
    assert meta is not None and meta.title == "Greeting" and not meta.title_provisional
    # Once set it is no longer provisional: a second generation does not overwrite it.
    assert not await store.set_title_if_unchanged("s", expected="Greeting", title="Other")
    # A manual rename in between: the generated title loses.
    renamed = await store.update_session("t", title="mine")
    assert renamed is not None and not renamed.title_provisional
    assert not await store.set_title_if_unchanged("t", expected="hello there", title="Greeting")
    assert not await store.set_title_if_unchanged("t", expected="mine", title="Greeting")
    assert (await store.get_session("t")).title == "mine"  # type: ignore[union-attr]
    assert not await store.set_title_if_unchanged("missing", expected="x", title="y")
    # Pinning alone leaves the title provisional.
    await store.create_session("u", agent="helper", title="u")
    pinned = await store.update_session("u", pinned=True)
    assert pinned is not None and pinned.pinned and pinned.title_provisional


async def test_update_session_moves_updated_at(store: SQLChatStore) -> None:
    meta = await store.create_session("s", agent="helper", title="t")
    touched = await store.update_session("s")
    assert touched is not None and touched.updated_at >= meta.updated_at
    assert touched.title == "t" and touched.title_provisional


async def test_active_run_pointer_clears_only_when_it_still_names_the_run(
    store: SQLChatStore,
) -> None:
    await store.create_session("s", agent="helper", title="t")
    assert await store.set_active_run("s", "run-2")
    assert not await store.set_active_run("s", None, expected="run-1")
    assert (await store.get_session("s")).active_run_id == "run-2"  # type: ignore[union-attr]
    assert await store.set_active_run("s", None, expected="run-2")
    assert (await store.get_session("s")).active_run_id is None  # type: ignore[union-attr]
    assert not await store.set_active_run("missing", "r")


async def test_active_run_compare_and_set_has_one_winner(store: SQLChatStore) -> None:
    await store.create_session("s", agent="helper", title="t")
    await store.set_active_run("s", "r0")
    results = await asyncio.gather(
        *(store.set_active_run("s", f"r{i}", expected="r0") for i in range(1, 11))
    )
    assert sum(results) == 1
    winner = results.index(True) + 1
    assert (await store.get_session("s")).active_run_id == f"r{winner}"  # type: ignore[union-attr]


async def test_search_matches_titles_and_takes_wildcards_literally(store: SQLChatStore) -> None:
    for sid, title in [
        ("a", "Plan 100% done"),
        ("b", "Plan 1000 done"),
        ("c", "my_file"),
        ("d", "myXfile"),
        ("e", "back\\slash"),
    ]:
        await store.create_session(sid, agent="helper", title=title)
    found = await store.list_sessions(limit=10, offset=0, query="100%")
    assert [m.id for m in found] == ["a"]
    assert [m.id for m in await store.list_sessions(limit=10, offset=0, query="y_f")] == ["c"]
    assert {m.id for m in await store.list_sessions(limit=10, offset=0, query="PLAN")} == {"a", "b"}
    assert [m.id for m in await store.list_sessions(limit=10, offset=0, query="k\\s")] == ["e"]
    assert await store.list_sessions(limit=10, offset=0, query="absent") == []


async def test_listing_without_tasks_leaves_them_out_before_paging(store: SQLChatStore) -> None:
    # The sidebar's list: task sessions must not take places in the page it cuts.
    await store.create_session("mine", agent="x", title="plan the trip")
    await store.create_session("lead", agent="x", title="plan the move")
    for n in range(3):
        await store.create_session(f"t{n}", agent="x", title=f"sa_{n}: plan", parent_id="lead")
    chats = await store.list_sessions(limit=2, offset=0, tasks=False)
    assert [m.id for m in chats] == ["lead", "mine"]
    found = await store.list_sessions(limit=2, offset=0, query="plan", tasks=False)
    assert [m.id for m in found] == ["lead", "mine"]
    assert len(await store.list_sessions(limit=10, offset=0, query="plan")) == 5


async def test_listing_refuses_negative_paging(store: SQLChatStore) -> None:
    with pytest.raises(UserError):
        await store.list_sessions(limit=-1, offset=0)
    with pytest.raises(UserError):
        await store.list_runs(offset=-5)


# -- the event log --------------------------------------------------------------------------


async def test_event_log_reads_after_a_seq_and_refuses_a_duplicate(store: SQLChatStore) -> None:
    await store.append_events(
        "s", [EventRecord("r", seq, "text_delta", {"d": "ü"}) for seq in (1, 2, 3)]
    )
    assert [e.seq for e in await store.read_events("r", after=1)] == [2, 3]
    assert (await store.read_events("r"))[0].data == {"d": "ü"}
    assert await store.last_seq("r") == 3 and await store.last_seq("other") == 0
    assert await store.latest_run("s") == "r"
    assert await store.latest_run("nobody") is None
    assert await store.has_run("s", "r") and not await store.has_run("other", "r")
    with pytest.raises(StoreError) as caught:
        await store.append_events(
            "s", [EventRecord("r", 4, "done", {}), EventRecord("r", 3, "x", {})]
        )
    assert await store.last_seq("r") == 3  # the failed batch left nothing behind
    assert caught.value.hint
    await store.append_events("s", [])  # nothing to do


async def test_latest_run_is_the_last_one_logged(store: SQLChatStore) -> None:
    await store.append_events("s", _events("r1", (1, 2)))
    await store.append_events("s", _events("r2", (1,)))
    await store.append_events("s", _events("r1", (3,)))
    assert await store.latest_run("s") == "r1"


async def test_a_batch_larger_than_one_statement_lands_whole(store: SQLChatStore) -> None:
    await store.append_events("s", _events("r", range(1, 251)))
    assert [e.seq for e in await store.read_events("r")] == list(range(1, 251))
    with pytest.raises(StoreError):  # seq 250 repeats in the third statement of the batch
        await store.append_events("s", _events("r", (*range(251, 460), 250)))
    assert await store.last_seq("r") == 250


async def test_delete_removes_transcript_metadata_events_runs_and_checkpoints(
    store: SQLChatStore,
) -> None:
    from lovia.checkpointer import RunHead

    await store.create_session("s", agent="helper", title="t")
    await store.create_session("other", agent="helper", title="t")
    await store.session.append(
        "s", [InputEntry("user", "hi"), AssistantTextEntry("yo")], run_id="r"
    )
    await store.checkpointer.append("r", [InputEntry("user", "hi")], RunHead(agent_name="helper"))
    await store.append_events("s", [EventRecord("r", 1, "done", {})])
    await store.append_events("other", [EventRecord("o", 1, "done", {})])
    await store.record_run_started(RunRecord("r", "s", "helper", "chat"))
    await store.record_run_started(RunRecord("o", "other", "helper", "chat"))
    assert await store.delete_session("s")
    assert await store.get_session("s") is None
    assert await store.session.load("s") == []
    assert await store.read_events("r") == []
    assert await store.checkpointer.load("r") is None
    assert [r.run_id for r in await store.list_runs()] == ["o"]
    assert len(await store.read_events("o")) == 1  # another chat is untouched
    assert not await store.delete_session("s")


async def test_deleting_a_chat_deletes_its_task_sessions(store: SQLChatStore) -> None:
    await store.create_session("p", agent="helper", title="t")
    await store.create_session("c1", agent="helper", title="t", parent_id="p")
    await store.create_session("c2", agent="helper", title="t", parent_id="c1")
    await store.create_session("x", agent="helper", title="t")
    await store.session.append("c2", [InputEntry("user", "deep")], run_id="rc")
    assert await store.task_sessions("p") == ["c1", "c2"]
    assert await store.task_sessions("c1") == ["c2"]
    assert await store.task_sessions("x") == [] and await store.task_sessions("nope") == []
    assert await store.delete_session("p")
    assert [m.id for m in await store.list_sessions(limit=10, offset=0)] == ["x"]
    assert await store.session.load("c2") == []


async def test_delete_all_sessions_returns_the_ids_and_empties_everything(
    store: SQLChatStore,
) -> None:
    for sid in ("b", "a", "c"):
        await store.create_session(sid, agent="helper", title=sid)
        await store.session.append(sid, [InputEntry("user", sid)], run_id=f"r-{sid}")
        await store.append_events(sid, [EventRecord(f"r-{sid}", 1, "done", {})])
        await store.record_run_started(RunRecord(f"r-{sid}", sid, "helper", "chat"))
    await store.save_schedule(ScheduleRow("sch", "helper", None, {}, 5.0))
    assert sorted(await store.delete_all_sessions()) == ["a", "b", "c"]
    assert await store.list_sessions(limit=10, offset=0) == []
    assert await store.session.load("a") == []
    assert await store.read_events("r-a") == [] and await store.list_runs() == []
    assert await store.get_schedule("sch") is not None  # schedules are not chats
    assert await store.delete_all_sessions() == []


async def test_rewind_truncates_the_transcript(store: SQLChatStore) -> None:
    assert store.supports_rewind
    await store.create_session("s", agent="helper", title="t")
    await store.session.append(
        "s", [InputEntry("user", "one"), AssistantTextEntry("1")], run_id="r1"
    )
    await store.session.append(
        "s", [InputEntry("user", "two"), AssistantTextEntry("2")], run_id="r2"
    )
    assert await store.rewind_session("s", keep_entries=2) == 2
    assert [getattr(e, "content", None) for e in await store.session.load("s")] == ["one", "1"]
    assert await store.rewind_session("s", keep_entries=10) == 0
    assert await store.rewind_session("missing", keep_entries=0) == 0
    with pytest.raises(UserError):
        await store.rewind_session("s", keep_entries=-1)


async def test_retention_keeps_recent_runs_per_session_and_a_total_cap(backend: Backend) -> None:
    store = backend.store(retention=EventRetention(runs_per_session=2, max_events=5))
    await store.create_session("s", agent="helper", title="t")
    for run in ("r1", "r2", "r3"):
        await store.append_events("s", _events(run, (1, 2)))
    assert await store.prune_events("s") == 2  # r1 is the third-newest run
    assert await store.read_events("r1") == []
    # A live run (the session's active_run_id) is never pruned, even past the cap.
    await store.set_active_run("s", "r4")
    await store.append_events("s", _events("r4", range(1, 5)))
    # r2 falls out of the two newest runs (r4, r3); then 6 rows exceed the cap of 5, so
    # the oldest finished run, r3, goes too.
    assert await store.prune_events("s") == 4
    assert len(await store.read_events("r4")) == 4
    assert await store.read_events("r2") == [] and await store.read_events("r3") == []
    assert await store.prune_events("s") == 0


# -- run records ----------------------------------------------------------------------------


async def test_run_records_are_listed_newest_first_and_filtered(store: SQLChatStore) -> None:
    await store.record_run_started(RunRecord("r1", "s", "helper", "chat", started_at=10.0))
    await store.record_run_started(RunRecord("r2", "s", "helper", "schedule", started_at=20.0))
    await store.record_run_started(RunRecord("r3", "t", "helper", "subagent", started_at=30.0))
    await store.record_run_started(RunRecord("r4", "t", "helper", "resume", started_at=40.0))
    assert [r.run_id for r in await store.list_runs()] == ["r4", "r3", "r2", "r1"]
    assert [r.run_id for r in await store.list_runs(session_id="s")] == ["r2", "r1"]
    assert [r.run_id for r in await store.list_runs(source="schedule")] == ["r2"]
    assert [r.run_id for r in await store.list_runs(since=30.0)] == ["r4", "r3"]
    assert [r.run_id for r in await store.list_runs(limit=2, offset=1)] == ["r3", "r2"]
    assert [r.run_id for r in await store.list_runs(session_id="t", since=35)] == ["r4"]
    assert await store.list_runs(session_id="nobody") == []


async def test_a_finished_run_keeps_status_error_usage_and_end(store: SQLChatStore) -> None:
    await store.record_run_started(RunRecord("r", "s", "helper", "chat", started_at=5.0))
    [running] = await store.list_runs()
    assert running == RunRecord("r", "s", "helper", "chat", "running", 5.0, None, None, None)
    await store.record_run_finished(
        "r", status="failed", error="boom", usage={"input_tokens": 3}, ended_at=9.5
    )
    [done] = await store.list_runs()
    assert (done.status, done.error, done.usage, done.ended_at) == (
        "failed",
        "boom",
        {"input_tokens": 3},
        9.5,
    )
    await store.record_run_finished("unknown", status="completed")  # ignored
    await store.record_run_finished("r", status="completed")
    [again] = await store.list_runs()
    assert again.status == "completed" and again.ended_at is not None and again.ended_at > 9.5


async def test_a_restarted_run_replaces_its_record(store: SQLChatStore) -> None:
    await store.record_run_started(RunRecord("r", "s", "helper", "chat", started_at=1.0))
    await store.record_run_finished("r", status="cancelled")
    await store.record_run_started(RunRecord("r", "s", "helper", "resume", started_at=2.0))
    [record] = await store.list_runs()
    assert (record.source, record.status, record.ended_at) == ("resume", "running", None)


async def test_run_values_outside_the_vocabulary_are_refused(store: SQLChatStore) -> None:
    with pytest.raises(UserError):
        await store.record_run_started(RunRecord("r", "s", "helper", "cron"))  # type: ignore[arg-type]
    with pytest.raises(UserError):
        await store.record_run_finished("r", status="exploded")  # type: ignore[arg-type]
    with pytest.raises(UserError):
        await store.record_run_started(RunRecord("r", "s", "helper", "chat", usage={1j: 2}))  # type: ignore[dict-item]


async def test_sweep_marks_running_records_interrupted(store: SQLChatStore) -> None:
    await store.record_run_started(RunRecord("a", "s", "helper", "chat"))
    await store.record_run_started(RunRecord("b", "s", "helper", "chat"))
    await store.record_run_finished("b", status="completed")
    assert await store.sweep_stale_runs() == 1
    statuses = {r.run_id: (r.status, r.ended_at is not None) for r in await store.list_runs()}
    assert statuses == {"a": ("interrupted", True), "b": ("completed", True)}
    assert await store.sweep_stale_runs() == 0


# -- schedules ------------------------------------------------------------------------------


async def test_schedules_upsert_get_list_delete(store: SQLChatStore) -> None:
    row = ScheduleRow(
        "s1", "helper", "chat-1", {"cron": "0 * * * *"}, 100.0, created_at=1.0, updated_at=1.0
    )
    await store.save_schedule(row)
    assert await store.get_schedule("s1") == row
    other = ScheduleRow("s2", "other", None, {"every": 60}, None, False, 2.0, 2.0)
    await store.save_schedule(other)
    changed = ScheduleRow("s1", "helper", "chat-1", {"cron": "5 * * * *"}, 200.0, True, 9.0, 9.0)
    await store.save_schedule(changed)
    got = await store.get_schedule("s1")
    assert got is not None and got.data == {"cron": "5 * * * *"} and got.next_fire_at == 200.0
    assert got.created_at == 1.0 and got.updated_at == 9.0  # an upsert keeps created_at
    assert [s.id for s in await store.list_schedules()] == ["s1", "s2"]
    assert [s.id for s in await store.list_schedules(agent="other")] == ["s2"]
    assert [s.id for s in await store.list_schedules(active=True)] == ["s1"]
    assert [s.id for s in await store.list_schedules(active=False, agent="helper")] == []
    assert await store.delete_schedule("s2") and not await store.delete_schedule("s2")
    assert await store.get_schedule("s2") is None


async def test_due_schedules_are_the_active_ones_oldest_fire_first(store: SQLChatStore) -> None:
    for sid, at, active in [("late", 50.0, True), ("early", 10.0, True), ("off", 5.0, False)]:
        await store.save_schedule(ScheduleRow(sid, "helper", None, {}, at, active))
    await store.save_schedule(ScheduleRow("never", "helper", None, {}, None))
    await store.save_schedule(ScheduleRow("future", "helper", None, {}, 1000.0))
    assert [s.id for s in await store.due_schedules(60.0)] == ["early", "late"]
    assert [s.id for s in await store.due_schedules(60.0, limit=1)] == ["early"]
    assert await store.due_schedules(1.0) == []


async def test_claim_fire_is_a_compare_and_set(store: SQLChatStore) -> None:
    await store.save_schedule(ScheduleRow("s", "helper", None, {}, 10.0))
    assert not await store.claim_fire("s", expected_next=9.0, next_fire_at=20.0, active=True)
    assert await store.claim_fire("s", expected_next=10.0, next_fire_at=20.0, active=True)
    assert not await store.claim_fire("s", expected_next=10.0, next_fire_at=20.0, active=True)
    got = await store.get_schedule("s")
    assert got is not None and got.next_fire_at == 20.0
    # A one-shot fire retires the schedule; a paused one is never claimed.
    assert await store.claim_fire("s", expected_next=20.0, next_fire_at=None, active=False)
    got = await store.get_schedule("s")
    assert got is not None and got.next_fire_at is None and not got.active
    await store.save_schedule(ScheduleRow("p", "helper", None, {}, 5.0, active=False))
    assert not await store.claim_fire("p", expected_next=5.0, next_fire_at=6.0, active=True)
    assert not await store.claim_fire("missing", expected_next=5.0, next_fire_at=6.0, active=True)


async def test_claim_fire_from_20_tasks_has_one_winner(store: SQLChatStore) -> None:
    at = 1700000000.25
    await store.save_schedule(ScheduleRow("s", "helper", None, {}, at))
    wins = await asyncio.gather(
        *(
            store.claim_fire("s", expected_next=at, next_fire_at=at + 60, active=True)
            for _ in range(20)
        )
    )
    assert sum(wins) == 1


async def test_claim_fire_from_two_store_instances_has_one_winner(db_backend: Backend) -> None:
    first, second = db_backend.store(), db_backend.store()
    await first.save_schedule(ScheduleRow("s", "helper", None, {}, 42.5))
    for _ in range(3):  # every fire of the schedule has exactly one winner
        due = await second.get_schedule("s")
        assert due is not None and due.next_fire_at is not None
        at = due.next_fire_at
        wins = await asyncio.gather(
            *(
                s.claim_fire("s", expected_next=at, next_fire_at=at + 1, active=True)
                for s in [first, second] * 10
            )
        )
        assert sum(wins) == 1


async def test_two_instances_see_each_others_writes(db_backend: Backend) -> None:
    first, second = db_backend.store(), db_backend.store()
    await first.create_session("s", agent="helper", title="t")
    await second.append_events("s", _events("r", (1, 2)))
    assert [e.seq for e in await first.read_events("r")] == [1, 2]
    assert (await second.get_session("s")) == (await first.get_session("s"))
