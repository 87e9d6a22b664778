"""Hostile probes of the chat layer: odd resume ids, unknown ids, AG-UI edge bodies."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia.testing import text

from ..conftest import chat, read_frames, scripted_agent, until


async def test_a_last_event_id_past_the_store_range_is_a_422(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app(scripted_agent(text("hi"))))
    async with chat(client, "hi") as (session, frames):
        await until(frames, "done")
    sid = session.data["session_id"]
    for value in ("99999999999999999999999", str(2**63)):
        r = await asyncio.wait_for(
            client.get(
                "/api/chat/stream", params={"session_id": sid}, headers={"Last-Event-ID": value}
            ),
            10,
        )
        assert r.status_code == 422 and "Last-Event-ID" in r.json()["detail"], r.text
        r = await asyncio.wait_for(
            client.get("/api/chat/stream", params={"session_id": sid, "last_event_id": value}), 10
        )
        assert r.status_code == 422 and "last_event_id" in r.json()["detail"], r.text
    # the largest storable id: a stream with nothing after it, which ends
    async with client.stream(
        "GET",
        "/api/chat/stream",
        params={"session_id": sid},
        headers={"Last-Event-ID": str(2**63 - 1)},
    ) as r:
        assert r.status_code == 200
        got = await asyncio.wait_for(_all(read_frames(r)), 10)
    assert [f.event for f in got] == ["session"]
    for value in ("-1", "abc", "1.5", ""):
        r = await asyncio.wait_for(
            client.get(
                "/api/chat/stream", params={"session_id": sid}, headers={"Last-Event-ID": value}
            ),
            10,
        )
        assert r.status_code == 422 and "Last-Event-ID" in r.json()["detail"], (value, r.text)


async def _all(frames: Any) -> list[Any]:
    return [f async for f in frames]


async def test_agui_odd_bodies(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent(text("hi"))))
    base = {
        "threadId": "t1",
        "runId": "r1",
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    bodies = [
        {k: v for k, v in base.items() if k != "threadId"},
        {**base, "threadId": "../x"},
        {**base, "messages": [{"id": "m", "role": "user", "content": ""}]},
        {
            **base,
            "messages": [{"id": "m", "role": "user", "content": "hi"}],
            "forwardedProps": {"agent": "nope"},
        },
        {**base, "resume": [{"interruptId": "zzz", "status": "resolved", "payload": True}]},
        {**base, "messages": [{"id": "m", "role": "bogus", "content": "hi"}]},
        {
            **base,
            "forwardedProps": 5,
            "messages": [
                {
                    "id": "m",
                    "role": "user",
                    "content": [{"type": "binary", "mimeType": "image/png"}],
                }
            ],
        },
        [1, 2],
        "x",
    ]
    for body in bodies:
        r = await asyncio.wait_for(client.post("/api/agui", json=body), 10)

        assert 400 <= r.status_code < 500, (body, r.status_code, r.text)
