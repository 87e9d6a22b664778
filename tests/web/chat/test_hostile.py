"""Hostile use of the chat endpoints: races on one chat, huge and odd bodies, tiny limits."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia.testing import text
from lovia.web import ChatStore, RunConflict, RunSupervisor

from ..conftest import chat, gated_agent, scripted_agent, until


async def test_dozens_of_concurrent_starts_on_one_chat_make_one_run(store: ChatStore) -> None:
    gate, agent = gated_agent(text("once"))
    supervisor = RunSupervisor({"helper": agent}, store, max_background_runs=2)
    started = await asyncio.gather(*(supervisor.start(f"m{i}", session_id="s") for i in range(30)))
    assert len({s.run.run_id for s in started}) == 1
    assert sum(not s.attached for s in started) == 1
    gate.open()
    records = [r async for r in supervisor.follow(started[0].run.run_id)]
    injected = [r.data["content"] for r in records if r.type == "user_injected"]
    first = next(s for s in started if not s.attached)
    assert sorted(injected + [first.run.prompt[0]["content"]]) == sorted(f"m{i}" for i in range(30))
    await supervisor.aclose()


async def test_a_blocking_chat_and_a_stream_racing_for_a_new_chat_one_conflicts(
    store: ChatStore,
) -> None:
    gate, agent = gated_agent(text("the winner"))
    supervisor = RunSupervisor({"helper": agent}, store)
    blocking = asyncio.create_task(supervisor.run_blocking("a", session_id="race"))
    streaming = asyncio.create_task(supervisor.start("b", session_id="race"))
    done, _ = await asyncio.wait([blocking, streaming], return_when=asyncio.FIRST_COMPLETED)
    gate.open()
    outcomes = await asyncio.gather(blocking, streaming, return_exceptions=True)
    conflicts = [o for o in outcomes if isinstance(o, RunConflict)]
    assert len(conflicts) == 1, outcomes
    await supervisor.aclose()


async def test_huge_nul_and_unicode_bodies(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent(text("ok \x00 ☃"))))
    r = await client.post("/api/chat", json={"message": "x" * 100_001})
    assert r.status_code == 422 and "message" in r.json()["detail"]
    r = await client.post("/api/chat", json={"message": "nul \x00 and ☃", "extra": 1})
    assert r.status_code == 422 and "extra" in r.json()["detail"]
    r = await client.post("/api/chat", json={"message": "nul \x00 and ☃"})
    assert r.status_code == 200 and r.json()["output"] == "ok \x00 ☃"
    detail = (await client.get(f"/api/sessions/{r.json()['session_id']}")).json()
    assert detail["entries"][0]["content"] == "nul \x00 and ☃"
    r = await client.post("/api/chat/uninject", json={"session_id": "s", "id": 10**30})
    assert r.status_code == 404
    r = await client.post(
        "/api/chat/answer", content=b"\xff\xfe", headers={"content-type": "application/json"}
    )
    assert r.status_code in (400, 422)


async def test_a_reconnect_that_needs_a_slot_gets_429_when_full(make_app: Any, serve: Any) -> None:
    gate, agent = gated_agent(text("x"))
    first = await serve(make_app(agent, max_background_runs=1))
    async with chat(first.client, "interrupted") as (session, frames):
        await until(frames, "tool_call")
    await gate.entered.wait()
    await first.stop()
    busy_gate, busy_agent = gated_agent(text("y"))
    second = await serve(make_app(busy_agent, max_background_runs=1))
    await second.app.state.lovia.supervisor.start("occupies the slot")
    await busy_gate.entered.wait()
    sid = session.data["session_id"]
    r = await second.client.post("/api/chat/reconnect", params={"session_id": sid})
    assert r.status_code == 429 and "no free slot" in r.json()["detail"]
    busy_gate.open()


async def test_a_dozen_reconnects_to_an_interrupted_chat_resume_it_once(store: ChatStore) -> None:
    gate, agent = gated_agent(text("resumed once"))
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("long job")
    await gate.entered.wait()
    await supervisor.aclose()
    gate.open()
    restarted = RunSupervisor({"helper": agent}, store)
    sid = started.run.session_id
    snapshots = await asyncio.gather(*(restarted.snapshot(sid) for _ in range(12)))
    runs = {id(s.run) for s in snapshots}
    assert len(runs) == 1 and snapshots[0].run is not None
    assert snapshots[0].run.run_id == started.run.run_id
    assert all(
        s.entries == [{"type": "input", "role": "user", "content": "long job"}] for s in snapshots
    )
    records = [r async for r in restarted.follow(started.run.run_id)]
    assert records[-1].data["output"] == "resumed once"
    await restarted.aclose()
