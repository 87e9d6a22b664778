"""Run records (``/api/runs``, ``/api/runs/history``), the stale-record sweep, and the
lifecycle bus as the supervisor feeds it and as ``/api/events`` serves it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from lovia.exceptions import ProviderError, StoreError
from lovia.testing import text
from lovia.web import ChatStore, SQLiteChatStore
from lovia.web.lifecycle import LifecycleBus, LifecycleEvent
from lovia.web.store.base import RunRecord

from ..conftest import gated_agent, read_frames, scripted_agent


async def _chat(client: Any, message: str, **body: Any) -> list[Any]:
    async with client.stream(
        "POST", "/api/chat/stream", json={"message": message, **body}
    ) as stream:
        assert stream.status_code == 200
        return [f async for f in read_frames(stream)]


async def _next(sub: Any) -> LifecycleEvent:
    event: LifecycleEvent = await asyncio.wait_for(anext(sub), 10)
    return event


async def test_each_run_leaves_a_record_with_status_duration_and_usage(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent(text("hi"), ProviderError("the model is down", retryable=False)))
    client = await asgi_client(app)
    ok = await _chat(client, "hello")
    sid = ok[0].data["session_id"]
    failed = await _chat(client, "again", session_id=sid)
    assert failed[-1].data["status"] == "failed"
    runs = (await client.get("/api/runs/history")).json()["runs"]
    assert [r["status"] for r in runs] == ["failed", "completed"]  # newest first
    done, fail = runs[1], runs[0]
    assert done["run_id"] == ok[0].data["run_id"] and done["session_id"] == sid
    assert done["source"] == "chat" and done["agent"] == "helper" and done["error"] is None
    assert done["duration"] is not None and 0 <= done["duration"] < 60
    assert set(done["usage"]) >= {"input_tokens", "output_tokens", "total_tokens"}
    assert "the model is down" in fail["error"] and fail["ended_at"] >= fail["started_at"]


async def test_a_cancelled_run_is_recorded_and_live_runs_are_listed(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("never"))
    app = make_app(agent)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    started = await supervisor.start("park")
    await gate.entered.wait()
    live = (await client.get("/api/runs")).json()["runs"]
    assert [(r["run_id"], r["status"], r["source"]) for r in live] == [
        (started.run.run_id, "running", "chat")
    ]
    assert live[0]["started_at"] <= time.time() and live[0]["duration"] is None
    await client.post("/api/chat/cancel", params={"session_id": started.run.session_id})
    [r async for r in supervisor.follow(started.run.run_id)]
    assert (await client.get("/api/runs")).json() == {"runs": []}
    [record] = (await client.get("/api/runs/history")).json()["runs"]
    assert record["status"] == "cancelled" and "RunCancelled" in record["error"]


async def test_history_filters_and_pages(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent(text("a"), text("b"), text("c")))
    client = await asgi_client(app)
    first = await _chat(client, "one")
    sid = first[0].data["session_id"]
    await _chat(client, "two", session_id=sid)
    other = await _chat(client, "three")
    history = "/api/runs/history"
    mine = (await client.get(history, params={"session_id": sid})).json()["runs"]
    assert len(mine) == 2 and {r["session_id"] for r in mine} == {sid}
    page = (await client.get(history, params={"limit": 1, "offset": 1})).json()
    assert page["limit"] == 1 and len(page["runs"]) == 1
    assert page["runs"][0]["run_id"] == mine[0]["run_id"]  # the second newest
    newest = (await client.get(history, params={"limit": 1})).json()["runs"]
    assert newest[0]["run_id"] == other[0].data["run_id"]
    assert (await client.get(history, params={"since": time.time() + 60})).json()["runs"] == []
    assert len((await client.get(history, params={"source": "chat"})).json()["runs"]) == 3
    assert (await client.get(history, params={"source": "schedule"})).json()["runs"] == []
    for bad in (
        {"source": "bogus"},
        {"limit": 0},
        {"offset": -1},
        {"offset": "9" * 30},
        {"since": "nan"},
        {"since": "inf"},
        {"session_id": "../x"},
    ):
        r = await client.get(history, params=bad)
        assert r.status_code == 422 and next(iter(bad)) in r.json()["detail"]
    await client.delete(f"/api/sessions/{sid}")  # a deleted chat takes its records along
    assert len((await client.get(history)).json()["runs"]) == 1


async def test_stale_running_records_are_swept_at_startup(
    make_app: Any, asgi_client: Any, tmp_path: Path
) -> None:
    store = ChatStore.sqlite(str(tmp_path / "chat.db"))
    await store.create_session("s1", agent="helper", title="t")
    await store.record_run_started(
        RunRecord("r1", "s1", "helper", "chat", "running", time.time() - 5, None, None, None)
    )
    await store.aclose()
    client = await asgi_client(make_app(scripted_agent()))
    [record] = (await client.get("/api/runs/history")).json()["runs"]
    assert record["run_id"] == "r1" and record["status"] == "interrupted"


async def test_a_run_interrupted_by_shutdown_is_recorded_and_its_resume_too(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("never"))
    app = make_app(agent)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    started = await app.state.lovia.supervisor.start("park")
    await gate.entered.wait()
    await lifespan.__aexit__(None, None, None)
    restarted_gate, restarted_agent = gated_agent(text("resumed"))
    restarted_gate.open()
    restarted = make_app(restarted_agent)
    client = await asgi_client(restarted)
    history = (await client.get("/api/runs/history")).json()["runs"]
    assert [(r["run_id"], r["status"]) for r in history] == [(started.run.run_id, "interrupted")]
    supervisor = restarted.state.lovia.supervisor
    run = await supervisor.resume(started.run.session_id)
    assert run is not None and run.run_id == started.run.run_id
    [r async for r in supervisor.follow(run.run_id)]
    history = (await client.get("/api/runs/history")).json()["runs"]
    assert [(r["run_id"], r["status"], r["source"]) for r in history] == [
        (started.run.run_id, "completed", "resume")
    ]


async def test_the_bus_hears_a_new_chat_its_runs_and_a_rename(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent(text("a"), text("b")))
    client = await asgi_client(app)
    bus: LifecycleBus = app.state.lovia.lifecycle.bus
    sub = bus.subscribe()
    first = await _chat(client, "hello there")
    sid, run_id = first[0].data["session_id"], first[0].data["run_id"]
    created, started, finished = await _next(sub), await _next(sub), await _next(sub)
    assert (created.kind, created.data) == (
        "session_created",
        {"session_id": sid, "agent": "helper", "title": "hello there"},
    )
    assert started.kind == "run_started" and started.data["run_id"] == run_id
    assert finished.kind == "run_finished" and finished.data["status"] == "completed"
    assert finished.data["duration"] >= 0 and created.seq < started.seq < finished.seq
    await _chat(client, "more", session_id=sid)
    assert [(await _next(sub)).kind for _ in range(2)] == ["run_started", "run_finished"]
    await client.patch(f"/api/sessions/{sid}", json={"title": "Renamed"})
    renamed = await _next(sub)
    assert (renamed.kind, renamed.data) == (
        "session_retitled",
        {"session_id": sid, "title": "Renamed"},
    )


async def _wait_for(predicate: Any, what: str) -> None:
    # A real server's connection handling runs on its own schedule: poll, bounded.
    deadline = asyncio.get_running_loop().time() + 10
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


async def test_api_events_streams_over_a_real_server_and_a_disconnect_unsubscribes(
    make_app: Any, serve: Any
) -> None:
    app = make_app(scripted_agent(text("hi")))
    server = await serve(app)
    bus: LifecycleBus = app.state.lovia.lifecycle.bus
    async with server.client.stream("GET", "/api/events") as events:
        assert events.status_code == 200
        assert events.headers["content-type"].startswith("text/event-stream")
        lines = events.aiter_lines()
        assert (await anext(lines)).startswith(": subscribed after seq 0")
        assert bus.subscribers == 1
        await _chat(server.client, "over the wire")
        kinds, fields = [], {}
        async for line in lines:  # one field per line; a blank line ends a frame
            if line.startswith(":"):
                continue  # a comment (the subscription note, a keep-alive)
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            if not fields:
                continue
            kinds.append((fields["event"], fields["id"]))
            assert json.loads(fields["data"])["seq"] == int(fields["id"])
            if fields["event"] == "run_finished":
                break
            fields = {}
    assert kinds == [("session_created", "1"), ("run_started", "2"), ("run_finished", "3")]
    await _wait_for(lambda: bus.subscribers == 0, "the disconnected client stays subscribed")


async def test_many_event_clients_disconnecting_leak_nothing(make_app: Any, serve: Any) -> None:
    app = make_app(scripted_agent())
    server = await serve(app)
    bus: LifecycleBus = app.state.lovia.lifecycle.bus

    async def connect_and_leave() -> None:
        async with server.client.stream("GET", "/api/events") as events:
            assert (await anext(events.aiter_lines())).startswith(": subscribed")

    await asyncio.gather(*(connect_and_leave() for _ in range(30)))
    await _wait_for(lambda: bus.subscribers == 0, "disconnected clients stay subscribed")
    bus.publish("config_changed", {"section": "model"})  # nobody left: nothing to deliver


class BrokenRecordsStore(SQLiteChatStore):
    """A store whose run-record writes fail."""

    async def record_run_started(self, record: RunRecord) -> None:
        raise StoreError("disk full")

    async def record_run_finished(self, run_id: str, **kwargs: Any) -> None:
        raise StoreError("disk full")


async def test_failing_run_record_writes_never_fail_the_run(
    make_app: Any, asgi_client: Any, tmp_path: Path
) -> None:
    app = make_app(
        scripted_agent(text("still fine")), store=BrokenRecordsStore(str(tmp_path / "b.db"))
    )
    client = await asgi_client(app)
    sub = app.state.lovia.lifecycle.bus.subscribe()
    frames = await _chat(client, "hello")
    assert frames[-1].event == "done" and frames[-1].data["status"] == "completed"
    kinds = [(await _next(sub)).kind for _ in range(3)]
    assert kinds == ["session_created", "run_started", "run_finished"]
    assert (await client.get("/api/runs/history")).json()["runs"] == []
