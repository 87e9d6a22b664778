"""Scenario: the network breaks mid-reply while the model asks for a side-effecting command;
the broken reply is discarded and re-streamed, so the command runs exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia import Agent, Runner
from lovia.checkpointer import CheckpointOptions
from lovia.events import OutputDiscarded, ToolCallStarted
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import Provider
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.retry import RetryPolicy
from lovia.stores import SQLiteCheckpointer
from lovia.transcript import ToolCallEntry, ToolResultEntry
from lovia.workspace import Workspace

from tests.core.providers.conftest import Server

COMMAND = "echo ran >> runs.log"


class NoSleep:
    """Records backoff waits instead of sleeping (``RetryPolicy(sleep=...)``)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make(kind: str, server: Server) -> Provider:
    if kind == "openai":
        return OpenAIChatProvider("gpt-4o-mini", base_url=server.url + "/v1", api_key="k")
    return AnthropicProvider("claude-x", base_url=server.url + "/anthropic", api_key="k")


def behaviors(kind: str, fault: str) -> list[dict[str, Any]]:
    match = {"path": "*/chat/completions" if kind == "openai" else "*/messages"}
    shell = {"tool_calls": [{"name": "shell", "arguments": {"command": COMMAND}}]}
    return [
        {"type": "reply", "match": match, **shell},  # this one breaks mid-stream
        {"type": "stream_fault", "kind": fault, "after_chunks": 3, "match": match},
        {"type": "reply", "match": match, **shell},  # the re-streamed reply
        {"type": "reply", "match": match, "text": "Logged once."},
    ]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("fault", ["disconnect", "truncate"])
async def test_a_broken_tool_call_reply_never_runs_its_command(
    llmock: Server, tmp_path: Path, kind: str, fault: str
) -> None:
    httpx.post(
        llmock.url + "/_llmock/scenario", json={"behaviors": behaviors(kind, fault)}, timeout=10
    ).raise_for_status()
    root = tmp_path / "repo"
    root.mkdir()
    provider = make(kind, llmock)
    sleep = NoSleep()
    agent = Agent(
        name="dev",
        model=provider,
        workspace=Workspace.local(root, mode="trusted"),
        retry=RetryPolicy(sleep=sleep),
    )
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db", wal=True)
    try:
        handle = Runner.stream(agent, "Log a run", checkpoint=CheckpointOptions(checkpointer, "f"))
        events = [e async for e in handle]
        result = await handle
        snapshot = await checkpointer.load("f")
    finally:
        await provider.aclose()  # type: ignore[attr-defined]
        await checkpointer.aclose()
    assert result.output == "Logged once."
    assert (root / "runs.log").read_text() == "ran\n"
    assert len([e for e in events if isinstance(e, ToolCallStarted)]) == 1
    assert len(sleep.waits) == 1
    calls = [e for e in result.entries if isinstance(e, ToolCallEntry)]
    results = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert len(calls) == 1 and len(results) == 1 and results[0].call_id == calls[0].call_id
    assert snapshot is not None and list(snapshot.entries) == list(result.entries)
    if any(isinstance(e, OutputDiscarded) for e in events):
        assert events.index(next(e for e in events if isinstance(e, OutputDiscarded))) < (
            events.index(next(e for e in events if isinstance(e, ToolCallStarted)))
        )
