"""The JSON API in-process (httpx ASGI transport): info, sessions, and the 4xx shapes."""

from __future__ import annotations

from typing import Any

import pytest
from lovia.exceptions import ProviderError, UserError
from lovia.testing import call, text
from lovia.web.recorder import PRIVATE_RECORDS

from .conftest import Gate, gated_agent, read_frames, scripted_agent


def _no_internals(response: Any) -> None:
    body = response.text
    assert "Traceback" not in body and "/work/" not in body and ".py" not in body


async def test_health_info_and_agents(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent(name="helper"), title="Demo"))
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    info = (await client.get("/api/info")).json()
    assert info["title"] == "Demo" and info["agents"] == ["helper"]
    assert info["default_agent"] == "helper" and info["version"]
    agents = (await client.get("/api/agents")).json()
    assert agents == [
        {
            "name": "helper",
            "model": "scripted-model",
            "tools": [],
            "capabilities": [],
            "context_window": None,
        }
    ]
    assert (await client.get("/api/agents/helper")).json() == agents[0]
    missing = await client.get("/api/agents/nobody")
    assert missing.status_code == 404 and missing.json()["hint"] == "agents: helper"


async def test_a_multi_agent_server_has_no_default_and_needs_an_agent(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app({"a": scripted_agent(name="a"), "b": scripted_agent(name="b")})
    client = await asgi_client(app)
    assert (await client.get("/api/info")).json()["default_agent"] is None
    r = await client.post("/api/chat/stream", json={"message": "hi"})
    assert r.status_code == 404 and "several agents" in r.json()["detail"]
    assert "a, b" in r.json()["hint"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "message"),
        ({"message": ""}, "message"),
        ({"message": "   "}, "message"),
        ({"message": "hi", "session_id": "../etc"}, "session_id"),
        ({"message": "hi", "surprise": 1}, "surprise"),
        ({"message": 5}, "message"),
    ],
)
async def test_a_bad_chat_body_is_a_422_naming_the_field(
    make_app: Any, asgi_client: Any, body: dict[str, Any], field: str
) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    r = await client.post("/api/chat/stream", json=body)
    assert r.status_code == 422
    payload = r.json()
    assert field in payload["detail"]
    assert any(e["loc"][-1] == field for e in payload["errors"])
    _no_internals(r)


