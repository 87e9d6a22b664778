"""Scenario: the user stops a run while a workspace command runs; the command's process
group dies with it, the checkpoint says interrupted, and a resume runs the command again."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from lovia import Agent, RunCancelled, Runner
from lovia.checkpointer import CheckpointOptions
from lovia.events import ToolCallStarted
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.workspace import Workspace

# Without ``go``: report the shell's pid through a FIFO (the test's read blocks until the
# command really runs), then wait forever. With ``go``: finish at once.
COMMAND = (
    "if test -f go; then echo finished; "
    "else echo $$ > pid.fifo; while true; do sleep 0.05; done; fi"
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def read_pid(fifo: Path) -> int:
    try:
        return int(await asyncio.wait_for(asyncio.to_thread(fifo.read_text), 30))
    except asyncio.TimeoutError:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader
        raise


async def test_a_cancelled_command_is_killed_and_rerun_on_resume(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    fifo = root / "pid.fifo"
    os.mkfifo(fifo)
    db = tmp_path / "state.db"
    checkpointer = SQLiteCheckpointer(db, wal=True)
    session = SQLiteSession(db, wal=True)
    model = ScriptedProvider([call("shell", {"command": COMMAND}, call_id="wait")])
    # coding mode asks before every command; the operator's policy approves this one.
    agent = Agent(
        name="dev",
        model=model,
        workspace=Workspace.local(root),
        approval_handler=lambda call, ctx: call.arguments == json.dumps({"command": COMMAND}),
    )
    options = CheckpointOptions(checkpointer, "c-1")
    pid = 0
    try:
        handle = Runner.stream(
            agent, "Wait for go", checkpoint=options, session=session, session_id="s"
        )
        async for event in handle:
            if isinstance(event, ToolCallStarted):
                pid = await read_pid(fifo)
                assert alive(pid)
                handle.cancel("user pressed stop")
        with pytest.raises(RunCancelled):
            await handle
        assert not alive(pid)  # the command's process group was killed and reaped
        snapshot = await checkpointer.load("c-1")
        assert snapshot is not None and snapshot.head.status == "interrupted"
        assert not [e for e in snapshot.entries if isinstance(e, ToolResultEntry)]
        assert await session.segments("s") == []

        (root / "go").touch()
        resumed = agent.clone(model=ScriptedProvider([text("It finished.")]))
        result = await Runner.run(resumed, [], checkpoint=options, session=session, session_id="s")
        (shell,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
        assert shell.call_id == "wait" and shell.output.startswith("exit code 0")
        assert "finished" in shell.output and result.output == "It finished."
        assert [s.run_id for s in await session.segments("s")] == ["c-1"]
    finally:
        await checkpointer.aclose()
        await session.aclose()
