"""A tiny real HTTP/1.1 server on 127.0.0.1 for JSON endpoints (``/models`` probes)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class JsonServer:
    routes: dict[str, tuple[int, Any]]
    url: str = ""
    hits: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ", 2)[1].decode()
        self.hits.append(path)
        self.arrived.set()
        await self.release.wait()
        status, payload = self.routes.get(path, (404, {"error": "not found"}))
        if status in (301, 302, 307):
            head = (
                f"HTTP/1.1 {status} Moved\r\nlocation: {payload}\r\ncontent-length: "
                f"0\r\nconnection: close\r\n\r\n"
            )
            writer.write(head.encode())
        else:
            data = json.dumps(payload).encode()
            head = (
                f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: "
                f"{len(data)}\r\nconnection: close\r\n\r\n"
            )
            writer.write(head.encode() + data)
        await writer.drain()
        writer.close()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def loopback(handle: Handler, release: asyncio.Event) -> AsyncIterator[str]:
    """Serve ``handle`` on a free 127.0.0.1 port and yield its URL; on the way out set
    ``release`` (so held handlers finish) and stop the server."""
    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    finally:
        release.set()
        srv.close()
        await srv.wait_closed()


@asynccontextmanager
async def json_server(
    routes: dict[str, tuple[int, Any]], *, hold: bool = False
) -> AsyncIterator[JsonServer]:
    """Serve ``routes`` (path -> (status, JSON or redirect target)); with ``hold``, replies wait
    until ``server.release`` is set."""
    server = JsonServer(routes)
    if not hold:
        server.release.set()
    async with loopback(server.handle, server.release) as url:
        server.url = url
        yield server
