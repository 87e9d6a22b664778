"""A message that starts a new run while the previous one is chaining its leftovers."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia.testing import text
from lovia.web import ChatStore, RunSupervisor

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


async def test_a_new_start_during_chaining_never_makes_two_live_runs(store: ChatStore) -> None:
    gate, agent = gated_agent(text("one"), text("two"), text("three"))
    hold = _HoldFinish()
    supervisor = RunSupervisor({"helper": agent}, store, lifecycle=hold)  # type: ignore[arg-type]
    first = (await supervisor.start("a", session_id="s")).run
    await asyncio.wait_for(gate.entered.wait(), 5)
    gate.open()
    await asyncio.wait_for(hold.finishing.wait(), 5)
    # A message that reached the mailbox after the last turn began: it will chain.
    first.mailbox.push("late")
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
