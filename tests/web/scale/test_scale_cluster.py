"""``Cluster`` in one process: two supervisors on one PostgreSQL schema, and an engine that
only records what it is given (the test hands each run to a worker itself). No broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from lovia import Agent
from lovia.session import read_segments
from lovia.testing import ScriptedProvider, text
from lovia.web.errors import RunConflict
from lovia.web.eventlog import EventRecord
from lovia.web.lifecycle import LifecycleBus, RunLifecycle
from lovia.web.scale import Cluster, RunRejected
from lovia.web.store.postgres import PostgresChatStore
from lovia.web.supervisor import RunSupervisor

from .conftest import poll


@dataclass
class RecordingEngine:
    """Stands in for ``RunEngine``: keeps what is dispatched; never consumes."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    concurrency: int = 8
    dies: bool = False
    """Whether a dispatch ends its task as a dying worker would (nothing caught, no publish)."""

    async def dispatch(self, payload: dict[str, Any]) -> None:
        if self.dies:
            raise asyncio.CancelledError
        self.sent.append(payload)

    async def start(self, handler: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        return None

    async def aclose(self) -> None:
        return None


@dataclass
class Node:
    store: PostgresChatStore
    supervisor: RunSupervisor
    cluster: Cluster
    engine: RecordingEngine
    bus: LifecycleBus


@pytest.fixture
async def nodes(pg_dsn: str, pg_schema: str) -> AsyncIterator[tuple[Node, Node]]:
    made: list[Node] = []
    for _ in range(2):
        store = PostgresChatStore(f"{pg_dsn}?schema={pg_schema}", max_connections=2)
        agent = Agent(name="helper", model=ScriptedProvider([text("hello there")] * 4))
        bus = LifecycleBus()
        supervisor = RunSupervisor({"helper": agent}, store, lifecycle=RunLifecycle(store, bus))
        engine = RecordingEngine()
        cluster = Cluster(store, cast(Any, engine), command_timeout=2.0, poll=0.2)
        cluster.attach(supervisor, bus)
        made.append(Node(store, supervisor, cluster, engine, bus))
    for node in made:
        await node.cluster.start()
    try:
        yield made[0], made[1]
    finally:
        for node in made:
            await node.supervisor.aclose()
            await node.cluster.aclose()
            await node.store.aclose()


async def _collect(records: AsyncIterator[EventRecord]) -> list[EventRecord]:
    return [record async for record in records]


async def test_a_run_started_on_one_worker_runs_on_another_and_streams_back(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    started = await a.supervisor.start("hi")
    run = started.run
    assert not started.attached and a.supervisor.live(run.session_id) is None
    (payload,) = a.engine.sent  # handed to the engine, not run here
    assert (payload["run_id"], payload["session_id"]) == (run.run_id, run.session_id)
    with pytest.raises(RunConflict):  # the chat is claimed across workers
        await b.supervisor.start("again", session_id=run.session_id, attach=False)

    watched = asyncio.create_task(_collect(a.supervisor.follow(run.run_id)))
    relayed = a.bus.subscribe()
    await b.cluster.execute(payload)  # what B's consumer does with the delivery
    records = await asyncio.wait_for(watched, 10)
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert records[-1].type == "done" and records[-1].data["status"] == "completed"
    meta = await a.store.get_session(run.session_id)
    assert meta is not None and meta.active_run_id is None

    # B's run_finished reaches A's bus (relayed through PostgreSQL).
    async def next_kind() -> str:
        return (await relayed.__anext__()).kind

    kinds = [await asyncio.wait_for(next_kind(), 5) for _ in range(2)]
    assert kinds == ["run_started", "run_finished"]

    # A second delivery of a finished run finds its chat pointing elsewhere: dropped.
    await b.cluster.execute(payload)
    assert b.supervisor.live(run.session_id) is None
    assert len(await a.store.read_events(run.run_id)) == len(records)


async def test_commands_without_a_run_answer_at_once(nodes: tuple[Node, Node]) -> None:
    a, _ = nodes
    started = await a.supervisor.start("hi")
    sid = started.run.session_id
    # Claimed but taken by no worker: nobody answers, within the command timeout.
    began = time.monotonic()
    assert await a.cluster.call(sid, "cancel") is None
    assert time.monotonic() - began >= 1.5
    cleared = await a.supervisor.clear_stranded(sid)
    assert cleared == started.run.run_id
    # No run at all: no need to wait for silence.
    began = time.monotonic()
    assert await a.cluster.call(sid, "cancel") is None
    assert time.monotonic() - began < 1.0
    # The dropped delivery: its chat no longer points at it.
    (payload,) = a.engine.sent
    await a.cluster.execute(payload)
    assert a.supervisor.live(sid) is None


async def test_a_tail_ends_once_no_chat_points_at_its_run(nodes: tuple[Node, Node]) -> None:
    a, b = nodes
    started = await a.supervisor.start("hi")
    tail = asyncio.create_task(_collect(b.supervisor.follow(started.run.run_id)))
    await a.supervisor.clear_stranded(started.run.session_id)  # cancelled before it ran
    assert await asyncio.wait_for(tail, 5) == []


async def test_the_sweep_spares_records_a_chat_points_at(nodes: tuple[Node, Node]) -> None:
    from lovia.web.store.base import RunRecord

    a, _ = nodes
    started = await a.supervisor.start("hi")
    now = time.time()
    for run_id, session_id in ((started.run.run_id, started.run.session_id), ("f" * 32, "gone")):
        await a.store.record_run_started(
            RunRecord(run_id, session_id, "helper", "chat", "running", now, None, None, None)
        )
    assert await a.cluster.sweep_stale_runs() == 1
    statuses = {r.run_id: r.status for r in await a.store.list_runs(limit=10)}
    assert statuses == {started.run.run_id: "running", "f" * 32: "interrupted"}


async def test_a_run_claimed_by_a_worker_that_died_is_published_again(
    nodes: tuple[Node, Node], pg_dsn: str, pg_schema: str
) -> None:
    a, b = nodes
    a.engine.dies = True
    with pytest.raises(asyncio.CancelledError):
        await a.supervisor.start("hi", session_id="orphaned")
    meta = await a.store.get_session("orphaned")
    assert meta is not None and meta.active_run_id is not None  # claimed, never published
    run_id = meta.active_run_id
    assert await b.cluster.heal() == 0  # too young: it may be on its way to the broker

    # A worker starting up publishes it again (once: the others find it healed).
    store = PostgresChatStore(f"{pg_dsn}?schema={pg_schema}", max_connections=2)
    agent = Agent(name="helper", model=ScriptedProvider([text("hello there")]))
    supervisor = RunSupervisor({"helper": agent}, store)
    engine = RecordingEngine()
    cluster = Cluster(store, cast(Any, engine), command_timeout=2.0, poll=0.2, heal_after=0.0)
    cluster.attach(supervisor)
    try:
        await cluster.start()
        (healed,) = engine.sent
        assert (healed["run_id"], healed["attempt"]) == (run_id, 1)
        assert await b.cluster.heal() == 0  # just published: not again
        # The copy from before the heal is stale: dropped; the healed one runs.
        await b.cluster.execute({**healed, "attempt": 0})
        assert b.supervisor.live("orphaned") is None
        watched = asyncio.create_task(_collect(a.supervisor.follow(run_id)))
        await b.cluster.execute(healed)
        records = await asyncio.wait_for(watched, 10)
        assert records[-1].type == "done" and records[-1].data["status"] == "completed"
    finally:
        await supervisor.aclose()
        await cluster.aclose()
        await store.aclose()
    b.cluster.heal_after = 0.0
    assert await b.cluster.heal() == 0  # the chat points at no run any more


class GatedModel(ScriptedProvider):
    """Replies once ``gate`` is set; ``entered`` tells that a model call began."""

    def __init__(self) -> None:
        super().__init__([text("late hello")])
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def stream(self, entries: Any, **options: Any) -> AsyncIterator[Any]:
        self.entered.set()
        await self.gate.wait()
        async for delta in super().stream(entries, **options):
            yield delta


async def test_a_cancel_that_heard_no_worker_leaves_a_run_taken_meanwhile_alone(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    model = GatedModel()
    b.supervisor.agents["helper"] = Agent(name="helper", model=model)
    started = await a.supervisor.start("hi")
    sid, run_id = started.run.session_id, started.run.run_id
    (payload,) = a.engine.sent
    # The cancel's broadcast went unanswered (the run was between workers); B takes the run
    # before the cancel clears the chat's pointer.
    running = asyncio.create_task(b.cluster.execute(payload))
    await asyncio.wait_for(model.entered.wait(), 10)
    with pytest.raises(RunConflict):
        await a.supervisor.clear_stranded(sid)
    meta = await a.store.get_session(sid)
    assert meta is not None and meta.active_run_id == run_id  # still the live run's chat
    # Asked again, the worker holding it answers and cancels it.
    assert await a.cluster.call(sid, "cancel") == {"run_id": run_id}
    model.gate.set()  # the run sees its cancel at the model call's end
    await asyncio.wait_for(running, 10)
    records = await a.store.read_events(run_id)
    # It ended once (cancelled, or completed if its only model call beat the cancel), and its
    # turns joined the chat once: nothing kept them behind its back.
    assert [r.type for r in records].count("done") == 1
    assert records[-1].data["status"] in ("cancelled", "completed")
    segments = await read_segments(a.store.session, sid)
    assert [s.run_id for s in segments] == [run_id]


async def test_a_run_finished_with_a_long_error_reaches_the_other_workers(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    relayed = b.bus.subscribe()
    # far over NOTIFY's 8000 bytes, and longer still as JSON (non-ASCII is escaped)
    error = "ProviderError: " + "the upstream said no. \u00e9\u00e8 " * 1000
    data = {"run_id": "r" * 32, "session_id": "s1", "status": "failed", "error": error}
    a.bus.publish("run_finished", data)
    event = await asyncio.wait_for(relayed.__anext__(), 5)
    assert (event.kind, event.data["run_id"], event.data["status"]) == (
        "run_finished",
        "r" * 32,
        "failed",
    )
    assert event.data["error"].startswith("ProviderError: the upstream said no.")
    assert len(event.data["error"]) < len(error)


async def test_a_message_whose_run_ended_while_it_asked_starts_the_next_run(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    started = await a.supervisor.start("hi")
    sid = started.run.session_id
    # B asks the worker holding the run to take the message; nobody answers, and meanwhile
    # the run ends (here: it is cleared before any worker took it).
    asked = asyncio.create_task(b.supervisor.start("one more", session_id=sid))
    await poll(lambda: b.cluster._replies, "B's ask to go out", 5)  # before the run ends
    assert await a.supervisor.clear_stranded(sid) == started.run.run_id
    second = await asyncio.wait_for(asked, 10)
    assert not second.attached and second.run.run_id != started.run.run_id
    (payload,) = b.engine.sent
    assert payload["input"][0]["content"] == "one more"  # the message was not lost


async def test_a_published_run_waiting_in_the_queue_is_not_published_again(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    started = await a.supervisor.start("hi")  # in the queue, no worker free to take it
    b.cluster.heal_after = 0.0
    # Re-attaching, or waiting on it, must not send it to the back of the queue again.
    await b.supervisor.resume(started.run.session_id)
    assert await b.cluster.heal() == 0
    assert b.engine.sent == [] and len(a.engine.sent) == 1


async def test_deleting_a_chat_whose_run_no_worker_holds_waits_only_for_silence(
    nodes: tuple[Node, Node],
) -> None:
    a, _ = nodes
    started = await a.supervisor.start("hi")  # queued: no worker holds it
    began = time.monotonic()
    await a.supervisor.stop(started.run.session_id)  # what a delete does first
    assert time.monotonic() - began < a.cluster.command_timeout + 1.5


async def test_a_worker_whose_lock_connection_dropped_still_takes_runs(
    nodes: tuple[Node, Node], pg_dsn: str
) -> None:
    import psycopg

    a, b = nodes
    assert b.cluster._locks is not None
    pid = b.cluster._locks.info.backend_pid
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))  # a PostgreSQL blip
    started = await a.supervisor.start("hi")
    (payload,) = a.engine.sent
    watched = asyncio.create_task(_collect(a.supervisor.follow(started.run.run_id)))
    with pytest.raises(RunRejected):  # this delivery goes back to the broker ...
        await b.cluster.execute(payload)
    await b.cluster.execute(payload)  # ... and the next one runs, on a fresh connection
    records = await asyncio.wait_for(watched, 10)
    assert records[-1].type == "done" and records[-1].data["status"] == "completed"


async def test_a_worker_whose_query_connection_dropped_still_starts_runs(
    nodes: tuple[Node, Node], pg_dsn: str
) -> None:
    import psycopg

    a, _ = nodes
    assert a.cluster._conn is not None
    pid = a.cluster._conn.info.backend_pid
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))  # a PostgreSQL blip
    with pytest.raises(psycopg.OperationalError):  # the request that found it broken
        await a.supervisor.start("hi")
    started = await a.supervisor.start("hi")  # the next one, on a fresh connection
    assert [p["run_id"] for p in a.engine.sent] == [started.run.run_id]


async def test_a_reconnect_before_the_first_checkpoint_shows_the_runs_input(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    started = await a.supervisor.start("what is new?")  # queued: no checkpoint yet
    snapshot = await b.supervisor.snapshot(started.run.session_id)
    assert snapshot.run is not None and snapshot.run.run_id == started.run.run_id
    assert [e.get("content") for e in snapshot.entries] == ["what is new?"]


async def test_a_remote_watcher_gets_the_done_logged_just_after_the_chat_was_freed(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    started = await a.supervisor.start("hi")
    sid, run_id = started.run.session_id, started.run.run_id
    freed_seen = asyncio.Event()
    pointed_at = b.cluster._run_pointed_at

    async def spy(run: str) -> bool:
        found = await pointed_at(run)
        if not found:
            freed_seen.set()
        return found

    b.cluster._run_pointed_at = spy  # type: ignore[method-assign,assignment]
    watched = asyncio.create_task(_collect(b.supervisor.follow(run_id)))
    # A finishing run frees its chat first, then logs its done (so a client that saw done
    # can start the next run): a watcher that looks in between must not stop there.
    await a.store.set_active_run(sid, None, expected=run_id)
    await asyncio.wait_for(freed_seen.wait(), 5)
    await a.store.append_events(sid, [EventRecord(run_id, 1, "done", {"status": "completed"})])
    records = await asyncio.wait_for(watched, 10)
    assert [r.type for r in records] == ["done"]


async def test_a_schedules_fire_still_queued_counts_as_running(nodes: tuple[Node, Node]) -> None:
    from types import SimpleNamespace

    from lovia.web.scheduling import Scheduler

    a, b = nodes
    started = await a.supervisor.start("fired")  # queued: no worker took it, no run record
    scheduler = Scheduler(b.store, b.supervisor)
    previous = cast(Any, SimpleNamespace(last_session_id=started.run.session_id))
    assert await scheduler._fire_live(previous)  # the next fire is skipped, not overlapped
    await a.supervisor.clear_stranded(started.run.session_id)
    assert not await scheduler._fire_live(previous)


async def test_a_message_to_a_chat_whose_run_was_lost_publishes_it_again(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    a.engine.dies = True
    with pytest.raises(asyncio.CancelledError):
        await a.supervisor.start("hi", session_id="lost-run")
    b.cluster.heal_after = 0.0
    with pytest.raises(RunConflict):  # no worker holds it: the sender is told to retry ...
        await b.supervisor.start("anyone there?", session_id="lost-run")
    (healed,) = b.engine.sent  # ... and the lost run is on its way to a worker again
    assert healed["session_id"] == "lost-run" and healed["attempt"] == 1


async def test_a_long_answer_from_the_worker_holding_the_run_still_arrives(
    nodes: tuple[Node, Node],
) -> None:
    a, b = nodes
    model = GatedModel()
    b.supervisor.agents["helper"] = Agent(name="helper", model=model)
    started = await a.supervisor.start("hi")
    (payload,) = a.engine.sent
    running = asyncio.create_task(b.cluster.execute(payload))
    await asyncio.wait_for(model.entered.wait(), 10)
    # An answered ask_human question comes back with its text: it may be long.
    question = "Which of these should I deploy? " + "a very long option list. " * 600

    def answered(*args: Any) -> dict[str, Any]:
        return {"answered": True, "question_id": "q1", "question": question}

    b.cluster._command = answered  # type: ignore[method-assign,assignment]
    began = time.monotonic()
    reply = await a.cluster.call(started.run.session_id, "answer", answer="the first")
    assert time.monotonic() - began < a.cluster.command_timeout  # answered, not silence
    assert reply is not None and reply["answered"] is True and reply["question_id"] == "q1"
    assert question.startswith(reply["question"].removesuffix(" ..."))
    model.gate.set()
    await asyncio.wait_for(running, 10)
