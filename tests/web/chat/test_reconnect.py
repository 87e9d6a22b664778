"""``POST /api/chat/reconnect``: a snapshot of the completed turns, then the in-flight run."""

from __future__ import annotations

from typing import Any

from lovia.testing import call, text
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web import RunSupervisor

from ..conftest import Gate, chat, deploy, gated_agent, read_frames, scripted_agent, until
from .conftest import post_stream


def _reconnect(sid: str) -> dict[str, Any]:
    return {"params": {"session_id": sid}}


async def test_reconnect_mid_run_shows_history_once_then_replays_and_follows(
    make_app: Any, serve: Any
) -> None:
    gate = Gate()
    agent = scripted_agent(
        text("first answer"), call("wait_gate"), text("second answer"), tools=[gate.tool]
    )
    server = await serve(make_app(agent))
    async with chat(server.client, "one") as (session, frames):
        await until(frames, "done")
    sid = session.data["session_id"]
    async with chat(server.client, "two", session_id=sid) as (second, frames):
        before = await until(frames, "tool_call")
    await gate.entered.wait()
    async with server.client.stream("POST", "/api/chat/reconnect", **_reconnect(sid)) as r:
        assert r.status_code == 200
        stream = read_frames(r)
        opened, snapshot = await anext(stream), await anext(stream)
        replay = await until(stream, "tool_call")
        gate.open()
        rest = await until(stream, "done")
    assert opened.event == "session" and opened.data["run_id"] == second.data["run_id"]
    assert snapshot.event == "snapshot" and snapshot.id is None
    entries = snapshot.data["entries"]
    assert [(e["type"], e.get("content")) for e in entries] == [
        ("input", "one"),
        ("assistant_text", "first answer"),
        ("input", "two"),  # the live run's message, shown once: not in its events
    ]
    assert snapshot.data["run_id"] == second.data["run_id"]
    # The in-flight run from its first event, the same frames its own stream carried.
    assert [(f.event, f.id, f.data) for f in replay] == [(f.event, f.id, f.data) for f in before]
    ids = [int(f.id or "") for f in replay + rest]
    assert ids == list(range(1, len(ids) + 1))
    assert rest[-1].data["output"] == "second answer"
    assert all(f.event != "user_injected" for f in replay + rest)


async def test_reconnect_during_an_approval_replays_the_pending_request(
    make_app: Any, serve: Any
) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("shipped"), tools=[deploy])
    server = await serve(make_app(agent))
    async with chat(server.client, "ship") as (session, frames):
        asked = (await until(frames, "approval_required"))[-1]
    sid = session.data["session_id"]
    async with server.client.stream("POST", "/api/chat/reconnect", **_reconnect(sid)) as r:
        stream = read_frames(r)
        _, snapshot = await anext(stream), await anext(stream)
        replayed = (await until(stream, "approval_required"))[-1]
        assert snapshot.data["pending_approvals"] == [asked.data["call_id"]]
        assert (replayed.id, replayed.data) == (asked.id, asked.data)
        body = {"session_id": sid, "call_id": asked.data["call_id"], "decision": "approve"}
        assert (await server.client.post("/api/chat/approve", json=body)).status_code == 200
        rest = await until(stream, "done")
    assert next(f for f in rest if f.event == "tool_result").data["output"] == "deployed to prod"


async def test_reconnect_with_no_run_sends_the_snapshot_and_ends(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app(scripted_agent(text("hi there"))))
    sid = (await client.post("/api/chat", json={"message": "hello"})).json()["session_id"]
    frames = await post_stream(client, "/api/chat/reconnect", until=None, **_reconnect(sid))
    assert [f.event for f in frames] == ["session", "snapshot"]
    assert frames[0].data == {"session_id": sid, "run_id": None, "attached": True}
    assert [e["content"] for e in frames[1].data["entries"]] == ["hello", "hi there"]
    assert frames[1].data["pending_question"] is None
    r = await client.post("/api/chat/reconnect", params={"session_id": "unknown"})
    assert r.status_code == 404
    r = await client.post("/api/chat/reconnect", params={"session_id": "../x"})
    assert r.status_code == 422


async def test_reconnect_after_a_restart_resumes_the_interrupted_run(
    make_app: Any, serve: Any
) -> None:
    gate, agent = gated_agent(text("back again"))
    first = await serve(make_app(agent))
    async with chat(first.client, "long job") as (session, frames):
        await until(frames, "tool_call")
    await gate.entered.wait()
    await first.stop()
    gate.open()
    second = await serve(make_app(agent))
    sid = session.data["session_id"]
    got = await post_stream(second.client, "/api/chat/reconnect", **_reconnect(sid))
    assert got[0].data["run_id"] == session.data["run_id"]
    assert [(e["type"], e["content"]) for e in got[1].data["entries"]] == [
        ("input", "long job")  # read back from the checkpoint, once
    ]
    ids = [int(f.id or "") for f in got[2:]]
    assert ids == list(range(1, len(ids) + 1))  # the whole run, across the restart
    assert got[-1].data["output"] == "back again"
    detail = (await second.client.get(f"/api/sessions/{sid}")).json()
    assert [e["type"] for e in detail["entries"]].count("input") == 1


async def test_the_snapshot_leaves_out_the_live_runs_own_stored_segment(store: Any) -> None:
    # The window between the core storing a finished run's segment and the supervisor
    # releasing it: the segment must not be shown twice (snapshot and replayed events).
    gate, agent = gated_agent(text("done"))
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("go")
    await gate.entered.wait()
    sid, run_id = started.run.session_id, started.run.run_id
    await store.session.append(sid, [InputEntry("user", "earlier")], run_id="older")
    await store.session.append(
        sid, [InputEntry("user", "go"), AssistantTextEntry("done")], run_id=run_id
    )
    snapshot = await supervisor.snapshot(sid)
    assert snapshot.run is started.run
    assert [e["content"] for e in snapshot.entries] == ["earlier", "go"]
    await supervisor.aclose()
