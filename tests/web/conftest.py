"""Fixtures for the web tests: gated scripted agents, an in-process client, a real uvicorn."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from lovia import Agent, tool
from lovia.testing import ScriptedProvider, ScriptStep, call
from lovia.tools.base import Tool
from lovia.web import create_app


class Gate:
    """A tool the scripted model calls to park a run until the test opens the gate.

    ``entered`` is set when the tool starts, so a test knows the run is mid-flight without
    sleeping; ``open()`` lets the tool return.
    """

    def __init__(self, name: str = "wait_gate") -> None:
        self.entered = asyncio.Event()
        self._open = asyncio.Event()

        async def wait_gate() -> str:
            """Wait until the test opens the gate."""
            self.entered.set()
            await self._open.wait()
            return "gate opened"

        self.tool: Tool = tool(name=name)(wait_gate)

    def open(self) -> None:
        self._open.set()


@tool(needs_approval=True)
def deploy(env: str) -> str:
    """Deploy the app to ``env``."""
    return f"deployed to {env}"


def scripted_agent(
    *script: ScriptStep, tools: list[Tool] | None = None, name: str = "helper"
) -> Agent[Any]:
    return Agent(name=name, model=ScriptedProvider(list(script)), tools=tools or [])


def gated_agent(*after: ScriptStep) -> tuple[Gate, Agent[Any]]:
    """An agent whose run parks in the gate tool first, then replays ``after``."""
    gate = Gate()
    return gate, scripted_agent(call("wait_gate"), *after, tools=[gate.tool])


@dataclass
class Frame:
    """One SSE frame as a client sees it."""

    event: str
    id: str | None
    data: dict[str, Any]


async def read_frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Parse a streaming ``text/event-stream`` response frame by frame (comments skipped)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "event" in fields or "data" in fields:
                yield Frame(
                    fields.get("event", "message"),
                    fields.get("id"),
                    json.loads(fields.get("data", "null")),
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        fields[key] = value[1:] if value.startswith(" ") else value


async def frames_until_done(response: httpx.Response) -> list[Frame]:
    return await until(read_frames(response), "done")


@asynccontextmanager
async def chat(
    client: httpx.AsyncClient, message: str, **body: Any
) -> AsyncIterator[tuple[Frame, AsyncIterator[Frame]]]:
    """POST a chat message; yields the stream's ``session`` frame and the frames after it."""
    async with client.stream("POST", "/api/chat/stream", json={"message": message, **body}) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        frames = read_frames(r)
        session = await anext(frames)
        assert session.event == "session"
        yield session, frames


async def until(frames: AsyncIterator[Frame], event: str) -> list[Frame]:
    """Read frames up to and including the first ``event`` one."""
    out = []
    async for frame in frames:
        out.append(frame)
        if frame.event == event:
            break
    return out


async def resume(
    client: httpx.AsyncClient,
    session_id: str,
    *,
    headers: dict[str, str] | None = None,
    **query: Any,
) -> list[Frame]:
    """``GET /api/chat/stream`` for the session, read to ``done``."""
    params = {"session_id": session_id, **query}
    async with client.stream("GET", "/api/chat/stream", params=params, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        return await frames_until_done(r)


@dataclass
class LiveServer:
    app: FastAPI
    url: str
    client: httpx.AsyncClient
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def stop(self) -> None:
        """Shut the server down (its lifespan closes the supervisor and the store)."""
        if not self.task.done():
            await self.client.aclose()
            self.server.should_exit = True
            await asyncio.wait_for(self.task, 30)


@pytest.fixture
def make_app(tmp_path: Path) -> Callable[..., FastAPI]:
    def make(agents: Any, **options: Any) -> FastAPI:
        options.setdefault("db_path", tmp_path / "chat.db")
        options.setdefault("generate_titles", False)  # a scripted model has no title step
        return create_app(agents, **options)

    return make


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[FastAPI], Any]]:
    """``await serve(app)``: run ``app`` on a real uvicorn bound to 127.0.0.1:<free port>, in
    the test's own event loop (so gates are plain asyncio events); stopped at teardown."""
    servers: list[LiveServer] = []

    async def start(app: FastAPI) -> LiveServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        # uvicorn exposes only a flag for "listening"; its startup takes a few loop turns.
        deadline = asyncio.get_running_loop().time() + 10
        while not server.started:
            if task.done():
                task.result()
            assert asyncio.get_running_loop().time() < deadline, "uvicorn did not start"
            await asyncio.sleep(0.005)
        url = f"http://127.0.0.1:{port}"
        client = httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30.0))
        live = LiveServer(app, url, client, server, task)
        servers.append(live)
        return live

    yield start
    for live in servers:
        await live.stop()


@pytest.fixture
async def asgi_client() -> AsyncIterator[Callable[[FastAPI], Any]]:
    """``await asgi_client(app)``: an in-process httpx client with the app's lifespan running."""
    stack: list[tuple[Any, httpx.AsyncClient]] = []

    async def start(app: FastAPI) -> httpx.AsyncClient:
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        client = httpx.AsyncClient(transport=transport, base_url="http://testserver")
        stack.append((lifespan, client))
        return client

    yield start
    for lifespan, client in reversed(stack):
        await client.aclose()
        await lifespan.__aexit__(None, None, None)
