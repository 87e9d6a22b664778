"""Scenario: workspace approvals end to end through ``Runner.stream`` and ``handle.approvals``."""

from __future__ import annotations

from pathlib import Path

import pytest
from lovia import Agent, RunCancelled, Runner
from lovia.checkpointer import CheckpointOptions
from lovia.events import ApprovalRequired, RunCompleted, ToolCallCompleted
from lovia.exceptions import SessionBusyError
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.workspace import PathRule, Workspace


async def test_an_outside_write_asks_the_consumer_who_rejects_it_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    outside = tmp_path / "shared"
    root.mkdir()
    outside.mkdir()
    target = outside / "report.txt"
    elsewhere = tmp_path / "elsewhere.txt"  # outside, no rule: coding mode denies, never asks
    # coding mode denies outside writes by default; a path rule turns this one into an ask.
    workspace = Workspace.local(
        root, mode="coding", path_rules=(PathRule(str(outside), "ask", ops={"write"}),)
    )
    model = ScriptedProvider(
        [
            call("write_file", {"path": str(target), "content": "secret"}, call_id="outside"),
            call("write_file", {"path": str(elsewhere), "content": "x"}, call_id="elsewhere"),
            call("write_file", {"path": "report.txt", "content": "kept local"}, call_id="inside"),
            text("Wrote the report inside the repository instead."),
        ]
    )
    agent = Agent(name="dev", model=model, workspace=workspace)
    handle = Runner.stream(agent, "Write the report")
    asked: list[str] = []
    outputs: dict[str, str] = {}
    completed = 0
    async for event in handle:
        if isinstance(event, ApprovalRequired):
            asked.append(event.call.id)
            assert [p.call_id for p in handle.approvals.pending()] == ["outside"]
            assert handle.approvals.reject("outside", reason="not outside the repo") is True
            assert handle.approvals.reject("outside") is False  # already decided
        elif isinstance(event, ToolCallCompleted):
            outputs[event.call.id] = event.output
        completed += isinstance(event, RunCompleted)
    result = await handle
    assert asked == ["outside"] and completed == 1
    assert outputs["outside"].startswith("Tool error: the call was denied")
    assert "not outside the repo" in outputs["outside"]
    assert not target.exists() and list(outside.iterdir()) == []
    assert "denied by the workspace policy" in outputs["elsewhere"]
    assert not elsewhere.exists()
    assert outputs["inside"].startswith("created report.txt")
    assert (root / "report.txt").read_text() == "kept local"
    assert result.output == "Wrote the report inside the repository instead."
    # The model saw the refusal as a tool error on its next turn.
    seen = [e for e in model.views[1] if isinstance(e, ToolResultEntry)]
    assert len(model.views) == 4
    assert seen and seen[-1].call_id == "outside" and seen[-1].is_error
    model.assert_consumed()


async def test_without_a_consumer_decision_the_ask_is_denied_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    workspace = Workspace.local(root, mode="coding")
    hook = root / ".git" / "hooks" / "pre-commit"
    model = ScriptedProvider(
        [
            call("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
            text("I could not install the hook."),
        ]
    )
    handle = Runner.stream(Agent(name="dev", model=model, workspace=workspace), "Add a hook")
    asked = [e.call.name async for e in handle if isinstance(e, ApprovalRequired)]
    result = await handle
    assert asked == ["write_file"]  # coding mode asks before writing code-executing paths
    assert not hook.exists()
    (denied,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert denied.is_error and result.output == "I could not install the hook."


async def test_an_undecided_ask_survives_an_interruption_and_asks_again_on_resume(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    workspace = Workspace.local(root, mode="coding")
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db", wal=True)
    options = CheckpointOptions(checkpointer, "ask-1")
    first = ScriptedProvider([call("shell", {"command": "echo hi > hi.txt"}, call_id="sh")])
    agent = Agent(name="dev", model=first, workspace=workspace)
    try:
        # The user closes the page while the shell command waits for approval.
        handle = Runner.stream(agent, "Say hi into a file", checkpoint=options)
        async for event in handle:
            if isinstance(event, ApprovalRequired):
                handle.cancel("tab closed")
        with pytest.raises(RunCancelled):
            await handle
        snapshot = await checkpointer.load("ask-1")
        assert snapshot is not None and snapshot.head.status == "interrupted"
        assert not (root / "hi.txt").exists()

        # Back later: the resumed run asks again, and this time the user approves.
        second = ScriptedProvider([text("Done.")])
        handle = Runner.stream(agent.clone(model=second), [], checkpoint=options)
        asked = []
        async for event in handle:
            if isinstance(event, ApprovalRequired):
                asked.append(event.call.id)
                assert handle.approvals.approve(event.call.id)
        result = await handle
        assert asked == ["sh"] and result.output == "Done."
        assert (root / "hi.txt").read_text() == "hi\n"
        (shell,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
        assert shell.call_id == "sh" and shell.output.startswith("exit code 0")
    finally:
        await checkpointer.aclose()


async def test_a_second_tab_is_refused_while_a_run_waits_for_approval(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    session = SQLiteSession(tmp_path / "chat.db", wal=True)
    model = ScriptedProvider([call("shell", {"command": "echo hi"}), text("one")])
    agent = Agent(name="dev", model=model, workspace=Workspace.local(root))
    other = agent.clone(model=ScriptedProvider([text("two")]))
    try:
        handle = Runner.stream(agent, "first tab", session=session, session_id="chat")
        async for event in handle:
            if isinstance(event, ApprovalRequired):
                # The waiting run still holds the session: a second tab cannot interleave.
                with pytest.raises(SessionBusyError):
                    await Runner.run(
                        other, "second tab", session=session, session_id="chat", lease_timeout=0
                    )
                event.approve()
        assert (await handle).output == "one"
        result = await Runner.run(
            other, "second tab", session=session, session_id="chat", lease_timeout=0
        )
        assert result.output == "two"
        segments = await session.segments("chat")
        assert [s.run_id for s in segments][1] == result.run_id and len(segments) == 2
    finally:
        await session.aclose()
