"""Scenario: a handoff from an agent without a workspace to one with a workspace (and back),
checkpointed; the final agent, the offered tools and ``ctx.workspace`` follow the switch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, BudgetExceeded, RunContext, Runner, tool
from lovia.budget import RunBudget
from lovia.checkpointer import CheckpointOptions
from lovia.events import HandoffOccurred
from lovia.stores import SQLiteCheckpointer
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.workspace import Workspace

WS_TOOLS = {"read_file", "write_file", "edit_file", "list_files", "grep_files", "shell"}


@tool
def where_am_i(ctx: RunContext[Any]) -> str:
    """Which agent runs, and whether it has a workspace."""
    root = getattr(ctx.workspace, "root", None)
    return f"{ctx.agent.name}: {'no workspace' if ctx.workspace is None else root}"


def build(tmp_path: Path, front_steps: list[Any], coder_steps: list[Any]) -> tuple[Any, ...]:
    root = tmp_path / "repo"
    root.mkdir(exist_ok=True)
    front_model = ScriptedProvider(front_steps)
    coder_model = ScriptedProvider(coder_steps)
    coder = Agent(
        name="coder",
        model=coder_model,
        tools=[where_am_i],
        workspace=Workspace.local(root),
    )
    front = Agent(name="front", model=front_model, tools=[where_am_i], handoffs=[coder])
    coder.handoffs = (front,)
    return front, coder, front_model, coder_model, root


def offered(model: ScriptedProvider, i: int) -> set[str]:
    return set(model.tools[i])


async def test_the_workspace_follows_the_active_agent_through_handoffs(tmp_path: Path) -> None:
    front, coder, front_model, coder_model, root = build(
        tmp_path,
        [
            call("where_am_i", {}, call_id="w1"),
            call("transfer_to_coder", {"reason": "needs a file"}),
            call("where_am_i", {}, call_id="w3"),
            call("write_file", {"path": "late.txt", "content": "x"}, call_id="late"),
            text("All done."),
        ],
        [
            call("where_am_i", {}, call_id="w2"),
            call("write_file", {"path": "hello.txt", "content": "hi\n"}, call_id="write"),
            call("transfer_to_front", {}),
        ],
    )
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db", wal=True)
    try:
        handle = Runner.stream(
            front, "Write hello.txt", checkpoint=CheckpointOptions(checkpointer, "h-1")
        )
        handoffs = [
            (e.from_agent.name, e.to_agent.name)
            async for e in handle
            if isinstance(e, HandoffOccurred)
        ]
        result = await handle
    finally:
        await checkpointer.aclose()
    assert handoffs == [("front", "coder"), ("coder", "front")]
    outputs = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    assert outputs["w1"].output == "front: no workspace"
    assert outputs["w2"].output == f"coder: {root.resolve()}"
    assert outputs["w3"].output == "front: no workspace"
    assert (root / "hello.txt").read_text() == "hi\n"
    # Back in the agent without a workspace, the workspace tools are gone.
    assert outputs["late"].is_error and not (root / "late.txt").exists()
    assert not offered(front_model, 0) & WS_TOOLS
    assert offered(coder_model, 0) >= WS_TOOLS
    assert "transfer_to_front" in offered(coder_model, 0)
    assert "## Workspace" in coder_model.views[0][0].content
    assert "## Workspace" not in front_model.views[-1][0].content
    assert result.final_agent is front and result.output == "All done."


async def test_a_run_interrupted_after_a_handoff_resumes_in_the_target_with_its_workspace(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    front, coder, _, _, root = build(
        tmp_path,
        [call("transfer_to_coder", {})],
        [
            call("write_file", {"path": "a.txt", "content": "a"}, call_id="a"),
            call("write_file", {"path": "b.txt", "content": "b"}, call_id="b"),  # over budget
        ],
    )
    checkpointer = SQLiteCheckpointer(db, wal=True)
    try:
        with pytest.raises(BudgetExceeded):
            await Runner.run(
                front,
                "Write two files",
                budget=RunBudget(max_tool_calls=2),
                checkpoint=CheckpointOptions(checkpointer, "h-2"),
            )
        snapshot = await checkpointer.load("h-2")
        assert snapshot is not None and snapshot.head.status == "interrupted"
        assert snapshot.head.agent_name == "coder"
        assert (root / "a.txt").exists() and not (root / "b.txt").exists()

        # Same graph, fresh models: the pending write runs in the coder's workspace.
        front2, coder2, front_model2, coder_model2, _ = build(tmp_path, [], [text("Both written.")])
        result = await Runner.run(front2, [], checkpoint=CheckpointOptions(checkpointer, "h-2"))
        assert result.output == "Both written." and result.final_agent is coder2
        assert (root / "b.txt").read_text() == "b"
        assert offered(coder_model2, 0) >= WS_TOOLS and not front_model2.tools
        done = await checkpointer.load("h-2")
        assert done is not None and done.head.status == "completed"
        assert done.head.agent_name == "coder"
    finally:
        await checkpointer.aclose()
