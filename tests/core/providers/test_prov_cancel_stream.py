"""Cancelling a run mid-stream closes the HTTP response: the server sees the client leave.

The server (a real socket on 127.0.0.1) sends the start of an SSE answer with no length
and keeps the response open; it then reads until the client closes the connection.
"""

from __future__ import annotations

import asyncio

from lovia import Agent, NoopContextPolicy, Runner
from lovia.events import Event, RunFailed, TextDelta
from lovia.exceptions import RunCancelled
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.retry import RetryPolicy

from .prov_http_server import loopback
from .prov_wire_server import sse_lines

PARTIAL = sse_lines('data: {"choices":[{"index":0,"delta":{"content":"The answer"}}]}')


async def test_a_cancel_mid_stream_closes_the_connection_to_the_server() -> None:
    release = asyncio.Event()
    client_left = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
                + f"{len(PARTIAL):x}\r\n".encode()
                + PARTIAL
                + b"\r\n"
            )
            await writer.drain()
            while await reader.read(1024):  # b"" once the client closed its end
                pass
            client_left.set()
        except ConnectionError:
            client_left.set()
        finally:
            writer.close()

    async with loopback(handle, release) as url:
        provider = OpenAIChatProvider("qwen", base_url=url + "/v1")
        agent = Agent(
            name="a",
            model=provider,
            context_policy=NoopContextPolicy(),
            retry=RetryPolicy(max_attempts=1),
        )
        handle_ = Runner.stream(agent, "hi")
        events: list[Event] = []

        async def consume() -> None:
            async for event in handle_:
                events.append(event)
                if isinstance(event, TextDelta):
                    handle_.cancel("stop")

        try:
            # The default read timeout is minutes: only the cancel can end these waits.
            await asyncio.wait_for(consume(), 5.0)
            await asyncio.wait_for(client_left.wait(), 5.0)
        finally:
            await provider.aclose()
    assert isinstance(events[-1], RunFailed) and isinstance(events[-1].error, RunCancelled)
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["The answer"]
