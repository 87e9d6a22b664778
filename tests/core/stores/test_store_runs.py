"""Many runs at once through ``Runner`` on the database stores (issue 20, items 1 and 3).

* 200 concurrent runs on 200 sessions with the stores' default settings: a lease must never
  starve the work it protects (PostgreSQL once pinned a pooled connection per lease, and
  ten leases drained the default pool of ten).
* A ``run_id`` is an idempotency key: re-issuing it while the first run is still going
  waits for that run (and then replays it) instead of running the tools a second time, or
  fails with ``RunBusyError`` when it may not wait; in this process and across processes.
* A third-party ``Session`` with only ``load``/``append``/``clear`` runs (issue 10, item 4).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from lovia import Agent, Runner, RunResult, tool
from lovia.checkpointer import CheckpointOptions
from lovia.exceptions import RunBusyError
from lovia.stores import InMemorySession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import TranscriptEntry

from .conftest import Backend
from .test_store_concurrency import finish, next_line, spawn

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


# -- a run id is an idempotency key ----------------------------------------------------------


def watch_leases(store: Any, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set when a run asks ``store`` for a lease from now on."""
    asked = asyncio.Event()
    lease = store.lease

    def watched(run_id: str, **options: Any) -> AbstractAsyncContextManager[None]:
        asked.set()
        held: AbstractAsyncContextManager[None] = lease(run_id, **options)
        return held

    monkeypatch.setattr(store, "lease", watched)
    return asked


def charging_agent(charged: list[str], in_tool: asyncio.Event, go_on: asyncio.Event) -> Agent[None]:
    @tool
    async def charge(who: str) -> str:
        """Charge a customer."""
        charged.append(who)
        in_tool.set()
        await go_on.wait()
        return f"charged {who}"

    script = [call("charge", {"who": "bob"}, call_id="c1"), text("bob is charged")]
    return Agent("biller", model=ScriptedProvider(script), tools=[charge])


async def run_into_the_tool(
    store: Any, run_id: str
) -> tuple[asyncio.Task[RunResult[Any]], list[str], asyncio.Event]:
    """Start a checkpointed run and return once it is inside its tool: the run, the names
    its tool charged, and the event that lets the tool return."""
    charged: list[str] = []
    in_tool, go_on = asyncio.Event(), asyncio.Event()
    agent = charging_agent(charged, in_tool, go_on)
    checkpoint = CheckpointOptions(store, run_id)
    first = asyncio.create_task(Runner.run(agent, "charge bob", checkpoint=checkpoint))
    await asyncio.wait_for(in_tool.wait(), 30)
    return first, charged, go_on


async def test_reissuing_a_live_run_id_waits_for_the_run_then_replays_it(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_store = backend.checkpointer()
    # Another instance on the same database where there is one (the lease is then the
    # database's), the same store in memory.
    second = backend.checkpointer() if backend.persistent else first_store
    first, charged, go_on = await run_into_the_tool(first_store, "job-1")
    asked = watch_leases(second, monkeypatch)
    again = charging_agent(charged, asyncio.Event(), asyncio.Event())
    reissued = asyncio.create_task(
        Runner.run(again, "charge bob", checkpoint=CheckpointOptions(second, "job-1"))
    )
    await asyncio.wait_for(asked.wait(), 30)  # it asks while the first run holds it
    go_on.set()
    result, replayed = await asyncio.gather(first, reissued)
    assert charged == ["bob"]
    assert replayed.output == result.output == "bob is charged"
    assert isinstance(again.model, ScriptedProvider) and again.model.calls == []
    snapshot = await first_store.load("job-1")
    assert snapshot is not None and len(snapshot.entries) == 4  # input, call, result, text


async def test_a_live_run_id_fails_fast_with_run_busy_error(backend: Backend) -> None:
    store = backend.checkpointer()
    first, charged, go_on = await run_into_the_tool(store, "job-2")
    reissued = Runner.run(
        charging_agent(charged, asyncio.Event(), asyncio.Event()),
        "charge bob",
        session=InMemorySession(),
        session_id="another-conversation",
        lease_timeout=0,
        checkpoint=CheckpointOptions(store, "job-2"),
    )
    try:
        with pytest.raises(RunBusyError) as info:
            await asyncio.wait_for(reissued, 30)  # (it would hang in its own tool otherwise)
    finally:
        go_on.set()
    assert info.value.hint is not None and "idempotency key" in info.value.hint
    await first
    assert charged == ["bob"]


async def test_a_run_id_live_in_another_process_is_waited_for(
    db_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = await spawn(db_backend, "run", "job-3")
    assert await next_line(worker) == "in-tool"
    store = db_backend.checkpointer()
    asked = watch_leases(store, monkeypatch)
    charged: list[str] = []
    again = charging_agent(charged, asyncio.Event(), asyncio.Event())
    reissued = asyncio.create_task(
        Runner.run(again, "charge bob", checkpoint=CheckpointOptions(store, "job-3"))
    )
    await asyncio.wait_for(asked.wait(), 30)
    assert worker.stdin is not None
    worker.stdin.close()  # the worker's tool returns, and its run completes
    assert await next_line(worker) == "done bob is charged"
    await finish(worker)
    replayed = await reissued
    assert replayed.output == "bob is charged" and charged == []
    assert isinstance(again.model, ScriptedProvider) and again.model.calls == []


# -- a third-party session ----------------------------------------------------------------


class DictSession:
    """A user's own store with just the protocol: load, append and clear."""

    def __init__(self) -> None:
        self.data: dict[str, list[TranscriptEntry]] = {}

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        return list(self.data.get(session_id, []))

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        self.data.setdefault(session_id, []).extend(entries)
        return run_id or "generated"

    async def clear(self, session_id: str) -> None:
        self.data.pop(session_id, None)


async def test_a_session_with_only_load_append_and_clear_runs_without_a_lease() -> None:
    session = DictSession()
    model = ScriptedProvider([text("Hello, Ada."), text("You are Ada.")])
    agent = Agent("chat", model=model)
    await Runner.run(agent, "I am Ada.", session=session, session_id="c")
    second = await Runner.run(agent, "Who am I?", session=session, session_id="c")
    assert second.output == "You are Ada."
    assert [m.content for m in model.calls[1]] == ["I am Ada.", "Hello, Ada.", "Who am I?"]
    assert len(session.data["c"]) == 4
