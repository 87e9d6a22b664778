"""``POST /api/agui``: AG-UI over a supervised run, in-process and with the official client
(``@ag-ui/client``'s ``HttpAgent``, run by ``client.mjs`` under node against real uvicorn)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia.exceptions import ProviderError
from lovia.testing import call, text
from lovia.web.encoders.agui import AguiEncoder
from lovia.web.eventlog import EventRecord

from ...support import require
from ..conftest import deploy, gated_agent, scripted_agent

HERE = Path(__file__).parent
TOKEN = "agui-test-token"


def _input(thread: str = "thread-1", text_: str = "please deploy", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": "run-1",
        "messages": [{"id": "u1", "role": "user", "content": text_}],
        "state": {},
        "tools": [],
        "context": [],
    }
    body.update(extra)
    return body


async def _events(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    r = await client.post("/api/agui", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def test_a_text_reply_is_a_well_formed_agui_run(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent(text("Hello there"))))
    events = await _events(client, _input())
    assert _types(events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * (len(events) - 6),
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert events[0]["threadId"] == "thread-1" and events[0]["runId"] == "run-1"
    assert events[0]["protocolVersion"] == "1.0"
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == (
        "Hello there"
    )
    assert events[-1]["result"] == "Hello there"
    sessions = (await client.get("/api/sessions")).json()["sessions"]
    assert [s["id"] for s in sessions] == ["thread-1"]  # the thread is a lovia session


async def test_an_approval_interrupts_the_run_and_resume_continues_it(
    make_app: Any, asgi_client: Any
) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("Deployed."), tools=[deploy])
    client = await asgi_client(make_app(agent))
    first = await _events(client, _input())
    assert _types(first)[-6:] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "CUSTOM",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    custom = next(e for e in first if e["type"] == "CUSTOM")
    assert custom["name"] == "lovia.approval_required"
    assert custom["value"]["call_id"] == "call_deploy" and custom["value"]["name"] == "deploy"
    assert json.loads(custom["value"]["arguments"]) == {"env": "prod"}  # as the SSE event has it
    finished = first[-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["id"] == interrupt["toolCallId"] == "call_deploy"
    assert interrupt["reason"] == "tool_approval"
    assert (await client.post("/api/agui", json=_input(text_="again"))).status_code == 409
    resume = [{"interruptId": "call_deploy", "status": "resolved", "payload": {"approved": True}}]
    second = await _events(client, _input(runId="run-2", resume=resume))
    assert second[0]["type"] == "RUN_STARTED" and second[0]["runId"] == "run-2"
    assert "TOOL_CALL_START" not in _types(second)  # the client saw it start already
    result = next(e for e in second if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "call_deploy" and "deployed to prod" in result["content"]
    assert second[-1]["type"] == "RUN_FINISHED" and second[-1]["result"] == "Deployed."


async def test_a_denied_or_cancelled_interrupt_denies_the_call(
    make_app: Any, asgi_client: Any
) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("Not deployed."), tools=[deploy])
    client = await asgi_client(make_app(agent))
    await _events(client, _input())
    resume = [{"interruptId": "call_deploy", "status": "cancelled"}]
    second = await _events(client, _input(resume=resume))
    result = next(e for e in second if e["type"] == "TOOL_CALL_RESULT")
    assert "denied" in result["content"]
    assert second[-1]["result"] == "Not deployed."


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        (_input(thread="../etc"), 422, "threadId"),
        (_input(thread="x" * 65), 422, "threadId"),
        (_input(text_="   "), 422, "user message"),
        (_input(messages=[]), 422, "user message"),
        ({"threadId": "t"}, 422, "runId"),
        (_input(resume=[{"interruptId": "nope", "status": "resolved", "payload": True}]), 404, ""),
        (_input(forwardedProps={"agent": "nobody"}), 404, "nobody"),
    ],
)
async def test_bad_agui_requests_get_clear_4xx(
    make_app: Any, asgi_client: Any, body: dict[str, Any], status: int, needle: str
) -> None:
    client = await asgi_client(make_app(scripted_agent(text("x"))))
    r = await client.post("/api/agui", json=body)
    assert r.status_code == status, r.text
    assert needle in r.json()["detail"]


async def test_a_bad_resume_payload_is_a_422(make_app: Any, asgi_client: Any) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("x"), tools=[deploy])
    client = await asgi_client(make_app(agent))
    await _events(client, _input())
    bad = [{"interruptId": "call_deploy", "status": "resolved", "payload": {"ok": 1}}]
    r = await client.post("/api/agui", json=_input(resume=bad))
    assert r.status_code == 422 and "approved" in r.json()["detail"]


async def test_a_failed_run_is_a_run_error(make_app: Any, asgi_client: Any) -> None:
    agent = scripted_agent(ProviderError("the model is down"))
    client = await asgi_client(make_app(agent))
    events = await _events(client, _input())
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "ProviderError" and "down" in events[-1]["message"]


async def test_a_cancelled_run_finishes_with_the_cancelled_outcome(
    make_app: Any, serve: Any
) -> None:
    gate, agent = gated_agent(text("never"))
    live = await serve(make_app(agent))
    async with live.client.stream("POST", "/api/agui", json=_input()) as r:
        lines = r.aiter_lines()
        await gate.entered.wait()
        cancel = await live.client.post("/api/chat/cancel", params={"session_id": "thread-1"})
        assert cancel.status_code == 200
        events = [json.loads(line[6:]) async for line in lines if line.startswith("data: ")]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert "STEP_FINISHED" in _types(events)


def test_the_encoder_maps_todos_reasoning_and_unknown_records() -> None:
    encoder = AguiEncoder("t", "r")

    def of(kind: str, **data: Any) -> list[str]:
        return [e.type.value for e in encoder.events_of(EventRecord("x", 1, kind, data))]

    assert of("reasoning_delta", delta="hmm") == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
    ]
    assert of("text_delta", delta="") == [
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
    ]  # an empty delta opens the message but sends no empty content
    snapshot = encoder.events_of(EventRecord("x", 2, "todo", {"todos": [{"content": "a"}]}))
    assert snapshot[0].model_dump()["snapshot"] == {"todos": [{"content": "a"}]}
    custom = encoder.events_of(EventRecord("x", 3, "handoff", {"from": "a", "to": "b"}))
    assert custom[0].model_dump()["name"] == "lovia.handoff"
    assert of("done", status="completed", output="ok") == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert of("text_delta", delta="late") == []  # nothing after the run finished


def _node() -> str | None:
    node = shutil.which("node")
    has_modules = (HERE / "node_modules" / "@ag-ui" / "client").is_dir()
    require(node is not None, "node is not installed")
    require(has_modules, "run `npm ci` in tests/web/agui (the @ag-ui/client package)")
    return node


async def _run_client(node: str, url: str, scenario: str, thread: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        node,
        str(HERE / "client.mjs"),
        f"{url}/api/agui",
        TOKEN,
        scenario,
        thread,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=HERE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    return result


async def test_the_official_client_runs_a_text_reply(make_app: Any, serve: Any) -> None:
    node = _node()
    assert node is not None
    live = await serve(make_app(scripted_agent(text("Hello from lovia")), token=TOKEN))
    result = await _run_client(node, live.url, "text", "official-text")
    [run] = result["runs"]
    assert run["error"] is None
    types = [e["type"] for e in run["events"]]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert {"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"} <= set(types)
    assistant = [m for m in result["messages"] if m["role"] == "assistant"]
    assert assistant[-1]["content"] == "Hello from lovia"


@pytest.mark.parametrize(
    ("scenario", "said"), [("approval", "deployed to prod"), ("deny", "denied")]
)
async def test_the_official_client_answers_an_approval_interrupt(
    make_app: Any, serve: Any, scenario: str, said: str
) -> None:
    node = _node()
    assert node is not None
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("All done."), tools=[deploy])
    live = await serve(make_app(agent, token=TOKEN))
    result = await _run_client(node, live.url, scenario, f"official-{scenario}")
    first, second = result["runs"]
    assert first["error"] is None and second["error"] is None
    [interrupt] = first["pendingInterrupts"]
    assert interrupt["id"] == "call_deploy" and interrupt["reason"] == "tool_approval"
    assert any(
        e["type"] == "CUSTOM" and e["name"] == "lovia.approval_required" for e in first["events"]
    )
    assert second["pendingInterrupts"] == []
    assert second["events"][-1]["type"] == "RUN_FINISHED"
    assert second["events"][-1]["result"] == "All done."
    by_role = {m["role"]: m for m in result["messages"]}
    assert said in by_role["tool"]["content"] and by_role["tool"]["toolCallId"] == "call_deploy"
    calls = [c for m in result["messages"] for c in m.get("toolCalls") or []]
    assert [c["function"]["name"] for c in calls] == ["deploy"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"env": "prod"}


async def test_the_official_client_without_the_token_gets_a_401(make_app: Any, serve: Any) -> None:
    node = _node()
    assert node is not None
    live = await serve(make_app(scripted_agent(text("x")), token="another-token"))
    result = await _run_client(node, live.url, "text", "official-401")
    assert result["runs"][0]["error"]["status"] == 401


async def test_a_client_that_disconnects_leaves_the_run_to_finish_headless(
    make_app: Any, serve: Any
) -> None:
    gate, agent = gated_agent(text("finished alone"))
    app = make_app(agent)
    live = await serve(app)
    async with live.client.stream("POST", "/api/agui", json=_input(thread="gone")) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                assert json.loads(line[6:])["type"] == "RUN_STARTED"
                break
        await gate.entered.wait()
    # the response is closed: the client is gone, and the run is still live
    supervisor = app.state.lovia.supervisor
    run = supervisor.live("gone")
    assert run is not None
    gate.open()
    records = [r async for r in supervisor.follow(run.run_id)]
    assert records[-1].type == "done" and records[-1].data["status"] == "completed"
    assert records[-1].data["output"] == "finished alone"


async def test_concurrent_requests_on_one_thread_never_break_the_stream(
    make_app: Any, serve: Any
) -> None:
    agent = scripted_agent(*[text(f"reply {i}") for i in range(40)])
    live = await serve(make_app(agent))

    async def post(i: int) -> tuple[int, list[dict[str, Any]]]:
        r = await live.client.post("/api/agui", json=_input(thread="busy", runId=f"r{i}"))
        if r.status_code != 200:
            return r.status_code, []
        return 200, [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: ")]

    results = await asyncio.gather(*(post(i) for i in range(12)))
    assert {status for status, _ in results} <= {200, 409}
    streams = [events for status, events in results if status == 200]
    assert streams
    for events in streams:
        assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"


async def test_an_interrupt_of_one_thread_cannot_be_answered_from_another(
    make_app: Any, asgi_client: Any
) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("x"), tools=[deploy])
    app = make_app(agent)
    client = await asgi_client(app)
    await _events(client, _input(thread="owner"))
    resume = [{"interruptId": "call_deploy", "status": "resolved", "payload": True}]
    r = await client.post("/api/agui", json=_input(thread="intruder", resume=resume))
    assert r.status_code == 404
    assert app.state.lovia.supervisor.approvals.pending("owner") == ["call_deploy"]
    await app.state.lovia.supervisor.stop("owner")
