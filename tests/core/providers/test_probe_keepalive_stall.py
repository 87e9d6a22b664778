"""A reply that stalls behind keep-alives: the server (OpenRouter's ``: OPENROUTER
PROCESSING`` comments, Anthropic's ``event: ping``) keeps the connection busy while the
model behind it never answers. Bytes keep arriving, so httpx's read timeout never fires;
the read timeout must still bound the silence between real events, or the run hangs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from lovia import Agent, NoopContextPolicy, Runner
from lovia.exceptions import ProviderError
from lovia.http_config import ProviderTimeouts
from lovia.providers import AnthropicProvider, OpenAIChatProvider
from lovia.retry import RetryPolicy

from .prov_http_server import loopback

TEXT = {"choices": [{"index": 0, "delta": {"content": "The answer"}, "finish_reason": None}]}


def _keepalive_server(
    opening: bytes, keepalive: bytes, release: asyncio.Event
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            if head.startswith(b"GET"):  # the /models probe: nothing to say
                writer.write(b"HTTP/1.1 404 X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"connection: close\r\n\r\n" + opening
            )
            while not release.is_set():  # keep-alives, and never another event
                writer.write(keepalive)
                await writer.drain()
                try:
                    await asyncio.wait_for(release.wait(), 0.05)
                except asyncio.TimeoutError:
                    pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return handle


@pytest.mark.parametrize(
    ("vendor", "opening", "keepalive"),
    [
        ("openai", b"", b": OPENROUTER PROCESSING\n\n"),
        ("openai", b"data: " + json.dumps(TEXT).encode() + b"\n\n", b": keep-alive\n\n"),
        ("anthropic", b"", b'event: ping\ndata: {"type": "ping"}\n\n'),
    ],
)
async def test_keepalives_alone_fail_at_the_read_timeout(
    vendor: str, opening: bytes, keepalive: bytes
) -> None:
    release = asyncio.Event()
    limits = ProviderTimeouts(read=0.5, first_byte=0.5)
    async with loopback(_keepalive_server(opening, keepalive, release), release) as url:
        if vendor == "openai":
            provider: OpenAIChatProvider | AnthropicProvider = OpenAIChatProvider(
                "m", base_url=url + "/v1", timeout=limits
            )
        else:
            provider = AnthropicProvider("claude-x", base_url=url, api_key="k", timeout=limits)
        agent = Agent(
            name="a",
            model=provider,
            context_policy=NoopContextPolicy(),
            retry=RetryPolicy(max_attempts=1),
        )
        try:
            with pytest.raises(ProviderError) as caught:
                await asyncio.wait_for(Runner.run(agent, "hi"), 10)
        finally:
            await provider.aclose()
    assert caught.value.retryable
    assert "sent only keep-alives for 0.5 s" in caught.value.message


async def test_a_long_event_arriving_in_pieces_is_not_a_stall() -> None:
    release = asyncio.Event()
    text = "x" * 4000
    event = (
        b"data: "
        + json.dumps(
            {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        ).encode()
    )
    pieces = [event[i : i + 400] for i in range(0, len(event), 400)]  # 11 pieces, 0.1 s apart
    finish = b'\n\ndata: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        for line in head.decode("latin-1").split("\r\n")[1:]:
            if line.lower().startswith("content-length:"):
                await reader.readexactly(int(line.split(":")[1]))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.1)
        writer.write(finish + b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async with loopback(handle, release) as url:
        provider = OpenAIChatProvider(
            "m", base_url=url + "/v1", timeout=ProviderTimeouts(read=0.5, first_byte=0.5)
        )
        agent = Agent(name="a", model=provider, context_policy=NoopContextPolicy(), retry=None)
        try:
            result = await asyncio.wait_for(Runner.run(agent, "hi"), 10)
        finally:
            await provider.aclose()
    assert result.output == text
