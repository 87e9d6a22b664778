"""``/api/events`` under hundreds of subscribers that come and go, on a real uvicorn."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from ..conftest import scripted_agent

SUBSCRIBERS = 500


async def _subscribed(client: httpx.AsyncClient) -> tuple[Any, Any]:
    cm = client.stream("GET", "/api/events")
    response = await cm.__aenter__()
    lines = response.aiter_lines()
    first = await anext(lines)
    assert first.startswith(": subscribed after seq"), first
    return cm, lines


async def _until_subscribers(bus: Any, count: int) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while bus.subscribers != count:
        assert asyncio.get_running_loop().time() < deadline, (bus.subscribers, count)
        await asyncio.sleep(0.02)  # a real socket close: polled, bounded


async def test_five_hundred_subscribers_that_disconnect_leave_nothing_behind(
    make_app: Any, serve: Any
) -> None:
    app = make_app(scripted_agent())
    server = await serve(app)
    bus = app.state.lovia.lifecycle.bus
    limits = httpx.Limits(max_connections=SUBSCRIBERS + 10)
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as client:
        streams = await asyncio.gather(*(_subscribed(client) for _ in range(SUBSCRIBERS)))
        assert bus.subscribers == SUBSCRIBERS
        # Half hang up without reading anything more.
        await asyncio.gather(*(cm.__aexit__(None, None, None) for cm, _ in streams[::2]))
        await _until_subscribers(bus, SUBSCRIBERS // 2)
        bus.publish("config_changed", {"what": "probe"})
        for _, lines in streams[1::2]:
            got = [await anext(lines) for _ in range(4)]
            assert "event: config_changed" in got
        await asyncio.gather(*(cm.__aexit__(None, None, None) for cm, _ in streams[1::2]))
        await _until_subscribers(bus, 0)
