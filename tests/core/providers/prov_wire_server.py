"""A real HTTP/1.1 server on 127.0.0.1 that answers each POST with scripted bytes.

Replies are served in order (the last one repeats), byte for byte as a vendor sent them,
so the adapters read them through httpx and a real socket. ``silent=True`` makes a server
that accepts the connection, reads the request and never answers (a hung endpoint);
``Reply(stall=True)`` answers part of a reply and then goes quiet.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from .prov_http_server import loopback


@dataclass(frozen=True)
class Reply:
    """One HTTP response: ``body`` is sent as is."""

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"
    stall: bool = False
    """Send ``body``, then keep the connection open without another byte (a stalled reply)."""


@dataclass
class WireServer:
    replies: Sequence[Reply]
    silent: bool = False
    url: str = ""
    paths: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            self.paths.append(lines[0].split(" ")[1])
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            raw = await reader.readexactly(length) if length else b""
            self.bodies.append(json.loads(raw) if raw else {})
            self.arrived.set()
            if self.silent:
                await self.stop.wait()  # never answer; released when the test ends
                return
            reply = self.replies[min(len(self.bodies) - 1, len(self.replies) - 1)]
            length = len(reply.body) + (1 if reply.stall else 0)  # a stall owes one more byte
            writer.write(
                (
                    f"HTTP/1.1 {reply.status} X\r\ncontent-type: {reply.content_type}\r\n"
                    f"content-length: {length}\r\nconnection: close\r\n\r\n"
                ).encode()
                + reply.body
            )
            await writer.drain()
            if reply.stall:
                await self.stop.wait()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away (a timeout on its side)
        finally:
            writer.close()


@asynccontextmanager
async def wire_server(*replies: Reply, silent: bool = False) -> AsyncIterator[WireServer]:
    """Serve ``replies`` on a free loopback port for the duration of the block."""
    server = WireServer(replies, silent=silent)
    async with loopback(server.handle, server.stop) as url:
        server.url = url
        yield server


def sse_lines(*lines: str) -> bytes:
    """An SSE body from raw lines, each frame ended by a blank line."""
    return "".join(f"{line}\n\n" for line in lines).encode()
