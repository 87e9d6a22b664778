"""Scenario: a chat keeps one workspace session across runs (a background process started in
one run is still there, reminded and killable, in the next run on the same session)."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from lovia import Agent, Runner
from lovia.stores import SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry
from lovia.workspace import Workspace

# Prints, then signals the test through a FIFO (so the output is already in the pipe), then
# runs until killed.
COMMAND = "echo server up; echo ready > ready.fifo; while true; do sleep 0.05; done"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_background_process_outlives_its_run_in_a_bound_session(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    os.mkfifo(root / "ready.fifo")
    workspace = Workspace.local(root, mode="trusted")  # trusted: commands run without asking
    session = SQLiteSession(tmp_path / "chat.db", wal=True)
    ready: asyncio.Task[str] | None = None
    try:
        async with workspace.session() as bound:
            first = ScriptedProvider(
                [call("shell", {"command": COMMAND, "background": True}), text("Started.")]
            )
            agent = Agent(name="dev", model=first, workspace=bound)
            ready = asyncio.create_task(asyncio.to_thread((root / "ready.fifo").read_text))
            result = await Runner.run(agent, "Start the server", session=session, session_id="s")
            (started,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
            found = re.search(r"background process (\S+) \(pid (\d+)\)", started.output)
            assert found is not None, started.output
            process_id, pid = found.group(1), int(found.group(2))
            assert await asyncio.wait_for(ready, 30) == "ready\n"
            assert alive(pid)  # the run ended; the bound session keeps the process

            second = ScriptedProvider(
                [call("kill_process", {"process_id": process_id}), text("Stopped.")]
            )
            result = await Runner.run(
                agent.clone(model=second), "Stop it", session=session, session_id="s"
            )
            (killed,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
            assert killed.output.startswith(f"{process_id}: killed"), killed.output
            assert "server up" in killed.output
            assert not alive(pid)
            # The first call of the second run saw the reminder (view only, never stored).
            reminder = second.views[0][-1]
            assert isinstance(reminder, InputEntry) and "running" in str(reminder.content)
            segments = await session.segments("s")
            stored = [e for s in segments for e in s.entries]
            assert not any("system-reminder" in str(getattr(e, "content", "")) for e in stored)
    finally:
        if ready is not None and not ready.done():  # release a reader the command never fed
            os.close(os.open(root / "ready.fifo", os.O_WRONLY | os.O_NONBLOCK))
        await session.aclose()
