"""A scheduling rig: a real SQLite chat store, a supervisor and a scheduler on a fake clock.

Nothing waits on the wall clock: the test moves ``clock`` and calls ``scheduler.tick()``,
then awaits the runs the tick started (``rig.settle()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.web.scheduling import Schedule, Scheduler, Schedules, ScheduleSpec
from lovia.web.store.base import ChatStore
from lovia.web.supervisor import RunSupervisor

from tests.support import pg_dsn, pg_dsn_or_none, pg_schema  # noqa: F401 - fixtures

START = 1_796_000_000.0  # 2026-11-30, a fixed "now"


class Clock:
    def __init__(self, t: float = START) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@dataclass
class Rig:
    store: ChatStore
    supervisor: RunSupervisor
    scheduler: Scheduler
    clock: Clock
    schedules: Schedules = field(init=False)

    def __post_init__(self) -> None:
        self.schedules = self.scheduler.schedules

    async def create(
        self, agent: str = "helper", session_id: str | None = None, **spec: Any
    ) -> Schedule:
        spec.setdefault("instruction", "check the build")
        return await self.schedules.create(
            ScheduleSpec.model_validate(spec), agent=agent, session_id=session_id
        )

    async def get(self, schedule_id: str) -> Schedule:
        return await self.schedules.get(schedule_id)

    async def settle(self) -> None:
        """Wait until no run is live (each run's task ends; chained runs too)."""
        for _ in range(1000):
            tasks = [r.task for r in self.supervisor.live_runs() if r.task is not None]
            if not tasks:
                return
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        raise AssertionError("runs never settled")


@pytest.fixture
async def make_rig(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    rigs: list[Rig] = []

    async def make(
        agents: dict[str, Agent[Any]] | Agent[Any],
        *,
        capacity: int = 8,
        clock: Clock | None = None,
        db: Path | None = None,
        store: ChatStore | None = None,
    ) -> Rig:
        if isinstance(agents, Agent):
            agents = {agents.name: agents}
        store = store or ChatStore.sqlite(str(db or tmp_path / "chat.db"))
        supervisor = RunSupervisor(agents, store, max_background_runs=capacity)
        clock = clock or Clock()
        rig = Rig(store, supervisor, Scheduler(store, supervisor, now=clock), clock)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        await rig.supervisor.aclose()
        await rig.store.aclose()
