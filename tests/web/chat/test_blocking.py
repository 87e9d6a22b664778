"""``POST /api/chat``: one message run to its end in the request, not supervised."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia.exceptions import ProviderError
from lovia.messages import Usage
from lovia.testing import call, text

from ..conftest import chat, gated_agent, scripted_agent, until
from .conftest import Counter


async def test_a_blocking_chat_answers_with_output_session_and_full_usage(
    make_app: Any, asgi_client: Any
) -> None:
    usage = Usage(input_tokens=120, output_tokens=7, cache_read_tokens=100, cache_write_tokens=5)
    agent = scripted_agent(text("Bonjour ü", usage=usage), text("again"))
    app = make_app(agent)
    client = await asgi_client(app)
    r = await client.post("/api/chat", json={"message": "hello"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["output"] == "Bonjour ü"
    assert body["usage"] == {
        "input_tokens": 120,
        "output_tokens": 7,
        "total_tokens": 127,
        "cache_read_tokens": 100,
        "cache_write_tokens": 5,
        "requests": 1,
        "last_input_tokens": 120,
    }
    sid = body["session_id"]
    r = await client.post("/api/chat", json={"message": "more", "session_id": sid})
    assert r.json()["output"] == "again" and r.json()["session_id"] == sid
    detail = (await client.get(f"/api/sessions/{sid}")).json()
    assert detail["title"] == "hello" and detail["active_run_id"] is None
    assert [e["type"] for e in detail["entries"]] == ["input", "assistant_text"] * 2
    # Not supervised: no run was logged for the chat.
    assert await app.state.lovia.store.latest_run(sid) is None


async def test_an_empty_message_is_refused(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    for message in ("", "  \n "):
        r = await client.post("/api/chat", json={"message": message})
        assert r.status_code == 422 and "message" in r.json()["detail"]


async def test_a_blocking_chat_conflicts_with_a_streamed_run(make_app: Any, serve: Any) -> None:
    gate, agent = gated_agent(text("streamed"), text("blocking"))
    server = await serve(make_app(agent))
    async with chat(server.client, "stream it") as (session, frames):
        await gate.entered.wait()
        sid = session.data["session_id"]
        r = await server.client.post("/api/chat", json={"message": "now", "session_id": sid})
        assert r.status_code == 409 and "run in progress" in r.json()["detail"]
        gate.open()
        await until(frames, "done")
    r = await server.client.post("/api/chat", json={"message": "now", "session_id": sid})
    assert r.status_code == 200 and r.json()["output"] == "blocking"


async def test_a_stream_cannot_start_while_a_blocking_chat_holds_the_chat(
    make_app: Any, serve: Any
) -> None:
    # (One uvicorn per test: nested in-process servers restore each other's signal handlers
    # out of order, which sse-starlette then reads as a shutdown in later tests.)
    gate2, agent2 = gated_agent(text("late"))
    server2 = await serve(make_app(agent2))
    blocking = asyncio.create_task(
        server2.client.post("/api/chat", json={"message": "block", "session_id": "held"})
    )
    await gate2.entered.wait()
    r = await server2.client.post("/api/chat/stream", json={"message": "x", "session_id": "held"})
    assert r.status_code == 409 and "blocking chat" in r.json()["detail"]
    gate2.open()
    assert (await blocking).json()["output"] == "late"


async def test_a_chat_keeps_its_stored_agent_unless_that_agent_is_gone(
    make_app: Any, asgi_client: Any
) -> None:
    first = {"a": scripted_agent(text("a1"), text("a2"), name="a"), "b": scripted_agent(name="b")}
    client = await asgi_client(make_app(first))
    r = await client.post("/api/chat", json={"message": "hi", "agent": "a"})
    sid = r.json()["session_id"]
    r = await client.post("/api/chat", json={"message": "hi", "agent": "b", "session_id": sid})
    assert r.json()["output"] == "a2"  # the chat's own agent, not the requested one
    # A server without "a" (same database): the requested agent takes over the chat.
    second = {"b": scripted_agent(text("b1"), name="b"), "c": scripted_agent(name="c")}
    other = await asgi_client(make_app(second))
    r = await other.post("/api/chat", json={"message": "hi", "agent": "b", "session_id": sid})
    assert r.status_code == 200 and r.json()["output"] == "b1"
    r = await other.post("/api/chat", json={"message": "hi", "session_id": sid})
    assert r.status_code == 404 and "several agents" in r.json()["detail"]
    r = await other.post("/api/chat", json={"message": "hi", "agent": "zz", "session_id": sid})
    assert r.status_code == 404 and "unknown agent 'zz'" in r.json()["detail"]


async def test_a_blocking_run_that_fails_is_a_502_naming_the_error(
    make_app: Any, asgi_client: Any
) -> None:
    note = Counter()
    agent = scripted_agent(
        call("note"),
        ProviderError("the model is down", retryable=False),
        text("back"),
        tools=[note.tool],
    )
    app = make_app(agent)
    client = await asgi_client(app)
    r = await client.post("/api/chat", json={"message": "hi", "session_id": "s1"})
    assert r.status_code == 502
    assert r.json()["detail"] == "the run failed: ProviderError: the model is down"
    # Its turns so far are kept, as a streamed run's would be.
    detail = (await client.get("/api/sessions/s1")).json()
    assert [e["type"] for e in detail["entries"]] == ["input", "tool_call", "tool_result"]
    assert detail["active_run_id"] is None
    # The chat is free again: the next message runs.
    r = await client.post("/api/chat", json={"message": "hi", "session_id": "s1"})
    assert r.status_code == 200 and r.json()["output"] == "back"


async def test_a_blocking_run_that_breaks_unexpectedly_is_a_502_without_internals(
    make_app: Any, asgi_client: Any
) -> None:
    agent = scripted_agent(RuntimeError("secret detail at /work/internal/path.py"))
    client = await asgi_client(make_app(agent))
    r = await client.post("/api/chat", json={"message": "hi"})
    assert r.status_code == 502
    assert r.json()["detail"] == "the run failed: RuntimeError"
    assert "/work" not in r.text and "secret" not in r.text
