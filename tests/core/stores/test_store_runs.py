"""Many runs at once through ``Runner`` on the database stores (issue 20, items 1 and 3).

* 200 concurrent runs on 200 sessions with the stores' default settings: a lease must never
  starve the work it protects (PostgreSQL once pinned a pooled connection per lease, and
  ten leases drained the default pool of ten).
* A ``run_id`` is an idempotency key: re-issuing it while the first run is still going
  waits for that run (and then replays it) instead of running the tools a second time.
"""

from __future__ import annotations

import asyncio

from lovia import Agent, Runner, tool
from lovia.checkpointer import CheckpointOptions
from lovia.testing import ScriptedProvider, call, text

from .conftest import Backend

RUNS = 200


@tool
async def lookup(i: int) -> str:
    """Look one item up."""
    return f"item {i}"


def two_turn_agent(i: int) -> Agent[None]:
    script = [call("lookup", {"i": i}, call_id=f"c{i}"), text(f"answer {i}")]
    return Agent("worker", model=ScriptedProvider(script), tools=[lookup])


async def test_two_hundred_concurrent_runs_on_two_hundred_sessions(db_backend: Backend) -> None:
    session = db_backend.session()
    checkpointer = db_backend.checkpointer()
    results = await asyncio.gather(
        *(
            Runner.run(
                two_turn_agent(i),
                f"question {i}",
                session=session,
                session_id=f"s{i}",
                checkpoint=CheckpointOptions(checkpointer, f"run-{i}"),
            )
            for i in range(RUNS)
        )
    )
    assert [r.output for r in results] == [f"answer {i}" for i in range(RUNS)]
    for i in (0, RUNS // 2, RUNS - 1):
        (segment,) = await session.segments(f"s{i}")
        assert segment.run_id == f"run-{i}" and len(segment.entries) == 4
