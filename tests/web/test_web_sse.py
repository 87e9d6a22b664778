"""The chat stream over a real uvicorn and a real streaming client."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia.testing import call, text

from .conftest import Frame, chat, deploy, gated_agent, read_frames, resume, scripted_agent, until


def _events(frames: list[Frame]) -> list[str]:
    return [f.event for f in frames]


async def test_send_and_stream_a_reply(make_app: Any, serve: Any) -> None:
    server = await serve(make_app(scripted_agent(text("Hi ünï"))))
    async with chat(server.client, "hello") as (session, frames):
        rest = await until(frames, "done")
    # ``context``: the inspector's record of the model call, sent empty (its id counts).
    deltas = ["text_delta"] * 6
    assert _events(rest) == ["turn_started", *deltas, "context", "message_completed", "done"]
    assert next(f for f in rest if f.event == "context").data == {}
    assert "".join(f.data["delta"] for f in rest if f.event == "text_delta") == "Hi ünï"
    assert [f.id for f in [session, *rest]] == [str(i) for i in range(len(rest) + 1)]
    assert rest[-1].data["status"] == "completed" and rest[-1].data["output"] == "Hi ünï"
    info = (await server.client.get(f"/api/sessions/{session.data['session_id']}")).json()
    assert info["title"] == "hello"
    assert info["active_run_id"] is None and info["live"] is False


async def test_a_client_that_disconnects_leaves_the_run_to_finish_headless(
    make_app: Any, serve: Any
) -> None:
    gate, agent = gated_agent(text("finished alone"))
    server = await serve(make_app(agent))
    async with chat(server.client, "go") as (session, frames):
        await until(frames, "tool_call")
    # The client is gone; the run is still the session's and completes once the gate opens.
    session_id = session.data["session_id"]
    await gate.entered.wait()
    info = (await server.client.get(f"/api/sessions/{session_id}")).json()
    assert info["live"] is True and info["active_run_id"] == session.data["run_id"]
    gate.open()
    replay = await resume(server.client, session_id)
    assert replay[-1].data == {
        "status": "completed",
        "output": "finished alone",
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
    }
    info = (await server.client.get(f"/api/sessions/{session_id}")).json()
    assert info["live"] is False and info["active_run_id"] is None


async def test_two_clients_watch_one_run_and_see_the_same_frames(make_app: Any, serve: Any) -> None:
    gate, agent = gated_agent(text("shared"))
    server = await serve(make_app(agent))
    async with chat(server.client, "go") as (session, frames):
        params = {"session_id": session.data["session_id"]}
        async with server.client.stream("GET", "/api/chat/stream", params=params) as r:
            watcher = read_frames(r)
            attached = await anext(watcher)
            # Both are connected and caught up while the run is parked: the rest is live.
            first, second = await until(frames, "tool_call"), await until(watcher, "tool_call")
            gate.open()
            first += await until(frames, "done")
            second += await until(watcher, "done")
    assert attached.data == {**session.data, "attached": True}
    assert [(f.event, f.id, f.data) for f in first] == [(f.event, f.id, f.data) for f in second]


async def test_reconnect_with_last_event_id_gets_exactly_the_remaining_events(
    make_app: Any, serve: Any
) -> None:
    gate, agent = gated_agent(text("the rest"))
    server = await serve(make_app(agent))
    async with chat(server.client, "go") as (session, frames):
        before = await until(frames, "tool_call")
    await gate.entered.wait()
    session_id, last_id = session.data["session_id"], before[-1].id
    assert last_id is not None
    gate.open()  # events keep coming while nobody watches
    after = await resume(server.client, session_id, headers={"Last-Event-ID": last_id})
    assert after[0].event == "session" and after[0].id == last_id
    ids = [int(f.id or "") for f in before + after[1:]]
    assert ids == list(range(1, len(ids) + 1))  # no gap, no duplicate
    assert _events(after[1:])[:2] == ["tool_result", "turn_started"]
    # The query parameter does the same (for clients that cannot set headers).
    again = await resume(server.client, session_id, last_event_id=last_id)
    assert [(f.id, f.data) for f in again[1:]] == [(f.id, f.data) for f in after[1:]]


async def test_an_approval_answered_over_http_lets_the_call_run(make_app: Any, serve: Any) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("shipped"), tools=[deploy])
    server = await serve(make_app(agent))
    async with chat(server.client, "ship") as (session, frames):
        asked = (await until(frames, "approval_required"))[-1]
        answer_body = {"session_id": session.data["session_id"], "call_id": asked.data["call_id"]}
        answer = await server.client.post(
            "/api/chat/approve", json={**answer_body, "decision": "approve"}
        )
        assert answer.status_code == 200, answer.text
        rest = await until(frames, "done")
    result = next(f for f in rest if f.event == "tool_result")
    assert result.data["output"] == "deployed to prod" and result.data["is_error"] is False
    assert rest[-1].data["output"] == "shipped"
    again = await server.client.post(
        "/api/chat/approve",
        json={
            "session_id": session.data["session_id"],
            "call_id": "call_deploy",
            "decision": "deny",
        },
    )
    assert again.status_code == 404


async def test_an_approval_nobody_answers_is_denied_after_the_timeout(
    make_app: Any, serve: Any
) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("not shipped"), tools=[deploy])
    server = await serve(make_app(agent, approval_timeout=0.05))
    async with chat(server.client, "ship") as (_, frames):
        rest = await until(frames, "done")
    assert "approval_required" in _events(rest)
    result = next(f for f in rest if f.event == "tool_result")
    assert result.data["is_error"] is True
    assert "nobody answered within 0.05 s" in result.data["output"]
    assert rest[-1].data["status"] == "completed"


async def test_cancel_stops_the_live_run(make_app: Any, serve: Any) -> None:
    gate, agent = gated_agent(text("never"))
    server = await serve(make_app(agent))
    async with chat(server.client, "go") as (session, frames):
        await gate.entered.wait()
        session_id = session.data["session_id"]
        answer = await server.client.post("/api/chat/cancel", params={"session_id": session_id})
        assert answer.status_code == 200
        assert answer.json() == {"session_id": session_id, "run_id": session.data["run_id"]}
        rest = await until(frames, "done")  # the gate never opens: the cancel ends the tool
    assert rest[-2].event == "error" and rest[-2].data["type"] == "RunCancelled"
    assert rest[-1].data == {"status": "cancelled"}
    again = await server.client.post("/api/chat/cancel", params={"session_id": session_id})
    assert again.status_code == 404


async def test_a_second_message_attaches_to_the_live_run(make_app: Any, serve: Any) -> None:
    gate, agent = gated_agent(text("both read"))
    server = await serve(make_app(agent))
    async with chat(server.client, "one") as (session, frames):
        await gate.entered.wait()
        session_id = session.data["session_id"]
        async with chat(server.client, "two", session_id=session_id) as (attached, _):
            assert attached.data == {**session.data, "attached": True}
        gate.open()
        rest = await until(frames, "done")
    injected = next(f for f in rest if f.event == "user_injected")
    assert injected.data == {"content": "two", "turn": 2}
    assert rest[-1].data["status"] == "completed"


async def test_runs_of_different_sessions_stream_concurrently(make_app: Any, serve: Any) -> None:
    gate, agent = gated_agent(text("a"), text("b"))
    server = await serve(make_app(agent))

    async def talk(message: str) -> list[Frame]:
        async with chat(server.client, message) as (_, frames):
            return await until(frames, "done")

    first = asyncio.create_task(talk("parked"))
    await gate.entered.wait()
    second = await talk("quick")  # finishes while the first is parked
    gate.open()
    assert second[-1].data["status"] == "completed"
    assert (await first)[-1].data["status"] == "completed"


async def test_after_a_restart_reconnecting_resumes_the_interrupted_run(
    make_app: Any, serve: Any
) -> None:
    gate, agent = gated_agent(text("survived the restart"))
    first = await serve(make_app(agent))
    async with chat(first.client, "go") as (session, frames):
        before = await until(frames, "tool_call")
    await gate.entered.wait()
    await first.stop()  # the lifespan shuts the supervisor down mid-run
    gate.open()
    second = await serve(make_app(agent))  # same database file, a fresh process state
    session_id, last_id = session.data["session_id"], before[-1].id
    assert last_id is not None
    after = await resume(second.client, session_id, headers={"Last-Event-ID": last_id})
    assert after[0].data["run_id"] == session.data["run_id"]
    ids = [int(f.id or "") for f in before + after[1:]]
    assert ids == list(range(1, len(ids) + 1))  # one run, one numbering, across the restart
    assert after[-1].data["output"] == "survived the restart"
    # The call cut off by the shutdown runs again (at least once), so it is announced again.
    assert (after[1].event, after[1].data) == (before[-1].event, before[-1].data)
    assert after[2].event == "tool_result" and after[2].data["output"] == "gate opened"
    info = (await second.client.get(f"/api/sessions/{session_id}")).json()
    assert info["active_run_id"] is None
    assert [e["type"] for e in info["entries"]] == [
        "input",
        "tool_call",
        "tool_result",
        "assistant_text",
    ]
