"""``GET /api/sessions/{id}/turns/{n}/context``: the context inspector from the run's log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app

from tests.web.conftest import deploy, frames_until_done


async def _chat(client: Any, message: str) -> str:
    async with client.stream("POST", "/api/chat/stream", json={"message": message}) as r:
        frames = await frames_until_done(r)
    return str(frames[0].data["session_id"])


@pytest.fixture
async def inspected(tmp_path: Path, asgi_client: Any) -> tuple[Any, str]:
    agent = Agent(
        name="helper",
        instructions="You are terse. " * 20,
        model=ScriptedProvider(
            [
                call("deploy", {"env": "prod"}, call_id="c1"),
                call("deploy", {"env": "dev"}, call_id="c2"),
                text("done"),
            ]
        ),
        tools=[deploy],
    )
    app = create_app(agent, db_path=tmp_path / "c.db", approval_timeout=0.05)
    client = await asgi_client(app)
    session = await _chat(client, "ship it " * 50)
    return client, session


async def test_a_turn_shows_parts_approvals_and_what_is_not_recorded(inspected: Any) -> None:
    client, session = inspected
    r = await client.get(f"/api/sessions/{session}/turns/1/context")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["turns"] == [1, 2, 3]
    parts = {p["name"]: p for p in body["parts"]}
    assert parts["system"]["tokens"] == len(("You are terse. " * 20).encode()) // 4
    assert parts["history"]["entries"] == 1  # the user message, before turn 1
    assert parts["history"]["tokens"] > 100
    assert parts["tool_results"]["entries"] == 0
    assert parts["reminders"]["tokens"] is None
    assert parts["tool_schemas"]["tokens"] > 0
    # Nobody answered within the timeout: the call was denied, and the log says so.
    assert [(a["call_id"], a["decision"]) for a in body["approvals"]] == [("c1", "denied")]
    assert body["tool_calls"] == [] or body["tool_calls"][0]["call_id"] == "c1"
    assert body["produced"][0]["type"] == "tool_call"
    assert body["usage"]["scope"] == "run"
    assert any("cached tokens" in m for m in body["missing"])
    later = (await client.get(f"/api/sessions/{session}/turns/3/context")).json()
    later_parts = {p["name"]: p for p in later["parts"]}
    assert later_parts["tool_results"]["entries"] == 2
    assert later["record_tokens"] > body["record_tokens"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/sessions/nope/turns/1/context", 404),
        ("/api/sessions/{s}/turns/9/context", 404),
        ("/api/sessions/{s}/turns/0/context", 422),
        ("/api/sessions/{s}/turns/x/context", 422),
        ("/api/sessions/{s}/turns/1/context?run_id=" + "a" * 32, 404),
        ("/api/sessions/{s}/turns/1/context?run_id=../../x", 422),
        ("/api/sessions/bad%20id/turns/1/context", 422),
    ],
)
async def test_bad_requests(inspected: Any, path: str, status: int) -> None:
    client, session = inspected
    r = await client.get(path.replace("{s}", session))
    assert r.status_code == status, r.text
    assert "Traceback" not in r.text
