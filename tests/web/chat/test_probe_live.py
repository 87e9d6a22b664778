"""Hostile probes over a real uvicorn: crowds, disconnects, failures, cancels, shutdowns."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, fail_after, text

from ..conftest import Gate, deploy, read_frames, scripted_agent, until


async def _poll(check: Any, what: str, seconds: float = 15) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


async def _open(client: httpx.AsyncClient, sid: str) -> tuple[int, Any]:
    async with client.stream(
        "POST", "/api/chat/stream", json={"message": "go", "session_id": sid}
    ) as r:
        if r.status_code != 200:
            return r.status_code, (await r.aread()).decode()
        frames = read_frames(r)
        return 200, await anext(frames)


async def test_forty_streams_on_eight_slots(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = Agent(
        name="helper",
        model=ScriptedProvider([call("wait_gate")] * 8 + [text("ok")] * 8 + [text("again")]),
        tools=[gate.tool],
    )
    live = await serve(make_app(agent, max_background_runs=8))
    sup = live.app.state.lovia.supervisor
    results = await asyncio.wait_for(
        asyncio.gather(*(_open(live.client, f"s{i}") for i in range(40))), 30
    )
    codes = [c for c, _ in results]
    assert codes.count(200) == 8 and codes.count(429) == 32, codes
    assert all("slots" in body for c, body in results if c == 429)
    await _poll(lambda: len(sup.live_runs()) == 8, "eight live")
    gate.open()
    await _poll(lambda: not sup.live_runs(), "slots back")
    await _poll(lambda: not sup.hub._channels, "channels closed")
    async with live.client.stream("POST", "/api/chat/stream", json={"message": "m"}) as r:
        frames = await asyncio.wait_for(until(read_frames(r), "done"), 10)
    assert frames[-1].data["status"] == "completed"


async def test_twenty_disconnects_leave_no_subscriber(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("end"), tools=[gate.tool])
    live = await serve(make_app(agent))
    sup = live.app.state.lovia.supervisor
    code, session = await asyncio.wait_for(_open(live.client, "d"), 10)
    assert code == 200
    run_id = session.data["run_id"]
    for _ in range(20):
        async with live.client.stream("GET", "/api/chat/stream", params={"session_id": "d"}) as r:
            frames = read_frames(r)
            await asyncio.wait_for(anext(frames), 5)
            await asyncio.wait_for(anext(frames), 5)
    await _poll(lambda: len(sup.hub._channels.get(run_id, [])) == 0, "subscribers back to 0")
    gate.open()
    await _poll(lambda: not sup.live_runs(), "run ended")


async def test_a_provider_failing_mid_stream(make_app: Any, serve: Any) -> None:
    agent = scripted_agent(fail_after(RuntimeError("boom /secret/path"), text("abcdef"), deltas=3))
    live = await serve(make_app(agent))
    async with live.client.stream("POST", "/api/chat/stream", json={"message": "x"}) as r:
        frames = [f async for f in read_frames(r)]
    kinds = [f.event for f in frames]
    assert kinds.count("error") == 1 and kinds.count("done") == 1 and kinds[-1] == "done", kinds
    assert frames[-1].data["status"] == "failed"
    hist = (await live.client.get("/api/runs/history")).json()
    assert hist["runs"][0]["status"] == "failed", hist


async def test_cancel_a_hanging_tool_and_a_raising_tool(make_app: Any, serve: Any) -> None:
    entered = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        entered.set()
        await asyncio.Event().wait()
        return "never"

    @tool
    def explode() -> str:
        """Raise."""
        raise RuntimeError("kaboom")

    agent = scripted_agent(call("explode"), call("hang"), text("x"), tools=[hang, explode])
    live = await serve(make_app(agent))
    async with live.client.stream(
        "POST", "/api/chat/stream", json={"message": "x", "session_id": "h"}
    ) as r:
        frames = read_frames(r)
        await asyncio.wait_for(entered.wait(), 10)
        a, b = await asyncio.gather(
            live.client.post("/api/chat/cancel", params={"session_id": "h"}),
            live.client.post("/api/chat/cancel", params={"session_id": "h"}),
        )
        assert {a.status_code, b.status_code} <= {200, 404}, (a.text, b.text)
        got = await asyncio.wait_for(until(frames, "done"), 10)
    assert got[-1].data["status"] == "cancelled"
    r2 = await live.client.post("/api/chat/cancel", params={"session_id": "h"})
    assert r2.status_code == 404


async def test_cancel_during_an_approval_wait(make_app: Any, serve: Any) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("x"), tools=[deploy])
    live = await serve(make_app(agent))
    sup = live.app.state.lovia.supervisor
    async with live.client.stream(
        "POST", "/api/chat/stream", json={"message": "x", "session_id": "a"}
    ) as r:
        frames = read_frames(r)
        got = await asyncio.wait_for(until(frames, "approval_required"), 10)
        cid = got[-1].data["call_id"]
        assert (
            await live.client.post("/api/chat/cancel", params={"session_id": "a"})
        ).status_code == 200
        got = await asyncio.wait_for(until(frames, "done"), 10)
    assert got[-1].data["status"] == "cancelled"
    assert sup.approvals.pending("a") == []
    body = {"session_id": "a", "call_id": cid, "decision": "approve"}
    assert (await live.client.post("/api/chat/approve", json=body)).status_code == 404


async def test_approve_twice_and_answer_nobody_asked(make_app: Any, serve: Any) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("x"), tools=[deploy])
    live = await serve(make_app(agent))
    async with live.client.stream(
        "POST", "/api/chat/stream", json={"message": "x", "session_id": "b"}
    ) as r:
        frames = read_frames(r)
        got = await asyncio.wait_for(until(frames, "approval_required"), 10)
        body = {"session_id": "b", "call_id": got[-1].data["call_id"], "decision": "approve"}
        a, b = await asyncio.gather(
            live.client.post("/api/chat/approve", json=body),
            live.client.post("/api/chat/approve", json=body),
        )
        assert sorted([a.status_code, b.status_code]) == [200, 404], (a.text, b.text)
        await asyncio.wait_for(until(frames, "done"), 10)
    r2 = await live.client.post("/api/chat/answer", json={"session_id": "b", "answer": "hi"})
    assert r2.status_code == 404, r2.text
    r3 = await live.client.post("/api/chat/uninject", json={"session_id": "b", "id": 1})
    assert r3.status_code == 404, r3.text
    r4 = await live.client.post("/api/chat/inject", json={"session_id": "b", "message": "m"})
    assert r4.status_code == 409, r4.text
    r5 = await live.client.post("/api/chat/inject", json={"session_id": "nope", "message": "m"})
    assert r5.status_code == 404, r5.text


async def test_reconnect_unknown_and_after_done(make_app: Any, serve: Any) -> None:
    live = await serve(make_app(scripted_agent(text("hi"))))
    r = await live.client.post("/api/chat/reconnect", params={"session_id": "ghost"})
    assert r.status_code == 404
    r = await live.client.get("/api/chat/stream", params={"session_id": "ghost"})
    assert r.status_code == 404
    async with live.client.stream(
        "POST", "/api/chat/stream", json={"message": "x", "session_id": "c"}
    ) as s:
        await asyncio.wait_for(until(read_frames(s), "done"), 10)
    async with live.client.stream("POST", "/api/chat/reconnect", params={"session_id": "c"}) as s:
        frames = await asyncio.wait_for(_all(read_frames(s)), 10)
    assert [f.event for f in frames][:2] == ["session", "snapshot"], frames
    for last in ("0", "2", "999999"):
        async with live.client.stream(
            "GET", "/api/chat/stream", params={"session_id": "c"}, headers={"Last-Event-ID": last}
        ) as s:
            frames = await asyncio.wait_for(_all(read_frames(s)), 10)
        assert frames[0].event == "session"


async def _all(frames: Any) -> list[Any]:
    return [f async for f in frames]


async def test_shutdown_during_ten_runs_and_restart(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = Agent(
        name="helper", model=ScriptedProvider([call("wait_gate")] * 10), tools=[gate.tool]
    )
    first = await serve(make_app(agent, max_background_runs=10))
    sup = first.app.state.lovia.supervisor
    results = await asyncio.wait_for(
        asyncio.gather(*(_open(first.client, f"r{i}") for i in range(10))), 30
    )
    assert [c for c, _ in results] == [200] * 10
    await _poll(lambda: len(sup.live_runs()) == 10, "ten live")
    await _poll(lambda: all(r.handle is not None for r in sup.live_runs()), "handles")
    # let every run reach its tool
    await asyncio.wait_for(gate.entered.wait(), 10)
    await first.stop()
    gate2 = Gate()
    gate2.open()
    agent2 = Agent(name="helper", model=ScriptedProvider([text("back")] * 10), tools=[gate2.tool])
    second = await serve(make_app(agent2, max_background_runs=10))
    for i, (_, session) in enumerate(results):
        async with second.client.stream(
            "GET", "/api/chat/stream", params={"session_id": f"r{i}"}
        ) as s:
            assert s.status_code == 200, await s.aread()
            frames = await asyncio.wait_for(until(read_frames(s), "done"), 15)
        assert frames[0].data["run_id"] == session.data["run_id"]
        assert frames[-1].data["status"] == "completed", frames


async def test_two_posts_race_on_a_new_session(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("one"), tools=[gate.tool])
    live = await serve(make_app(agent))
    a, b = await asyncio.wait_for(
        asyncio.gather(_open(live.client, "n"), _open(live.client, "n")), 10
    )
    assert a[0] == b[0] == 200
    assert a[1].data["run_id"] == b[1].data["run_id"]
    assert sorted([a[1].data["attached"], b[1].data["attached"]]) == [False, True]
    r = await live.client.post("/api/chat", json={"message": "blocking", "session_id": "n"})
    assert r.status_code == 409, r.text
    gate.open()
    sup = live.app.state.lovia.supervisor
    await _poll(lambda: not sup.live_runs(), "run ended")


async def test_approval_timeout_races_a_decision(make_app: Any, serve: Any) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("x"), tools=[deploy])
    live = await serve(make_app(agent, approval_timeout=0.05))
    async with live.client.stream(
        "POST", "/api/chat/stream", json={"message": "x", "session_id": "t"}
    ) as r:
        frames = read_frames(r)
        got = await asyncio.wait_for(until(frames, "approval_required"), 10)
        body = {"session_id": "t", "call_id": got[-1].data["call_id"], "decision": "approve"}
        d = await live.client.post("/api/chat/approve", json=body)
        assert d.status_code in (200, 404), d.text
        rest = await asyncio.wait_for(until(frames, "done"), 10)
    assert rest[-1].data["status"] == "completed"


async def test_two_agui_runs_on_one_thread(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("one"), text("two"), tools=[gate.tool])
    live = await serve(make_app(agent))
    body = {
        "threadId": "th",
        "runId": "r1",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "m", "role": "user", "content": "hi"}],
    }

    async def run(run_id: str) -> tuple[int, str]:
        async with live.client.stream("POST", "/api/agui", json={**body, "runId": run_id}) as r:
            if r.status_code != 200:
                return r.status_code, (await r.aread()).decode()
            async for line in r.aiter_lines():
                if "RUN_STARTED" in line:
                    return 200, line
            return 200, ""

    a, b = await asyncio.wait_for(asyncio.gather(run("r1"), run("r2")), 10)
    print(a, b)
    assert sorted([a[0], b[0]]) == [200, 409], (a, b)
    gate.open()


async def test_ten_agui_runs_racing_on_a_new_thread(make_app: Any, serve: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("one"), tools=[gate.tool])
    live = await serve(make_app(agent))
    body = {
        "threadId": "th",
        "runId": "r1",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "m", "role": "user", "content": "hi"}],
    }

    async def run(run_id: str) -> int:
        async with live.client.stream("POST", "/api/agui", json={**body, "runId": run_id}) as r:
            return int(r.status_code)

    codes = await asyncio.wait_for(asyncio.gather(*(run(f"r{i}") for i in range(10))), 10)
    gate.open()
    assert sorted(codes) == [200] + [409] * 9, codes


async def test_a_message_right_after_cancel_is_never_silently_dropped(
    make_app: Any, serve: Any
) -> None:
    entered = asyncio.Event()
    leave = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take a while to notice a cancel."""
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            await leave.wait()  # the run is cancelled but not over yet
        return "never"

    agent = scripted_agent(call("slow"), text("next reply"), tools=[slow])
    live = await serve(make_app(agent))
    sup = live.app.state.lovia.supervisor
    code, _ = await asyncio.wait_for(_open(live.client, "k"), 10)
    assert code == 200
    await asyncio.wait_for(entered.wait(), 10)
    assert (
        await live.client.post("/api/chat/cancel", params={"session_id": "k"})
    ).status_code == 200
    code, body = await asyncio.wait_for(_open(live.client, "k"), 10)
    inj = await live.client.post("/api/chat/inject", json={"session_id": "k", "message": "more"})
    leave.set()
    await _poll(lambda: not sup.live_runs(), "cancelled run ended")
    # Refused (409 naming the cancel), never a 200 whose message vanishes with the run.
    assert code == 409 and "cancel" in body, (code, body)
    assert inj.status_code == 409 and "cancel" in inj.json()["detail"], inj.text
