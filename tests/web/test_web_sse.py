"""The chat stream over a real uvicorn and a real streaming client."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia.testing import call, text

from .conftest import Gate, deploy, frames_until_done, read_frames, scripted_agent


def _events(frames: list[Any]) -> list[str]:
    return [f.event for f in frames]


async def test_send_and_stream_a_reply(make_app: Any, serve: Any) -> None:
    server = await serve(make_app(scripted_agent(text("Hi ünï"))))
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "hello"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        frames = await frames_until_done(r)
    assert _events(frames) == ["session", "turn_started"] + ["text_delta"] * 6 + [
        "message_completed",
        "done",
    ]
    assert "".join(f.data["delta"] for f in frames if f.event == "text_delta") == "Hi ünï"
    assert [f.id for f in frames] == [str(i) for i in range(len(frames))]  # session is id 0
    assert frames[-1].data["status"] == "completed"
    assert frames[-1].data["output"] == "Hi ünï"
    session_id = frames[0].data["session_id"]
    info = (await server.client.get(f"/api/sessions/{session_id}")).json()
    assert info["title"] == "hello"
    assert info["active_run_id"] is None and info["live"] is False


async def test_a_client_that_disconnects_leaves_the_run_to_finish_headless(
    make_app: Any, serve: Any
) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("finished alone"), tools=[gate.tool])
    server = await serve(make_app(agent))
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "go"}) as r:
        frames = read_frames(r)
        session = await anext(frames)
        async for frame in frames:
            if frame.event == "tool_call":
                break
    # The client is gone; the run is still the session's and completes once the gate opens.
    session_id = session.data["session_id"]
    await gate.entered.wait()
    info = (await server.client.get(f"/api/sessions/{session_id}")).json()
    assert info["live"] is True and info["active_run_id"] == session.data["run_id"]
    gate.open()
    async with server.client.stream(
        "GET", "/api/chat/stream", params={"session_id": session_id}
    ) as r:
        replay = await frames_until_done(r)
    assert replay[-1].data == {
        "status": "completed",
        "output": "finished alone",
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
    }
    info = (await server.client.get(f"/api/sessions/{session_id}")).json()
    assert info["live"] is False and info["active_run_id"] is None


async def test_two_clients_watch_one_run_and_see_the_same_frames(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("shared"), tools=[gate.tool])
    server = await serve(make_app(agent))
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "go"}) as first:
        frames = read_frames(first)
        session = await anext(frames)
        await gate.entered.wait()
        async with server.client.stream(
            "GET", "/api/chat/stream", params={"session_id": session.data["session_id"]}
        ) as second:
            gate.open()
            seen_by_second = await frames_until_done(second)
        seen_by_first = [session] + [f async for f in _until_done(frames)]
    strip = [(f.event, f.id, f.data) for f in seen_by_first[1:]]
    assert strip == [(f.event, f.id, f.data) for f in seen_by_second[1:]]
    assert seen_by_second[0].data["attached"] is True


async def _until_done(frames: Any) -> Any:
    async for frame in frames:
        yield frame
        if frame.event == "done":
            return


async def test_reconnect_with_last_event_id_gets_exactly_the_remaining_events(
    make_app: Any, serve: Any
) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("the rest"), tools=[gate.tool])
    server = await serve(make_app(agent))
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "go"}) as r:
        frames = read_frames(r)
        session = await anext(frames)
        before = []
        async for frame in frames:
            before.append(frame)
            if frame.event == "tool_call":
                break
    await gate.entered.wait()
    session_id = session.data["session_id"]
    last_id = before[-1].id
    assert last_id is not None
    gate.open()  # events keep coming while nobody watches
    async with server.client.stream(
        "GET",
        "/api/chat/stream",
        params={"session_id": session_id},
        headers={"Last-Event-ID": last_id},
    ) as r:
        after = await frames_until_done(r)
    assert after[0].event == "session" and after[0].id == last_id
    ids = [int(f.id or "") for f in before + after[1:]]
    assert ids == list(range(1, len(ids) + 1))  # no gap, no duplicate
    assert _events(after[1:])[:2] == ["tool_result", "turn_started"]
    # The query parameter does the same (for clients that cannot set headers).
    async with server.client.stream(
        "GET", "/api/chat/stream", params={"session_id": session_id, "last_event_id": last_id}
    ) as r:
        again = await frames_until_done(r)
    assert [(f.id, f.data) for f in again[1:]] == [(f.id, f.data) for f in after[1:]]


async def test_an_approval_answered_over_http_lets_the_call_run(make_app: Any, serve: Any) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("shipped"), tools=[deploy])
    server = await serve(make_app(agent))
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "ship"}) as r:
        frames = read_frames(r)
        session = await anext(frames)
        seen = []
        async for frame in frames:
            seen.append(frame)
            if frame.event == "approval_required":
                answer = await server.client.post(
                    "/api/chat/approve",
                    json={
                        "session_id": session.data["session_id"],
                        "call_id": frame.data["call_id"],
                        "decision": "approve",
                    },
                )
                assert answer.status_code == 200, answer.text
            if frame.event == "done":
                break
    result = next(f for f in seen if f.event == "tool_result")
    assert result.data["output"] == "deployed to prod" and result.data["is_error"] is False
    assert seen[-1].data["output"] == "shipped"
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
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "ship"}) as r:
        frames = await frames_until_done(r)
    assert "approval_required" in _events(frames)
    result = next(f for f in frames if f.event == "tool_result")
    assert result.data["is_error"] is True
    assert "nobody answered within 0.05 s" in result.data["output"]
    assert frames[-1].data["status"] == "completed"


async def test_cancel_stops_the_live_run(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("never"), tools=[gate.tool])
    server = await serve(make_app(agent))
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "go"}) as r:
        frames = read_frames(r)
        session = await anext(frames)
        await gate.entered.wait()
        session_id = session.data["session_id"]
        answer = await server.client.post("/api/chat/cancel", params={"session_id": session_id})
        assert answer.status_code == 200
        assert answer.json() == {"session_id": session_id, "run_id": session.data["run_id"]}
        gate.open()
        rest = [f async for f in _until_done(frames)]
    assert rest[-2].event == "error" and rest[-2].data["type"] == "RunCancelled"
    assert rest[-1].data == {"status": "cancelled"}
    again = await server.client.post("/api/chat/cancel", params={"session_id": session_id})
    assert again.status_code == 404


async def test_a_second_message_attaches_to_the_live_run(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("both read"), tools=[gate.tool])
    server = await serve(make_app(agent))
    async with server.client.stream("POST", "/api/chat/stream", json={"message": "one"}) as r:
        frames = read_frames(r)
        session = await anext(frames)
        await gate.entered.wait()
        session_id = session.data["session_id"]
        async with server.client.stream(
            "POST", "/api/chat/stream", json={"message": "two", "session_id": session_id}
        ) as second:
            attached = await anext(read_frames(second))
        assert attached.data == {**session.data, "attached": True}
        gate.open()
        rest = [f async for f in _until_done(frames)]
    injected = next(f for f in rest if f.event == "user_injected")
    assert injected.data == {"content": "two", "turn": 2}
    assert rest[-1].data["status"] == "completed"


async def test_runs_of_different_sessions_stream_concurrently(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("a"), text("b"), tools=[gate.tool])
    server = await serve(make_app(agent))

    async def chat(message: str) -> list[Any]:
        async with server.client.stream("POST", "/api/chat/stream", json={"message": message}) as r:
            return await frames_until_done(r)

    first = asyncio.create_task(chat("parked"))
    await gate.entered.wait()
    second = await chat("quick")  # finishes while the first is parked
    gate.open()
    assert second[-1].data["status"] == "completed"
    assert (await first)[-1].data["status"] == "completed"
