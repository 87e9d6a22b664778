"""A message that starts a new run while the previous one is chaining its leftovers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia.testing import text
from lovia.web import ChatStore, RunConflict, RunSupervisor

from ..conftest import gated_agent


class _HoldFinish:
    """A lifecycle whose ``run_finished`` parks the first finishing run until released."""

    def __init__(self) -> None:
        self.finishing = asyncio.Event()
        self.release = asyncio.Event()

    async def run_started(self, live: Any, *, created: bool = False) -> None:
        return None

    async def run_finished(self, live: Any, **_: Any) -> None:
        if not self.finishing.is_set():
            self.finishing.set()
            await self.release.wait()


def _hold_clearing(store: ChatStore) -> _HoldFinish:
    """Park the first clearing of a chat's active run (the run is over, its slot still held)."""
    hold = _HoldFinish()
    original = store.set_active_run

    async def set_active_run(session_id: str, run_id: str | None, **kw: Any) -> Any:
        if run_id is None and not hold.finishing.is_set():
            hold.finishing.set()
            await hold.release.wait()
        return await original(session_id, run_id, **kw)

    store.set_active_run = set_active_run  # type: ignore[method-assign]
    return hold


async def _finished_with_a_late_message(
    store: ChatStore, supervisor: RunSupervisor, gate: Any, hold: _HoldFinish
) -> Any:
    """Start a run, let its last turn end, attach a message then (it will chain), and
    park the run in its lifecycle's ``run_finished`` (its slot already free)."""
    clearing = _hold_clearing(store)
    first = (await supervisor.start("a", session_id="s")).run
    gate.open()
    await asyncio.wait_for(clearing.finishing.wait(), 5)
    assert (await supervisor.start("late", session_id="s")).attached
    clearing.release.set()
    await asyncio.wait_for(hold.finishing.wait(), 5)
    return first


async def test_a_new_start_during_chaining_never_makes_two_live_runs(store: ChatStore) -> None:
    gate, agent = gated_agent(text("one"), text("two"), text("three"))
    hold = _HoldFinish()
    supervisor = RunSupervisor({"helper": agent}, store, lifecycle=hold)  # type: ignore[arg-type]
    first = await _finished_with_a_late_message(store, supervisor, gate, hold)
    second = await supervisor.start("new", session_id="s")  # the slot is already free
    assert not second.attached
    hold.release.set()
    assert first.task is not None
    await asyncio.wait_for(asyncio.shield(first.task), 5)
    live = supervisor.live("s")
    records = [r async for r in supervisor.follow(first.run_id)]
    chained = records[-1].data.get("next_run_id")
    # one run per session: the late message went to the run that is live, not a second one
    assert chained in (None, second.run.run_id), (chained, second.run.run_id)
    assert live is second.run
    rest = [r async for r in supervisor.follow(second.run.run_id)]
    assert rest[-1].type == "done"
    contents = [e.get("content") for e in (await supervisor.snapshot("s")).entries]
    assert "late" in contents, contents
    await supervisor.aclose()


async def test_a_blocking_chat_during_chaining_conflicts(store: ChatStore) -> None:
    gate, agent = gated_agent(text("one"), text("two"), text("three"))
    hold = _HoldFinish()
    supervisor = RunSupervisor({"helper": agent}, store, lifecycle=hold)  # type: ignore[arg-type]
    first = await _finished_with_a_late_message(store, supervisor, gate, hold)
    with pytest.raises(RunConflict):
        await asyncio.wait_for(supervisor.run_blocking("now", session_id="s"), 5)
    hold.release.set()
    assert first.task is not None
    await asyncio.wait_for(asyncio.shield(first.task), 5)
    records = [r async for r in supervisor.follow(first.run_id)]
    chained = records[-1].data["next_run_id"]
    rest = [r async for r in supervisor.follow(chained)]
    assert rest[-1].data["status"] == "completed"
    assert not supervisor.busy("s")
    await supervisor.aclose()
