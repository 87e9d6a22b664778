"""``/api/schedules``: CRUD, pause/resume, run now, past runs, and the loop in the lifespan."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
from fastapi import FastAPI
from lovia.testing import call, text

from ..conftest import Gate, scripted_agent

LATER = "2099-01-01T00:00:00Z"


def body(**fields: Any) -> dict[str, Any]:
    return {
        "instruction": "check the build",
        "trigger_kind": "every",
        "trigger_expr": "1h",
        **fields,
    }


async def client_for(
    make_app: Callable[..., FastAPI], asgi_client: Any, agent: Any = None, **options: Any
) -> httpx.AsyncClient:
    options.setdefault("scheduler_poll", None)  # these tests fire by hand (run now)
    c: httpx.AsyncClient = await asgi_client(make_app(agent or scripted_agent(), **options))
    return c


async def test_create_list_get_patch_delete(make_app: Any, asgi_client: Any) -> None:
    c = await client_for(make_app, asgi_client)
    r = await c.post("/api/schedules", json=body(max_fires=5))
    assert r.status_code == 201, r.text
    created = r.json()
    sid = created["id"]
    assert created["status"] == "active" and created["agent"] == "helper"
    assert created["next_fire_at"] > time.time() + 3000 and created["fires"] == 0
    assert [s["id"] for s in (await c.get("/api/schedules")).json()["schedules"]] == [sid]
    assert (await c.get(f"/api/schedules/{sid}")).json() == created

    paused = (await c.patch(f"/api/schedules/{sid}", json={"active": False})).json()
    assert (paused["status"], paused["next_fire_at"]) == ("paused", None)
    assert (await c.get("/api/schedules?active=true")).json()["schedules"] == []
    resumed = (await c.patch(f"/api/schedules/{sid}", json={"active": True})).json()
    assert resumed["status"] == "active" and resumed["next_fire_at"] is not None

    moved = (
        await c.patch(
            f"/api/schedules/{sid}", json={"trigger_kind": "cron", "trigger_expr": "0 9 * * 1"}
        )
    ).json()
    assert moved["trigger_expr"] == "0 9 * * 1"
    assert time.gmtime(moved["next_fire_at"]).tm_wday == 0  # recomputed: a Monday, 09:00
    assert time.gmtime(moved["next_fire_at"]).tm_hour == 9

    assert (await c.delete(f"/api/schedules/{sid}")).status_code == 204
    for method in ("GET", "PATCH", "DELETE"):
        r = await c.request(method, f"/api/schedules/{sid}", json={"active": True})
        assert r.status_code == 404, method
    assert (await c.post(f"/api/schedules/{sid}/run")).status_code == 404
    assert (await c.get(f"/api/schedules/{sid}/runs")).status_code == 404


async def test_resume_clears_the_finished_reason(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent(), scheduler_poll=None)
    c: httpx.AsyncClient = await asgi_client(app)
    sid = (await c.post("/api/schedules", json=body())).json()["id"]
    await app.state.lovia_background.scheduler.schedules.cancel(sid, "enough")
    gone = (await c.get(f"/api/schedules/{sid}")).json()
    assert (gone["status"], gone["finished_reason"]) == ("finished", "cancelled: enough")
    back = (await c.patch(f"/api/schedules/{sid}", json={"active": True})).json()
    assert (back["status"], back["finished_reason"]) == ("active", None)


async def test_every_body_is_validated_naming_the_field(make_app: Any, asgi_client: Any) -> None:
    c = await client_for(make_app, asgi_client)
    cases = [
        (body(trigger_expr="10s"), "trigger_expr"),
        (body(trigger_kind="cron", trigger_expr="* * * * * *"), "trigger_expr"),
        (body(trigger_kind="cron", trigger_expr="0 0 30 2 *"), "trigger_expr"),
        (body(trigger_kind="at", trigger_expr="2001-01-01T00:00:00Z"), "trigger_expr"),
        (body(trigger_kind="sometimes"), "trigger_kind"),
        (body(max_fires=0), "max_fires"),
        (body(max_fires=-1), "max_fires"),
        (body(until="green"), "until"),
        (body(until="g" * 100_000, max_fires=3), "until"),
        (body(trigger_kind="at", trigger_expr=LATER, until="x", max_fires=2), "until"),
        (body(expires_at="2001-01-01T00:00:00Z"), "expires_at"),
        (body(instruction=""), "instruction"),
        (body(instruction="\x00" * 3 + " "), None),
        (body(session_id="../etc"), "session_id"),
        (body(oops=True), "oops"),
        ({}, "instruction"),
    ]
    for payload, field in cases:
        r = await c.post("/api/schedules", json=payload)
        if field is None:
            assert r.status_code in (201, 422), r.text
            continue
        assert r.status_code == 422, (payload, r.text)
        assert field in r.json()["detail"], (payload, r.text)
        assert "Traceback" not in r.text and "/work/" not in r.text
    r = await c.post("/api/schedules", json=body(agent="nobody"))
    assert r.status_code == 404
    r = await c.post("/api/schedules", json=body(session_id="nope", continue_session=True))
    assert r.status_code == 404
    sid = (await c.post("/api/schedules", json=body())).json()["id"]
    for patch, field in (
        ({"max_fires": 0}, "max_fires"),
        ({"trigger_expr": "1s"}, "trigger_expr"),
        ({"until": "x"}, "until"),
        ({"trigger_kind": "cron"}, "trigger_expr"),
        ({"what": 1}, "what"),
        ({"active": "maybe"}, "active"),
    ):
        r = await c.patch(f"/api/schedules/{sid}", json=patch)
        assert r.status_code == 422 and field in r.json()["detail"], (patch, r.text)


async def test_run_now_keeps_a_pause_and_409s_while_the_fire_is_live(
    make_app: Any, asgi_client: Any
) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("first"), text("second"), tools=[gate.tool])
    app = make_app(agent, scheduler_poll=None)
    c: httpx.AsyncClient = await asgi_client(app)
    sid = (await c.post("/api/schedules", json=body())).json()["id"]
    await c.patch(f"/api/schedules/{sid}", json={"active": False})
    r = await c.post(f"/api/schedules/{sid}/run")
    assert r.status_code == 200, r.text
    fire = r.json()
    assert fire["attached"] is False and fire["schedule_id"] == sid
    await gate.entered.wait()
    assert (await c.post(f"/api/schedules/{sid}/run")).status_code == 409
    after = (await c.get(f"/api/schedules/{sid}")).json()
    assert (after["status"], after["next_fire_at"], after["fires"]) == ("paused", None, 1)
    gate.open()
    supervisor = app.state.lovia.supervisor
    live = supervisor.live(fire["session_id"])
    if live is not None and live.task is not None:
        await asyncio.wait_for(asyncio.shield(live.task), 10)
    second = (await c.post(f"/api/schedules/{sid}/run")).json()
    assert second["session_id"] != fire["session_id"]
    runs = (await c.get(f"/api/schedules/{sid}/runs")).json()["runs"]
    assert [r["run_id"] for r in runs] == [second["run_id"], fire["run_id"]]


async def test_the_lifespan_runs_the_scheduler_loop(make_app: Any, asgi_client: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("fired"), tools=[gate.tool])
    c: httpx.AsyncClient = await asgi_client(make_app(agent, scheduler_poll=0.01))
    now = f"{time.time():.3f}"
    r = await c.post("/api/schedules", json=body(trigger_kind="at", trigger_expr=now))
    assert r.status_code == 201, r.text
    await asyncio.wait_for(gate.entered.wait(), 10)  # the loop fired it, nobody asked
    gate.open()
    sid = r.json()["id"]
    for _ in range(500):  # bounded: the fire's bookkeeping lands right after the start
        got = (await c.get(f"/api/schedules/{sid}")).json()
        if got["fires"] == 1:
            break
        await asyncio.sleep(0.01)
    assert (got["fires"], got["status"], got["finished_reason"]) == (1, "finished", "fired")


async def test_over_real_uvicorn_dozens_at_once_and_hostile_bodies(
    make_app: Any, serve: Any
) -> None:
    live = await serve(make_app(scripted_agent(), scheduler_poll=None))
    c: httpx.AsyncClient = live.client
    results = await asyncio.gather(
        *(c.post("/api/schedules", json=body(instruction=f"job {i}")) for i in range(40))
    )
    assert [r.status_code for r in results] == [201] * 40
    listed = (await c.get("/api/schedules")).json()["schedules"]
    assert len({s["id"] for s in listed}) == 40
    hostile = [
        b"{",
        b"[]",
        b'{"instruction": "x", "trigger_kind": "every", "trigger_expr": "1h", "max_fires": 1e999}',
        b'{"instruction": "x", "trigger_kind": "at", "trigger_expr": "9999999999999999999"}',
        b'{"instruction": "x", "trigger_kind": "every", "trigger_expr": "99999999999999999999d"}',
        (
            '{"instruction": "'
            + "y" * 200_000
            + '", "trigger_kind": "every", "trigger_expr": "1h"}'
        ).encode(),
    ]
    for raw in hostile:
        r = await c.post(
            "/api/schedules", content=raw, headers={"content-type": "application/json"}
        )
        assert r.status_code in (400, 422), (raw[:80], r.status_code, r.text[:200])
        assert "Traceback" not in r.text and "site-packages" not in r.text
    r = await c.get("/api/schedules/" + "%2e%2e%2f" * 5)
    assert r.status_code == 404