async def test_a_body_that_is_not_json_is_refused_plainly(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    json_header = {"content-type": "application/json"}
    r = await client.post("/api/chat/stream", content=b'{"message": "hi"', headers=json_header)
    assert r.status_code == 422 and "JSON decode error" in r.json()["detail"]
    r = await client.post("/api/chat/stream", content=b"\x00not json", headers=json_header)
    assert r.status_code == 400 and r.json()["detail"]  # FastAPI's own answer for junk
    _no_internals(r)


async def test_sessions_rename_pin_list_and_delete(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent(text("one"), text("two")))
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    ids = []
    for message in ("first chat", "second chat"):
        started = await supervisor.start(message)
        [r async for r in supervisor.follow(started.run.run_id)]
        ids.append(started.run.session_id)
    r = await client.patch(f"/api/sessions/{ids[0]}", json={"title": "  Renamed  ", "pinned": True})
    assert r.status_code == 200 and r.json()["title"] == "Renamed" and r.json()["pinned"]
    listed = (await client.get("/api/sessions")).json()
    assert [s["id"] for s in listed["sessions"]] == ids  # pinned first
    assert listed["sessions"][1]["title"] == "second chat"
    detail = (await client.get(f"/api/sessions/{ids[1]}")).json()
    assert [(e["type"], e["content"]) for e in detail["entries"]] == [
        ("input", "second chat"),
        ("assistant_text", "two"),
    ]
    page = (await client.get("/api/sessions", params={"limit": 1, "offset": 1})).json()
    assert [s["id"] for s in page["sessions"]] == [ids[1]]
    assert (await client.delete(f"/api/sessions/{ids[0]}")).status_code == 204
    assert (await client.get(f"/api/sessions/{ids[0]}")).status_code == 404
    assert await app.state.lovia.store.session.load(ids[0]) == []


async def test_unknown_ids_are_404_and_bad_patches_422(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    for method, url, kwargs in [
        ("GET", "/api/sessions/nope", {}),
        ("PATCH", "/api/sessions/nope", {"json": {"title": "x"}}),
        ("DELETE", "/api/sessions/nope", {}),
        ("GET", "/api/chat/stream", {"params": {"session_id": "nope"}}),
        ("POST", "/api/chat/cancel", {"params": {"session_id": "nope"}}),
        ("POST", "/api/chat/inject", {"json": {"session_id": "nope", "message": "hi"}}),
        (
            "POST",
            "/api/chat/approve",
            {"json": {"session_id": "nope", "call_id": "c", "decision": "approve"}},
        ),
    ]:
        r = await client.request(method, url, **kwargs)
        assert r.status_code == 404, (method, url, r.text)
        assert set(r.json()) <= {"detail", "hint"} and r.json()["detail"]
    for bad in ({}, {"title": ""}, {"pinned": "maybe"}, {"title": "x", "extra": 1}):
        r = await client.patch("/api/sessions/nope", json=bad)
        assert r.status_code == 422, bad
    r = await client.post(
        "/api/chat/approve", json={"session_id": "s", "call_id": "c", "decision": "maybe"}
    )
    assert r.status_code == 422 and "decision" in r.json()["detail"]
    r = await client.get("/api/chat/stream", params={"session_id": "s", "last_event_id": "-1"})
    assert r.status_code == 422 and "last_event_id" in r.json()["detail"]
    r = await client.get("/api/sessions", params={"limit": 0})
    assert r.status_code == 422 and "limit" in r.json()["detail"]


async def test_inject_without_a_live_run_is_409_and_with_one_queues(
    make_app: Any, asgi_client: Any
) -> None:
    gate = Gate()
    app = make_app(scripted_agent(text("done"), call("wait_gate"), text("x"), tools=[gate.tool]))
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    idle = await supervisor.start("hello")
    [r async for r in supervisor.follow(idle.run.run_id)]
    sid = idle.run.session_id
    r = await client.post("/api/chat/inject", json={"session_id": sid, "message": "late"})
    assert r.status_code == 409 and "no live run" in r.json()["detail"]
    busy = await supervisor.start("again", session_id=sid)
    await gate.entered.wait()
    r = await client.post("/api/chat/inject", json={"session_id": sid, "message": "steer"})
    assert r.status_code == 200 and isinstance(r.json()["id"], int)
    r = await client.post("/api/chat/inject", json={"session_id": sid, "message": " "})
    assert r.status_code == 422
    gate.open()
    records = [r async for r in supervisor.follow(busy.run.run_id)]
    assert {"content": "steer", "turn": 2} in [r.data for r in records if r.type == "user_injected"]


async def test_a_full_server_answers_429(make_app: Any, asgi_client: Any) -> None:
    gate, agent = gated_agent(text("x"))
    app = make_app(agent, max_background_runs=1)
    client = await asgi_client(app)
    await app.state.lovia.supervisor.start("occupy the only slot")
    await gate.entered.wait()
    r = await client.post("/api/chat/stream", json={"message": "one more"})
    assert r.status_code == 429
    assert r.json() == {
        "detail": "all 1 background-run slots are busy",
        "hint": "retry when a run has finished",
    }
    gate.open()


async def test_an_unexpected_failure_is_a_bare_500(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)

    async def broken(**_: Any) -> None:
        raise RuntimeError("secret detail at /work/internal/path.py")

    app.state.lovia.store.list_sessions = broken
    r = await client.get("/api/sessions")
    assert r.status_code == 500 and r.json() == {"detail": "internal server error"}
    _no_internals(r)


async def test_the_openapi_schema_names_the_edge_models(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    schema = (await client.get("/api/openapi.json")).json()
    assert {"ChatRequest", "ErrorBody", "SessionInfo", "ApproveRequest"} <= set(
        schema["components"]["schemas"]
    )


async def test_a_failing_run_ends_with_error_then_done(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent(ProviderError("the model is down", retryable=False)))
    await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    started = await supervisor.start("hi")
    records = [(r.type, r.data) async for r in supervisor.follow(started.run.run_id)]
    assert records[-2:] == [
        ("error", {"type": "ProviderError", "message": "the model is down"}),
        ("done", {"status": "failed"}),
    ]
    assert await app.state.lovia.store.checkpointer.load(started.run.run_id) is None
    meta = await app.state.lovia.store.get_session(started.run.session_id)
    assert meta.active_run_id is None


async def test_resuming_an_earlier_run_of_the_chat_by_its_run_id(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent(text("ab"), text("cd"), text("ef")))
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    first = await supervisor.start("one")
    first_records = [r async for r in supervisor.follow(first.run.run_id)]
    sid = first.run.session_id
    second = await supervisor.start("two", session_id=sid)
    [r async for r in supervisor.follow(second.run.run_id)]
    # The buffered ASGI transport is fine here: both runs have ended, so the stream ends.
    params = {"session_id": sid, "run_id": first.run.run_id, "last_event_id": 2}
    r = await client.get("/api/chat/stream", params=params)
    frames = [f async for f in read_frames(r)]
    assert frames[0].data["run_id"] == first.run.run_id
    assert [(f.event, f.data) for f in frames[1:]] == [
        ("context", {}) if rec.type in PRIVATE_RECORDS else (rec.type, rec.data)
        for rec in first_records[2:]
    ]
    r = await client.get("/api/chat/stream", params={"session_id": sid})
    latest = [f async for f in read_frames(r)]
    assert latest[0].data["run_id"] == second.run.run_id
    other = await supervisor.start("elsewhere")
    [r async for r in supervisor.follow(other.run.run_id)]
    r = await client.get("/api/chat/stream", params={**params, "run_id": other.run.run_id})
    assert r.status_code == 404  # a run of another chat is not this chat's


@pytest.mark.parametrize("bad", [{}, {"a": "not an agent"}, "helper"])
def test_create_app_refuses_what_is_not_an_agent(make_app: Any, bad: Any) -> None:
    with pytest.raises(UserError, match="create_app"):
        make_app(bad)


async def test_sessions_search_by_title(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent(text("one"), text("two")))
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    for message in ("trip to Rome", "tax return"):
        started = await supervisor.start(message)
        [r async for r in supervisor.follow(started.run.run_id)]
    found = (await client.get("/api/sessions", params={"q": "rome"})).json()["sessions"]
    assert [s["title"] for s in found] == ["trip to Rome"]
