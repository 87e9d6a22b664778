"""MCP against the real servers people run: server-everything (npm, stdio and streamable
HTTP), mcp-server-time and mcp-server-git (PyPI). Each test starts its servers and stops them;
nothing reaches the internet. See mcp_peers.py for where they are installed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, NoopContextPolicy, Runner
from lovia.exceptions import MCPError
from lovia.plugins.mcp import (
    MCP,
    MCPConnection,
    MCPServerStateChanged,
    MCPServerStdio,
    MCPServerStreamableHTTP,
    render_mcp_content,
)
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolResultEntry

from tests.plugins.mcp_peers import everything_stdio, http_server, venv_server
from tests.plugins.test_mcp import assert_paired


def outputs(entries: list[Any]) -> dict[str, ToolResultEntry]:
    return {e.call_id: e for e in entries if isinstance(e, ToolResultEntry)}


async def run(plugin: MCP, script: list[Any]) -> tuple[Any, ScriptedProvider]:
    model = ScriptedProvider(script)
    agent = Agent(name="a", model=model, plugins=[plugin], context_policy=NoopContextPolicy())
    result = await Runner.run(agent, "go")
    assert_paired(result.entries)
    return result, model


# -- server-everything over stdio ---------------------------------------------------------


async def test_everything_stdio_end_to_end_in_a_run() -> None:
    plugin = MCP(everything_stdio(name="ev", exclude_tools=["get-env"]))
    script = [
        batch(
            ("ev__echo", {"message": "hello"}, "c1"),
            ("ev__get-sum", {"a": 2, "b": 3}, "c2"),
            ("ev__get-tiny-image", {}, "c3"),
            ("ev__get-resource-links", {"count": 2}, "c4"),
        ),
        text("all done"),
    ]
    result, model = await run(plugin, script)
    offered = set(model.tools[0])
    assert {"ev__echo", "ev__get-sum", "ev__get-tiny-image"} <= offered
    assert "ev__get-env" not in offered
    by_id = outputs(result.entries)
    assert by_id["c1"].output == "Echo: hello"
    assert "5" in by_id["c2"].output
    image = by_id["c3"].output
    assert "[image: image/png," in image and len(image) < 500  # a placeholder, not base64
    assert by_id["c4"].output.count("[resource link: ") == 2
    assert result.output == "all done"


async def test_everything_killed_mid_session_reconnects(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    states: list[MCPServerStateChanged] = []
    async with MCPConnection(everything_stdio(pid_file, name="ev"), on_state=states.append) as c:
        first_pid = int(pid_file.read_text())
        assert render_mcp_content(await c.call_tool("echo", {"message": "a"})) == "Echo: a"
        os.kill(first_pid, signal.SIGKILL)
        reply = await c.call_tool("echo", {"message": "b"})  # reconnects, retries once
        assert render_mcp_content(reply) == "Echo: b"
        assert int(pid_file.read_text()) != first_pid  # a new process answered
    assert [s.state for s in states] == ["starting", "ready", "reconnecting", "ready", "closed"]


async def test_everything_slow_tool_past_its_deadline_is_cancelled() -> None:
    async with everything_stdio(name="ev", timeout=0.5).session() as c:
        with pytest.raises(MCPError, match="timed out after 0.5 s; the call was cancelled"):
            await c.call_tool("trigger-long-running-operation", {"duration": 30, "steps": 3})
        # The connection is not blocked by the abandoned call.
        reply = await c.call_tool("echo", {"message": "still here"}, timeout=10)
        assert render_mcp_content(reply) == "Echo: still here"
        assert c.state == "ready"


# -- server-everything over streamable HTTP ------------------------------------------------


async def test_everything_http_session_expiry_reinitialises() -> None:
    states: list[MCPServerStateChanged] = []
    with http_server() as server:
        config = MCPServerStreamableHTTP(url=server.url, name="web")
        async with MCPConnection(config, on_state=states.append) as c:
            assert render_mcp_content(await c.call_tool("echo", {"message": "1"})) == "Echo: 1"
            await asyncio.to_thread(server.restart)  # the new process knows no session id: 404
            assert render_mcp_content(await c.call_tool("echo", {"message": "2"})) == "Echo: 2"
    assert [s.state for s in states] == ["starting", "ready", "reconnecting", "ready", "closed"]
    assert "Server returned an error response" in (states[2].error or "")  # its bare 400


async def test_a_stateless_http_server_survives_a_restart_without_reconnecting(
    tmp_path: Path,
) -> None:
    # The fixture server speaks the 2026-07-28 protocol: no session id, so nothing expires.
    states: list[MCPServerStateChanged] = []
    with http_server(fixture=tmp_path) as server:
        config = MCPServerStreamableHTTP(url=server.url, name="fx")
        async with MCPConnection(config, on_state=states.append) as c:
            assert render_mcp_content(await c.call_tool("echo", {"text": "1"})) == "echo: 1"
            await asyncio.to_thread(server.restart)
            assert render_mcp_content(await c.call_tool("echo", {"text": "2"})) == "echo: 2"
    assert [s.state for s in states] == ["starting", "ready", "closed"]


async def test_everything_http_end_to_end_in_a_run() -> None:
    with http_server() as server:
        plugin = MCP(MCPServerStreamableHTTP(url=server.url, name="web", include_tools=["echo"]))
        result, model = await run(
            plugin, [call("web__echo", {"message": "hi"}, call_id="c1"), text("ok")]
        )
    assert model.tools[0] == ("web__echo",)
    assert outputs(result.entries)["c1"].output == "Echo: hi"


async def test_a_stopped_http_server_is_a_clear_start_error() -> None:
    with http_server() as server:
        url = server.url
    with pytest.raises(MCPError, match="failed to start"):
        await MCPServerStreamableHTTP(url=url, connect_timeout=10).session().open()


# -- mcp-server-time and mcp-server-git ---------------------------------------------------


async def test_mcp_server_time_in_a_run() -> None:
    server = MCPServerStdio(
        command=venv_server("mcp-server-time"), args=["--local-timezone", "UTC"], name="time"
    )
    result, model = await run(
        MCP(server),
        [call("time__get_current_time", {"timezone": "Europe/Paris"}, call_id="c1"), text("ok")],
    )
    assert {"time__get_current_time", "time__convert_time"} <= set(model.tools[0])
    assert "Europe/Paris" in outputs(result.entries)["c1"].output


async def test_mcp_server_git_with_a_deferred_catalog(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "new.txt").write_text("hello")
    server = MCPServerStdio(command=venv_server("mcp-server-git"), name="git", defer=True)
    script = [
        call("search_mcp_tools", {"query": "status"}, call_id="s1"),
        call(
            "call_mcp_tool",
            {"name": "git__git_status", "arguments": {"repo_path": str(repo)}},
            call_id="k1",
        ),
        text("clean enough"),
    ]
    result, model = await run(MCP(server), script)
    assert set(model.tools[0]) == {"search_mcp_tools", "call_mcp_tool"}
    by_id = outputs(result.entries)
    assert by_id["s1"].output.startswith("- git__git_status:")
    assert "new.txt" in by_id["k1"].output


async def test_one_dead_server_among_real_ones_still_answers() -> None:
    time_server = MCPServerStdio(command=venv_server("mcp-server-time"), name="time")
    dead = MCPServerStdio(command="node", args=["/nonexistent/server.js"], name="dead")
    plugin = MCP(dead, time_server, everything_stdio(name="ev", include_tools=["echo"]))
    result, model = await run(
        plugin,
        [
            batch(
                ("time__get_current_time", {"timezone": "UTC"}, "c1"),
                ("ev__echo", {"message": "x"}, "c2"),
            ),
            text("answered"),
        ],
    )
    assert result.output == "answered"
    by_id = outputs(result.entries)
    assert "UTC" in by_id["c1"].output and by_id["c2"].output == "Echo: x"
    assert "Cannot find module" in model.calls[0][0].content or "dead" in model.calls[0][0].content
