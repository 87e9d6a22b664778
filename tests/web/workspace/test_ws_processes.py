"""Chat-scoped workspace sessions: a background process outlives a run, not its chat."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import httpx
from lovia import Agent
from lovia.testing import ScriptedProvider, call, text
from lovia.web.workspaces import WorkspaceRegistry
from lovia.workspace import Workspace

from ..conftest import chat, until
from .conftest import ws_agent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _serving(port: int, *, up: bool, deadline: float = 15.0) -> bool:
    """Poll until the port answers HTTP (``up``) or refuses (not ``up``); a real
    subprocess starts and dies on its own clock, so this polls with a bounded deadline."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    async with httpx.AsyncClient(timeout=2.0) as client:
        while loop.time() < end:
            try:
                await client.get(f"http://127.0.0.1:{port}/")
                answered = True
            except httpx.TransportError:
                answered = False
            if answered == up:
                return True
            await asyncio.sleep(0.05)
    return False


def _server_agent(root: Path, port: int) -> Agent[Any]:
    command = f"{sys.executable} -m http.server {port} --bind 127.0.0.1"
    return ws_agent(
        root,
        call("shell", {"command": command, "background": True, "description": "dev server"}),
        text("started"),
        call("read_process_output", {"process_id": "p1"}),
        text("still up"),
        mode="trusted",
    )


