"""SIGKILL a process in the middle of appending to the event log: what it committed is all
there, what it did not is not there at all (no half batch), and the store opens again."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from lovia.web.eventlog import EventRecord

from .append_worker import BATCH
from .conftest import Backend

WORKER = str(Path(__file__).with_name("append_worker.py"))
TIMEOUT = 60.0
"""Only a guard against a hung child; nothing waits on elapsed time."""


async def _kill_mid_append(args: list[str], batches: int) -> int:
    """Run the worker until it reports ``batches`` commits, SIGKILL it, return its last
    reported seq."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, WORKER, *args, stdout=asyncio.subprocess.PIPE
    )
    stdout = proc.stdout
    assert stdout is not None

    async def committed() -> int:
        reported = 0
        while reported < batches * BATCH:
            line = await stdout.readline()
            assert line, "the worker exited before it was killed"
            reported = int(line)
        return reported

    try:
        reported = await asyncio.wait_for(committed(), TIMEOUT)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return reported


async def test_a_killed_writer_leaves_whole_batches_only(db_backend: Backend) -> None:
    if db_backend.name == "sqlite":
        Path(db_backend.location).parent.mkdir(parents=True, exist_ok=True)
        args = ["sqlite", db_backend.location]
    else:
        assert db_backend.schema is not None
        args = ["postgres", db_backend.location, db_backend.schema]
    reported = await _kill_mid_append(args, batches=20)
    again = await _kill_mid_append(args, batches=1)  # a second process carries on, killed too
    store = db_backend.store()
    last = await store.last_seq("r")
    assert last >= again > reported and last % BATCH == 0
    events = await store.read_events("r")
    assert [e.seq for e in events] == list(range(1, last + 1))
    await store.append_events("s", [EventRecord("r", last + 1, "done", {})])  # still writable
    assert await store.last_seq("r") == last + 1
