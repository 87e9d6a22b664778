"""The run record and the ``run_finished`` event of a failed and of a cancelled run."""

from __future__ import annotations

from typing import Any

from lovia.exceptions import ProviderError
from lovia.testing import text

from ..conftest import gated_agent, read_frames, scripted_agent


async def test_a_failed_run_records_its_error_without_internals(
    make_app: Any, asgi_client: Any
) -> None:
    boom = ProviderError("upstream said no at /srv/secret/path.py line 3")
    app = make_app(scripted_agent(boom))
    client = await asgi_client(app)
    sub = app.state.lovia.lifecycle.bus.subscribe()
    async with client.stream("POST", "/api/chat/stream", json={"message": "x"}) as r:
        frames = [f async for f in read_frames(r)]
    assert frames[-1].data["status"] == "failed"
    [record] = (await client.get("/api/runs/history")).json()["runs"]
    assert record["status"] == "failed" and record["ended_at"] is not None
    assert record["error"].startswith("ProviderError: ")
    assert record["usage"] is None and record["duration"] >= 0
    finished = [e async for e in _until(sub, "run_finished")][-1]
    assert finished.data["status"] == "failed" and finished.data["error"] == record["error"]
    assert (await client.get("/api/runs")).json()["runs"] == []


async def test_a_cancelled_run_records_cancelled(make_app: Any, asgi_client: Any) -> None:
    gate, agent = gated_agent(text("never"))
    app = make_app(agent)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    started = await supervisor.start("park", session_id="c1")
    await gate.entered.wait()
    live = (await client.get("/api/runs")).json()["runs"]
    assert [(r["run_id"], r["status"]) for r in live] == [(started.run.run_id, "running")]
    r = await client.post("/api/chat/cancel", params={"session_id": "c1"})
    assert r.status_code == 200
    [rec async for rec in supervisor.follow(started.run.run_id)]
    [record] = (await client.get("/api/runs/history")).json()["runs"]
    assert record["status"] == "cancelled" and record["error"].startswith("RunCancelled")
    assert (await client.get("/api/runs")).json()["runs"] == []
    meta = (await client.get("/api/sessions/c1")).json()
    assert meta["active_run_id"] is None


async def _until(sub: Any, kind: str) -> Any:
    async for event in sub:
        yield event
        if event.kind == kind:
            return
