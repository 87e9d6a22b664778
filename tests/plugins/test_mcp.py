"""MCP plugin against the fixture server (a real stdio subprocess whose answers we control).

Real-peer tests (server-everything, mcp-server-time, mcp-server-git) live in
test_mcp_servers.py.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, CancelToken, NoopContextPolicy, Runner
from lovia.exceptions import MCPError, RunCancelled, UserError
from lovia.plugins.mcp import (
    MCP,
    MCPConnection,
    MCPServerStateChanged,
    MCPServerStdio,
    MCPServerStreamableHTTP,
    MCPToolResult,
    normalize_schema,
    render_mcp_content,
)
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry

from tests.plugins.mcp_peers import fixture_command, fixture_server


def assert_paired(entries: list[TranscriptEntry]) -> None:
    calls = [e.call_id for e in entries if isinstance(e, ToolCallEntry)]
    results = [e.call_id for e in entries if isinstance(e, ToolResultEntry)]
    assert sorted(calls) == sorted(results)


def results(entries: list[TranscriptEntry]) -> dict[str, ToolResultEntry]:
    return {e.call_id: e for e in entries if isinstance(e, ToolResultEntry)}


async def run(plugin: MCP, script: list[Any], **agent_options: Any) -> Any:
    model = ScriptedProvider(script)
    agent_options.setdefault("context_policy", NoopContextPolicy())  # no recall tool offered
    agent = Agent(name="a", model=model, plugins=[plugin], **agent_options)
    result = await Runner.run(agent, "go")
    assert_paired(result.entries)
    return result, model


# -- configuration ------------------------------------------------------------------------


def test_configs_are_frozen_keyword_only_and_checked() -> None:
    server = MCPServerStdio(command="x", name="fx")
    with pytest.raises(AttributeError):
        server.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        MCPServerStdio("x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        MCPServerStreamableHTTP()  # type: ignore[call-arg]
    with pytest.raises(UserError, match="name"):
        MCPServerStdio(command="x", name="has space")
    with pytest.raises(UserError, match="list"):
        MCPServerStdio(command="x", args="a b")
    with pytest.raises(UserError, match="http"):
        MCPServerStreamableHTTP(url="127.0.0.1:3000/mcp")
    with pytest.raises(UserError, match="timeout"):
        MCPServerStdio(command="x", timeout=0)
    with pytest.raises(UserError, match="at least one"):
        MCP()


# -- rendering ---------------------------------------------------------------------------


def test_render_placeholders_never_leak_base64() -> None:
    from mcp_types import ImageContent, TextContent

    image = ImageContent(type="image", data="A" * 4000, mime_type="image/png")
    out = render_mcp_content(MCPToolResult(content=[TextContent(type="text", text="hi"), image]))
    assert out == "hi\n[image: image/png, 2.9 KB]"
    assert "AAAA" not in out
    assert render_mcp_content(MCPToolResult(is_error=True)).startswith("[tool error] ")
    assert render_mcp_content(MCPToolResult(structured_content={"a": 1})) == '{"a": 1}'


def test_normalize_schema_makes_an_object_schema_without_touching_the_input() -> None:
    raw: dict[str, Any] = {"$schema": "http://json-schema.org/draft-07/schema#"}
    assert normalize_schema(raw) == {"type": "object", "properties": {}}
    assert "$schema" in raw
    assert normalize_schema(None) == {"type": "object", "properties": {}}
    keep = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert normalize_schema(keep) == keep


async def test_every_content_kind_renders_through_a_real_server(tmp_path: Path) -> None:
    async with fixture_server(tmp_path, name="fx").session() as conn:
        rendered = {
            name: render_mcp_content(await conn.call_tool(name, {"text": "hi"}))
            for name in ("echo", "image", "audio", "resource", "link", "fail")
        }
    assert rendered == {
        "echo": "echo: hi",
        "image": "[image: image/png, 300 bytes]",
        "audio": "[audio: audio/wav, 2.0 KB]",
        "resource": "inline notes\n[resource: file:///data.bin, application/zip, 10 bytes]",
        "link": "[resource link: file:///README.md]",
        "fail": "[tool error] disk full",
    }


# -- listing, filters, names, policy ------------------------------------------------------


async def test_listing_follows_every_page(tmp_path: Path) -> None:
    async with fixture_server(tmp_path).session() as conn:
        names = [t.name for t in await conn.tools()]
    assert len(names) == 12  # three pages of four
    assert names[0] == "echo" and names[-1] == "flaky"


async def test_prefix_filters_and_unsafe_names_in_a_run(tmp_path: Path) -> None:
    server = fixture_server(
        tmp_path, name="fx", include_tools=["echo", "weather.today", "fail"], exclude_tools=["fail"]
    )
    result, model = await run(
        MCP(server),
        [call("fx__weather_today", {"text": "sun"}, call_id="c1"), text("done")],
    )
    assert set(model.tools[0]) == {"fx__echo", "fx__weather_today"}
    assert results(result.entries)["c1"].output == "echo: sun"


async def test_tool_error_result_and_protocol_error_reach_the_model(tmp_path: Path) -> None:
    result, _ = await run(
        MCP(fixture_server(tmp_path)),
        [batch(("fail", {}, "c1"), ("boom", {}, "c2")), text("done")],
    )
    by_id = results(result.entries)
    assert by_id["c1"].output == "[tool error] disk full"
    assert not by_id["c1"].is_error  # the server answered: a result, not an exception
    assert by_id["c2"].is_error
    assert "boom is not allowed" in by_id["c2"].output


async def test_per_server_approval_denies_without_a_decision(tmp_path: Path) -> None:
    gated = fixture_server(tmp_path, name="gated", needs_approval=True, include_tools=["count"])
    free = fixture_server(tmp_path, name="free", include_tools=["echo"])
    result, _ = await run(
        MCP(gated, free),
        [batch(("gated__count", {}, "c1"), ("free__echo", {"text": "x"}, "c2")), text("done")],
    )
    by_id = results(result.entries)
    assert by_id["c1"].is_error and "denied" in by_id["c1"].output.lower()
    assert by_id["c2"].output == "echo: x"
    assert not (tmp_path / "calls").exists()  # the gated call never reached the server


async def test_output_cap_and_custom_renderer_apply(tmp_path: Path) -> None:
    seen: list[Any] = []

    def renderer(result: Any) -> str:
        seen.append(result)
        return "R" * 500

    server = fixture_server(tmp_path, result_renderer=renderer, max_output_chars=100)
    result, _ = await run(MCP(server), [call("echo", {"text": "x"}, call_id="c1"), text("ok")])
    output = results(result.entries)["c1"].output
    assert "truncated" in output and len(output) < 200
    assert type(seen[0]).__name__ == "CallToolResult"  # the renderer gets the raw result


async def test_a_failed_setup_closes_only_the_connections_it_opened(tmp_path: Path) -> None:
    states: list[MCPServerStateChanged] = []
    async with fixture_server(tmp_path).session() as live:
        plugin = MCP(live, fixture_server(tmp_path), on_state=states.append)  # same names
        model = ScriptedProvider([text("never")])
        with pytest.raises(UserError, match="distinct name"):
            await Runner.run(Agent(name="a", model=model, plugins=[plugin]), "go")
        assert live.state == "ready"  # handed in: never closed by the run
    assert [s.state for s in states] == ["starting", "ready", "closed"]  # the owned one


async def test_server_retries_reach_each_tool(tmp_path: Path) -> None:
    result, _ = await run(
        MCP(fixture_server(tmp_path, retries=1)), [call("flaky", {}, call_id="c1"), text("ok")]
    )
    assert results(result.entries)["c1"].output == "recovered"
    (tmp_path / "flaky").unlink()
    result, _ = await run(
        MCP(fixture_server(tmp_path)), [call("flaky", {}, call_id="c2"), text("ok")]
    )
    assert results(result.entries)["c2"].is_error
    output = results(result.entries)["c2"].output
    assert "MCP server 'python mcp_fixture_server.py' failed on tool 'flaky'" in output


# -- deadlines, reconnection, failures ----------------------------------------------------


async def test_deadline_really_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    result, _ = await run(
        MCP(fixture_server(tmp_path, timeout=0.5)),
        [call("slow", {}, call_id="c1"), text("ok")],
    )
    out = results(result.entries)["c1"]
    assert out.is_error and "timed out after 0.5 s; the call was cancelled" in out.output
    await appears(tmp_path / "cancelled")


async def test_a_slow_call_never_blocks_parallel_calls(tmp_path: Path) -> None:
    slow = fixture_server(tmp_path, name="slow", timeout=3, include_tools=["slow"])
    fast = fixture_server(tmp_path, name="fast", include_tools=["echo"])
    echo_twice = [("fast__echo", {"text": "a"}, "c2"), ("fast__echo", {"text": "b"}, "c3")]
    result, _ = await run(
        MCP(slow, fast), [batch(("slow__slow", {}, "c1"), *echo_twice), text("ok")]
    )
    order = [e.call_id for e in result.entries if isinstance(e, ToolResultEntry)]
    assert order[-1] == "c1"  # completion order: both echoes finished while slow still ran
    by_id = results(result.entries)
    assert (by_id["c2"].output, by_id["c3"].output) == ("echo: a", "echo: b")
    assert "timed out after 3 s" in by_id["c1"].output


async def appears(marker: Path) -> None:
    """Wait for the fixture server to write ``marker`` (polled: another process writes it)."""

    async def poll() -> None:
        while not marker.exists():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), 15)


async def test_cancelling_the_run_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    token = CancelToken()
    model = ScriptedProvider([call("slow", {}, call_id="c1"), text("never")])
    agent = Agent(name="a", model=model, plugins=[MCP(fixture_server(tmp_path, timeout=None))])
    running = asyncio.ensure_future(Runner.run(agent, "go", cancel_token=token))
    await appears(tmp_path / "started")
    token.cancel("user pressed stop")
    with pytest.raises(RunCancelled):
        await running
    await appears(tmp_path / "cancelled")


async def test_a_server_that_dies_mid_session_reconnects(tmp_path: Path) -> None:
    states: list[MCPServerStateChanged] = []
    healed = asyncio.Event()

    def on_state(event: MCPServerStateChanged) -> None:
        states.append(event)
        if [s.state for s in states].count("ready") == 3:
            healed.set()

    server = fixture_server(tmp_path, name="fx")
    async with MCPConnection(server, on_state=on_state) as conn:
        assert conn.state == "ready"
        with pytest.raises(MCPError, match="lost its connection"):
            await conn.call_tool("crash", {})  # dies again on the retry: reported, not hung
        await asyncio.wait_for(healed.wait(), 30)  # restarted in the background, unasked
        reply = await conn.call_tool("echo", {"text": "back"})
        assert render_mcp_content(reply) == "echo: back"
    assert [s.state for s in states] == [
        "starting",
        "ready",
        "reconnecting",
        "ready",
        "reconnecting",
        "ready",
        "closed",
    ]
    assert "fixture server starting" in (states[2].error or "")  # stderr quoted


async def test_retry_once_is_at_least_once(tmp_path: Path) -> None:
    import os
    import signal

    pid_file = tmp_path / "pid"
    script = f'echo $$ > "{pid_file}"; exec {fixture_command(tmp_path)}'
    server = MCPServerStdio(command="sh", args=["-c", script])
    async with server.session() as conn:
        await conn.call_tool("count", {})
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        reply = await conn.call_tool("count", {})  # the dead process is replaced transparently
        assert render_mcp_content(reply) == "counted"
        assert conn.state == "ready"
    assert (tmp_path / "calls").read_text() == "xx"


async def test_no_auto_reconnect_reports_and_stays_down(tmp_path: Path) -> None:
    server = fixture_server(tmp_path, auto_reconnect=False)
    async with server.session() as conn:
        with pytest.raises(MCPError, match="auto_reconnect=False"):
            await conn.call_tool("crash", {})
        assert conn.state == "failed"


async def test_missing_script_fails_fast_with_the_servers_stderr() -> None:
    server = MCPServerStdio(command=sys.executable, args=["/nonexistent/server.py"], name="bad")
    with pytest.raises(MCPError) as info:
        await asyncio.wait_for(server.session().open(), 20)  # fails fast, never hangs
    message = str(info.value)
    assert "failed to start" in message
    assert "server stderr" in message and "No such file or directory" in message


async def test_missing_command_fails_fast() -> None:
    with pytest.raises(MCPError, match="no-such-command-lovia"):
        await MCPServerStdio(command="no-such-command-lovia").session().open()


async def test_a_server_that_never_answers_times_out_the_start(tmp_path: Path) -> None:
    server = MCPServerStdio(command="sleep", args=["60"], connect_timeout=0.5)
    with pytest.raises(MCPError, match="connect_timeout=0.5"):
        await asyncio.wait_for(server.session().open(), 20)


async def test_invoking_after_close_raises(tmp_path: Path) -> None:
    conn = await fixture_server(tmp_path).session().open()
    await conn.close()
    with pytest.raises(MCPError, match="closed"):
        await conn.call_tool("echo", {})


async def test_close_while_starting_wins_and_leaves_nothing_running(tmp_path: Path) -> None:
    conn = fixture_server(tmp_path).session()
    closing: list[asyncio.Task[None]] = []

    def on_state(event: MCPServerStateChanged) -> None:
        if event.state == "starting":
            closing.append(asyncio.get_running_loop().create_task(conn.close()))

    conn.add_listener(on_state)
    with pytest.raises(MCPError, match="is closed"):
        await conn.open()
    await closing[0]
    assert conn.state == "closed"
    with pytest.raises(MCPError, match="is closed"):
        await conn.open()


def test_importing_the_plugin_does_not_import_the_sdk() -> None:
    import subprocess

    code = (
        "import sys, lovia.plugins.mcp as m; m.MCP(m.MCPServerStdio(command='x'));"
        "print(sorted(n for n in ('mcp', 'anyio', 'httpx2') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_missing_mcp_package_is_a_user_error_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now raises ImportError
    with pytest.raises(UserError, match=r"lovia-plugins\[mcp\]"):
        await fixture_server(tmp_path).session().open()


# -- the plugin in runs -------------------------------------------------------------------


async def test_a_dead_server_never_blocks_the_run_or_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = MCPServerStdio(command=sys.executable, args=["/nonexistent.py"], name="dead")
    plugin = MCP(dead, fixture_server(tmp_path, name="ok"))
    with caplog.at_level(logging.WARNING, logger="lovia.plugins.mcp"):
        result, model = await run(
            plugin, [call("ok__echo", {"text": "hi"}, call_id="c1"), text("fine")]
        )
    assert result.output == "fine"
    assert results(result.entries)["c1"].output == "echo: hi"
    system = model.calls[0][0].content
    assert "unavailable" in system and "dead" in system
    assert any("dead" in r.getMessage() for r in caplog.records)


async def test_a_server_that_died_between_runs_gives_a_clear_tool_error(tmp_path: Path) -> None:
    flag = tmp_path / "down"
    down = f'[ -e "{flag}" ] && {{ echo "flag says down" >&2; exit 1; }}'
    script = f"{down}; exec {fixture_command(tmp_path)}"
    plugin = MCP(MCPServerStdio(command="sh", args=["-c", script], name="fx"))
    first, _ = await run(plugin, [call("fx__echo", {"text": "a"}, call_id="c1"), text("ok")])
    assert results(first.entries)["c1"].output == "echo: a"
    flag.write_text("")
    second, model = await run(
        plugin, [call("fx__echo", {"text": "b"}, call_id="c2"), text("sorry")]
    )
    assert "fx__echo" in model.tools[0]  # still offered from the last listing
    out = results(second.entries)["c2"]
    assert out.is_error and "flag says down" in out.output
    assert second.output == "sorry"


async def test_each_run_owns_its_connection_and_a_live_one_is_never_closed(tmp_path: Path) -> None:
    states: list[MCPServerStateChanged] = []
    plugin = MCP(fixture_server(tmp_path, name="own"), on_state=states.append)
    await run(plugin, [call("own__echo", {"text": "a"}), text("ok")])
    await run(plugin, [call("own__echo", {"text": "b"}), text("ok")])
    assert [s.state for s in states].count("closed") == 2  # one connection per run, closed

    async with fixture_server(tmp_path, name="live").session() as conn:
        await run(MCP(conn), [call("live__echo", {"text": "a"}), text("ok")])
        await run(MCP(conn), [call("live__echo", {"text": "b"}), text("ok")])
        assert conn.state == "ready"


async def test_close_after_run_false_keeps_one_connection_until_aclose(tmp_path: Path) -> None:
    states: list[MCPServerStateChanged] = []
    plugin = MCP(fixture_server(tmp_path, close_after_run=False), on_state=states.append)
    await run(plugin, [call("echo", {"text": "a"}), text("ok")])
    await run(plugin, [call("echo", {"text": "b"}), text("ok")])
    assert [s.state for s in states] == ["starting", "ready"]
    await plugin.aclose()
    assert states[-1].state == "closed"


# -- deferred servers ---------------------------------------------------------------------


async def test_deferred_tools_are_searched_and_called(tmp_path: Path) -> None:
    plugin = MCP(
        fixture_server(tmp_path, name="fx", defer=True, needs_approval=False),
        fixture_server(tmp_path, name="up", include_tools=["echo"]),
    )
    script = [
        batch(
            ("search_mcp_tools", {"query": "fx__echo"}, "s1"),
            ("search_mcp_tools", {"query": "resource"}, "s2"),
            ("search_mcp_tools", {"query": "zebra"}, "s3"),
        ),
        batch(
            ("call_mcp_tool", {"name": "fx__echo", "arguments": {"text": "deep"}}, "k1"),
            ("call_mcp_tool", {"name": "fx__ecko"}, "k2"),
            ("call_mcp_tool", {"name": "fx__fail"}, "k3"),
        ),
        text("done"),
    ]
    result, model = await run(plugin, script)
    assert set(model.tools[0]) == {"up__echo", "search_mcp_tools", "call_mcp_tool"}
    assert "search_mcp_tools" in model.calls[0][0].content
    by_id = results(result.entries)
    assert by_id["s1"].output.startswith("- fx__echo: Echo the text back.")
    assert '"text"' in by_id["s1"].output  # the schema, to call it with
    assert "fx__resource" in by_id["s2"].output.splitlines()[0]
    assert "No MCP tool matches 'zebra'" in by_id["s3"].output
    assert by_id["k1"].output == "echo: deep"
    assert by_id["k2"].is_error and "Did you mean: fx__echo" in by_id["k2"].output
    assert by_id["k3"].output == "[tool error] disk full"


async def test_deferred_calls_keep_the_servers_approval(tmp_path: Path) -> None:
    plugin = MCP(fixture_server(tmp_path, name="fx", defer=True, needs_approval=True))
    result, _ = await run(
        plugin,
        [call("call_mcp_tool", {"name": "fx__count"}, call_id="k1"), text("ok")],
    )
    assert results(result.entries)["k1"].is_error
    assert not (tmp_path / "calls").exists()


async def test_deferred_search_caps_results_and_says_how_many_more(tmp_path: Path) -> None:
    plugin = MCP(fixture_server(tmp_path, name="fx", defer=True))
    result, _ = await run(
        plugin, [call("search_mcp_tools", {"query": "fx"}, call_id="s"), text("ok")]
    )
    output = results(result.entries)["s"].output
    assert output.count("\n- ") == 7 and "(4 more match; refine the query" in output


async def test_deferred_name_clash_is_a_user_error(tmp_path: Path) -> None:
    plugin = MCP(fixture_server(tmp_path, defer=True), fixture_server(tmp_path, defer=True))
    with pytest.raises(UserError, match="deferred"):
        await Runner.run(Agent(name="a", model=ScriptedProvider([]), plugins=[plugin]), "go")
