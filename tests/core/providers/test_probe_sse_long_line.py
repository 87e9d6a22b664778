"""One very long SSE line (a base64 image in a single event, or a broken proxy streaming a
file) must cost linear time: the parser copied the open line on every network chunk, so
a 32 MB line blocked the event loop, and every run on it, for tens of seconds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from lovia.providers.base import ModelDelta
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.sse import SSEEvent, iter_sse

from .prov_helpers import assemble
from .prov_wire_server import Reply, sse_lines, wire_server

SIZE = 32 * 1024 * 1024


async def test_a_32_mb_event_streams_without_quadratic_buffering() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "x" * SIZE}, "finish_reason": None}]}
    body = sse_lines(
        "data: " + json.dumps(chunk),
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        "data: [DONE]",
    )
    async with wire_server(Reply(body)) as srv:
        provider = OpenAIChatProvider("qwen", base_url=srv.url + "/v1")
        try:
            # Linear parsing takes well under a second here; quadratic took over a minute.
            deltas = await asyncio.wait_for(_collect(provider), 30)
        finally:
            await provider.aclose()
    turn = assemble(deltas)
    assert len(turn.text) == SIZE and turn.finish == "stop"


async def _collect(provider: OpenAIChatProvider) -> list[ModelDelta]:
    return [d async for d in provider.stream([])]


async def test_iter_sse_joins_a_long_line_once_whatever_the_chunking() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"event: image\ndata: "
        piece = b"A" * 16_384  # a small network read, as a slow link delivers them
        for _ in range(32 * 64):  # 32 MB in one line
            await asyncio.sleep(0)  # a real read suspends: lets the deadline fire
            yield piece
        yield b"\n\n"

    async def events() -> list[SSEEvent]:
        return [e async for e in iter_sse(chunks())]

    # Linear: a fraction of a second. Quadratic (a copy per chunk): about a minute.
    (event,) = await asyncio.wait_for(events(), 15)
    assert event.event == "image" and len(event.data) == 32 * 1024 * 1024
