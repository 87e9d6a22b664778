"""Scenario: a coding agent against a real OpenAI-compatible server (llmock) with a local
workspace, the default context policy, a SQLite session and a SQLite checkpointer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from lovia import Agent, Runner
from lovia.checkpointer import CheckpointOptions
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry
from lovia.workspace import CommandRule, Workspace

from tests.core.providers.conftest import Server


def script(server: Server, *replies: dict[str, Any]) -> None:
    """Queue llmock replies: ``{"text": ...}`` or ``{"tool_calls": [{"name", "arguments"}]}``."""
    # Only completions consume replies: the context-window probe (GET /models) must not.
    match = {"path": "*/chat/completions"}
    behaviors = [{"type": "reply", "match": match, **reply} for reply in replies]
    httpx.post(
        server.url + "/_llmock/scenario", json={"behaviors": behaviors}, timeout=10
    ).raise_for_status()


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def results_by_tool(entries: Any) -> dict[str, list[ToolResultEntry]]:
    names = {e.call_id: e.name for e in entries if isinstance(e, ToolCallEntry)}
    out: dict[str, list[ToolResultEntry]] = {}
    for e in entries:
        if isinstance(e, ToolResultEntry):
            out.setdefault(names[e.call_id], []).append(e)
    return out


async def test_coding_agent_edits_files_runs_a_command_and_remembers(
    llmock: Server, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "app.py").write_text('GREETING = "hello"\n')
    workspace = Workspace.local(root, command_rules=(CommandRule("wc", "allow"),))
    provider = OpenAIChatProvider("gpt-4o-mini", base_url=llmock.url + "/v1", api_key="k")
    agent = Agent(name="coder", instructions="You edit code.", model=provider, workspace=workspace)
    db = tmp_path / "lovia.db"
    session = SQLiteSession(db, wal=True)
    checkpointer = SQLiteCheckpointer(db, wal=True)
    try:
        assert agent.context_policy is None  # the installed default: Compaction
        script(
            llmock,
            tool_call("read_file", path="app.py"),
            tool_call("edit_file", path="app.py", old='"hello"', new='"bonjour"'),
            tool_call("write_file", path="docs/NOTES.md", content="one\ntwo\nthree\n"),
            tool_call("shell", command="wc -l docs/NOTES.md"),
            {"text": "Renamed the greeting and wrote the notes."},
        )
        first = await Runner.run(
            agent,
            "Translate the greeting and take notes.",
            session=session,
            session_id="chat-1",
            checkpoint=CheckpointOptions(checkpointer, "run-1"),
        )
        assert first.output == "Renamed the greeting and wrote the notes."
        assert first.turns == 5 and first.usage.requests == 5
        by_tool = results_by_tool(first.entries)
        assert not any(r.is_error for rs in by_tool.values() for r in rs), by_tool
        assert 'GREETING = "hello"' in by_tool["read_file"][0].output
        shell_out = by_tool["shell"][0].output
        assert shell_out.startswith("exit code 0") and "3 docs/NOTES.md" in shell_out
        assert (root / "app.py").read_text() == 'GREETING = "bonjour"\n'
        assert (root / "docs" / "NOTES.md").read_text() == "one\ntwo\nthree\n"

        snapshot = await checkpointer.load("run-1")
        assert snapshot is not None and snapshot.head.status == "completed"
        assert snapshot.head.output == first.output and snapshot.head.turns == 5
        assert list(snapshot.entries) == list(first.entries)

        script(llmock, {"text": "You asked me to translate the greeting."})
        second = await Runner.run(
            agent,
            "What did I ask you before?",
            session=session,
            session_id="chat-1",
            checkpoint=CheckpointOptions(checkpointer, "run-2"),
        )
        assert second.output == "You asked me to translate the greeting."
        # The second request carried the first run's whole history, tool results included.
        requests = httpx.get(llmock.url + "/_llmock/requests", timeout=10).json()["requests"]
        bodies = [r["body"] for r in requests if r["path"].endswith("/chat/completions")]
        offered = {t["function"]["name"] for t in bodies[0]["tools"]}
        # Compaction (from its entry point) ships the recall tool; the workspace its bundle.
        assert {"recall_tool_result", "read_file", "edit_file", "write_file", "shell"} <= offered
        assert "## Workspace" in bodies[0]["messages"][0]["content"]
        sent = bodies[-1]["messages"]
        contents = [str(m.get("content")) for m in sent]
        assert "Translate the greeting and take notes." in contents
        assert "Renamed the greeting and wrote the notes." in contents
        assert sum(m["role"] == "tool" for m in sent) == 4
        assert contents[-1] == "What did I ask you before?"

        segments = await session.segments("chat-1")
        assert [s.run_id for s in segments] == ["run-1", "run-2"]
        assert list(segments[0].entries) == list(first.entries)
        assert list(segments[1].entries) == list(second.entries)
        assert isinstance(segments[1].entries[0], InputEntry)
        assert "context" in segments[0].meta
        second_snapshot = await checkpointer.load("run-2")
        assert second_snapshot is not None and second_snapshot.head.status == "completed"
    finally:
        await provider.aclose()
        await session.aclose()
        await checkpointer.aclose()
