"""End to end: an agent with a workspace, driven by ScriptedProvider through Runner.run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from lovia.agent import Agent
from lovia.run_context import RunContext
from lovia.runner import Runner
from lovia.testing import ScriptedProvider, call, text
from lovia.tools.base import Tool
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.workspace import LocalWorkspaceSession, Workspace

from .ws_support import RUN, wait_gone


class SnapshotProvider(ScriptedProvider):
    """ScriptedProvider that also copies each view as sent.

    ``ScriptedProvider.views`` re-reads the live view lazily, which misses entries that
    view injectors appended to the tail of one call's view.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[list[TranscriptEntry]] = []

    def stream(self, entries: Sequence[TranscriptEntry], **kwargs: Any) -> AsyncIterator[Any]:
        self.sent.append(list(entries))
        return super().stream(entries, **kwargs)


def results(entries: list[TranscriptEntry]) -> list[ToolResultEntry]:
    return [e for e in entries if isinstance(e, ToolResultEntry)]


async def test_agent_edits_a_file_through_the_workspace_tools(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("GREETING = 'hello'\n")
    provider = ScriptedProvider(
        [
            call("read_file", {"path": "app.py"}, call_id="c1"),
            call("edit_file", {"path": "app.py", "old": "'hello'", "new": "'hi'"}, call_id="c2"),
            text("done"),
        ]
    )
    agent: Agent[None] = Agent(
        name="coder", model=provider, workspace=Workspace.local(tmp_path, mode="trusted")
    )
    result = await Runner.run(agent, "shorten the greeting")
    assert result.output == "done"
    assert (tmp_path / "app.py").read_text() == "GREETING = 'hi'\n"
    outputs = [r.output for r in results(result.entries)]
    assert outputs == [
        "app.py (lines 1-1 of 1)\nGREETING = 'hello'",
        "edited app.py (1 replacement(s))",
    ]
    system = provider.views[0][0]
    assert isinstance(system, InputEntry) and "## Workspace" in str(system.content)


async def test_ask_goes_through_the_approval_channel(tmp_path: Path) -> None:
    script = [call("shell", {"command": "echo x > made.txt"}, call_id="c1"), text("ok")]
    denied: Agent[None] = Agent(
        name="a", model=ScriptedProvider(script), workspace=Workspace.local(tmp_path)
    )
    result = await Runner.run(denied, "go")
    [entry] = results(result.entries)
    assert entry.is_error and not (tmp_path / "made.txt").exists()

    approved = denied.clone(model=ScriptedProvider(script), approval_handler=lambda call, ctx: True)
    result = await Runner.run(approved, "go")
    assert (tmp_path / "made.txt").read_text() == "x\n"


async def test_denied_paths_hold_for_custom_tools_via_ctx_workspace(tmp_path: Path) -> None:
    async def save(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        session: LocalWorkspaceSession = ctx.workspace
        change = await session.write_text(args["path"], "data")
        return change.path

    tool = Tool(
        name="save",
        description="save a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
        invoke=save,
    )
    provider = ScriptedProvider(
        [
            call("save", {"path": "ok.txt"}, call_id="c1"),
            call("save", {"path": ".env"}, call_id="c2"),
            text("k"),
        ]
    )
    ws = Workspace.local(tmp_path, denied_paths=(".env",))
    result = await Runner.run(Agent(name="a", model=provider, tools=(tool,), workspace=ws), "go")
    first, second = results(result.entries)
    assert (first.output, first.is_error) == ("ok.txt", False)
    assert second.is_error and "denied by the workspace policy" in second.output
    assert not (tmp_path / ".env").exists()


async def test_per_run_session_dies_with_the_run_but_a_bound_one_survives(tmp_path: Path) -> None:
    ws = Workspace.local(tmp_path, mode="trusted")
    start = [
        call("shell", {"command": f"sleep 1040.{RUN}", "background": True}, call_id="c1"),
        text("started"),
    ]
    await Runner.run(Agent(name="a", model=ScriptedProvider(start), workspace=ws), "go")
    assert wait_gone(f"sleep 1040.{RUN}") == []  # the run's own session reaped it

    async with ws.session() as bound:
        script = [
            call(
                "shell", {"command": f"echo up; sleep 1041.{RUN}", "background": True}, call_id="c1"
            ),
            text("started"),
        ]
        await Runner.run(Agent(name="a", model=ScriptedProvider(script), workspace=bound), "go")
        session = await bound.open()
        assert [p.state for p in session.background_processes()] == ["running"]
        follow = SnapshotProvider(
            [call("kill_process", {"process_id": "p1"}, call_id="c2"), text("bye")]
        )
        result = await Runner.run(Agent(name="a", model=follow, workspace=bound), "stop it")
        [killed] = results(result.entries)
        assert killed.output.startswith("p1: killed")
        first, second = follow.sent
        reminder = first[-1]
        assert isinstance(reminder, InputEntry) and reminder.role == "user"
        assert f"p1 `echo up; sleep 1041.{RUN}`: running" in str(reminder.content)
        assert not any("Background processes" in str(getattr(e, "content", "")) for e in second)
        assert not any(
            "Background processes" in str(getattr(e, "content", "")) for e in result.entries
        )
    assert wait_gone(f"sleep 1041.{RUN}") == []


async def test_view_image_reaches_vision_models_only(tmp_path: Path) -> None:
    import base64

    (tmp_path / "dot.png").write_bytes(
        base64.b64decode(
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
        )
    )
    ws = Workspace.local(tmp_path)
    vision = ScriptedProvider(
        [call("view_image", {"path": "dot.png"}, call_id="c1"), text("a dot")], supports_vision=True
    )
    result = await Runner.run(Agent(name="a", model=vision, workspace=ws), "look")
    [entry] = results(result.entries)
    assert entry.parts is not None and [p.type for p in entry.parts] == ["text", "image"]
    blind = ScriptedProvider([text("no eyes")])
    await Runner.run(Agent(name="a", model=blind, workspace=ws), "look")
    assert "view_image" in vision.tools[0] and "view_image" not in blind.tools[0]