async def test_a_dev_server_survives_the_next_turn_and_dies_with_the_chat(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    port = _free_port()
    client = await asgi_client(make_app(_server_agent(root, port)))
    async with chat(client, "start the dev server") as (session, frames):
        done = await until(frames, "done")
    sid = session.data["session_id"]
    assert done[-1].data["status"] == "completed"
    assert await _serving(port, up=True), "the background server never answered"

    listed = (await client.get(f"/api/sessions/{sid}/processes")).json()
    assert listed["processes"][0]["process_id"] == "p1"
    assert listed["processes"][0]["state"] == "running"
    assert listed["processes"][0]["description"] == "dev server"

    async with chat(client, "is it still up?", session_id=sid) as (_, frames):
        second = await until(frames, "done")
    results = [f.data for f in second if f.event == "tool_result"]
    assert results and "running" in str(results[0]["result"])
    assert await _serving(port, up=True)

    assert (await client.delete(f"/api/sessions/{sid}")).status_code == 204
    assert await _serving(port, up=False), "the server outlived its chat"
    assert (await client.get(f"/api/sessions/{sid}/processes")).status_code == 404


async def test_the_server_shutdown_kills_the_chats_processes(make_app: Any, root: Path) -> None:
    from ..conftest import read_frames

    port = _free_port()
    app = make_app(_server_agent(root, port))
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            async with client.stream("POST", "/api/chat/stream", json={"message": "go"}) as r:
                await until(read_frames(r), "done")
            assert await _serving(port, up=True)
        sid = (await _session_ids(app))[0]
    finally:
        await lifespan.__aexit__(None, None, None)
    assert await _serving(port, up=False), "the server outlived the app"
    # a restarted server knows the chat, not its processes: they are never restored
    restarted = make_app(_server_agent(root, port))
    async with restarted.router.lifespan_context(restarted):
        transport = httpx.ASGITransport(app=restarted)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            listed = await client.get(f"/api/sessions/{sid}/processes")
    assert listed.status_code == 200 and listed.json()["processes"] == []


async def _session_ids(app: Any) -> list[str]:
    metas = await app.state.lovia.store.list_sessions(limit=10, offset=0, query=None)
    return [m.id for m in metas]


async def test_kill_returns_the_refreshed_list_and_unknown_ids_are_404(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    agent = ws_agent(
        root,
        call("shell", {"command": "sleep 300", "background": True}),
        text("sleeping"),
        mode="trusted",
    )
    client = await asgi_client(make_app(agent))
    async with chat(client, "sleep") as (session, frames):
        await until(frames, "done")
    sid = session.data["session_id"]
    killed = await client.post(f"/api/sessions/{sid}/processes/p1/kill")
    assert killed.status_code == 200
    assert [p["state"] for p in killed.json()["processes"]] == ["killed"]
    assert (await client.post(f"/api/sessions/{sid}/processes/p9/kill")).status_code == 404
    assert (await client.post(f"/api/sessions/{sid}/processes/x;y/kill")).status_code in (404, 422)
    assert (await client.get("/api/sessions/nope/processes")).status_code == 404
    assert (await client.get("/api/sessions/a%20b/processes")).status_code == 422


async def test_a_chat_without_a_workspace_lists_no_processes(
    make_app: Any, asgi_client: Any
) -> None:
    agent = Agent(name="plain", model=ScriptedProvider([text("hi")]))
    client = await asgi_client(make_app(agent))
    async with chat(client, "hi") as (session, frames):
        await until(frames, "done")
    sid = session.data["session_id"]
    assert (await client.get(f"/api/sessions/{sid}/processes")).json()["processes"] == []


async def test_the_registry_binds_once_per_chat_and_rebinds_on_a_new_workspace(
    root: Path,
) -> None:
    registry = WorkspaceRegistry()
    agent = ws_agent(root, mode="trusted")
    first = await registry.agent_for("c1", agent)
    again = await registry.agent_for("c1", agent)
    other = await registry.agent_for("c2", agent)
    assert first.workspace is again.workspace and first.workspace is not other.workspace
    assert agent.workspace is not first.workspace  # the configured agent is untouched
    old = registry.session("c1")
    assert old is not None
    reconfigured = agent.clone(workspace=Workspace.local(root, mode="readonly"))
    rebound = await registry.agent_for("c1", reconfigured)
    assert old.closed and registry.session("c1") is not old
    assert rebound.workspace is not first.workspace
    await registry.release("c1")
    assert registry.session("c1") is None and len(registry) == 1
    await registry.aclose()
    assert len(registry) == 0
    # closed: agents pass through, nothing is bound any more
    assert await registry.agent_for("c3", agent) is agent


async def test_non_local_workspaces_pass_through(root: Path) -> None:
    registry = WorkspaceRegistry()
    plain = Agent(name="plain", model=ScriptedProvider([]))
    assert await registry.agent_for("c", plain) is plain
    bound = plain.clone(workspace=Workspace.local(root).bind(await Workspace.local(root).open()))
    assert await registry.agent_for("c", bound) is bound
    assert len(registry) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too: its group was killed, only the reaping is pending
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


async def _gone(pids: list[int], deadline: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while loop.time() < end:
        if not any(_alive(p) for p in pids):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_release_all_kills_every_chats_process_groups(root: Path) -> None:
    registry = WorkspaceRegistry()
    agent = ws_agent(root, mode="trusted")
    chats = [f"chat{i}" for i in range(10)]
    agents = await asyncio.gather(*(registry.agent_for(c, agent) for c in chats))
    assert len({id(a.workspace) for a in agents}) == 10
    pids = []
    for chat_id in chats:
        session = registry.session(chat_id)
        assert session is not None
        # a child of the shell: the whole group must die, not only the shell
        pids.append((await session.spawn("sleep 300 & sleep 300; wait")).pid)
    assert all(_alive(p) for p in pids)
    await registry.release_all()
    assert await _gone(pids)
    assert len(registry) == 0 and all(registry.processes(c) == [] for c in chats)


async def test_a_bind_racing_the_shutdown_leaves_nothing_open(root: Path) -> None:
    registry = WorkspaceRegistry()
    agent = ws_agent(root, mode="trusted")
    binding, _ = await asyncio.gather(registry.agent_for("c", agent), registry.aclose())
    assert len(registry) == 0
    workspace: Any = binding.workspace
    session = getattr(workspace, "session", None)
    assert session is None or session.closed
