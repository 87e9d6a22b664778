"""Scheduling under pressure: a flood of due fires on two slots, and two schedulers racing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lovia.testing import text
from lovia.web.scheduling import Scheduler
from lovia.web.store.base import ChatStore

from ..conftest import scripted_agent
from .conftest import START, Clock


async def test_two_hundred_due_on_two_slots_none_lost_none_doubled(make_rig: Any) -> None:
    rig = await make_rig(scripted_agent(*(text(f"r{i}") for i in range(200))), capacity=2)
    ids = [
        (await rig.create(trigger_kind="at", trigger_expr=str(START + 60))).id for _ in range(200)
    ]
    rig.clock.advance(61)
    started: list[str] = []
    deferred = 0
    for _ in range(400):
        report = await rig.scheduler.tick()
        started += report.outcomes.get("started", [])
        deferred += report.count("deferred")
        await rig.settle()
        if len(started) >= 200:
            break
    assert sorted(started) == sorted(ids)  # each exactly once
    assert deferred > 0
    assert (await rig.scheduler.tick()).outcomes == {}
    sessions = await rig.store.list_sessions(limit=500, offset=0)
    assert len(sessions) == 200  # one per fire, none leaked by a deferral
    for s in await rig.schedules.list():
        assert (s.fires, s.status) == (1, "finished")


class TwoPartyBarrier:
    """Both schedulers read the same due rows before either claims one."""

    def __init__(self) -> None:
        self.arrived = 0
        self.both = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), 10)


async def test_two_schedulers_on_one_file_fire_each_slot_once(
    make_rig: Any, tmp_path: Path
) -> None:
    db = tmp_path / "shared.db"
    await race_two_schedulers(make_rig, lambda: ChatStore.sqlite(str(db)))


async def test_two_schedulers_on_one_postgres_schema_fire_each_slot_once(
    make_rig: Any, pg_dsn: str, pg_schema: str
) -> None:
    await race_two_schedulers(make_rig, lambda: ChatStore.postgres(pg_dsn, schema=pg_schema))


async def race_two_schedulers(make_rig: Any, open_store: Any) -> None:
    clock = Clock()
    a = await make_rig(
        scripted_agent(*(text("a") for _ in range(40))),
        clock=clock,
        store=open_store(),
        capacity=50,
    )
    b = await make_rig(
        scripted_agent(*(text("b") for _ in range(40))),
        clock=clock,
        store=open_store(),
        capacity=50,
    )
    ids = [(await a.create(trigger_kind="every", trigger_expr="1m")).id for _ in range(20)]
    barrier = TwoPartyBarrier()
    for rig in (a, b):
        real = rig.store.due_schedules

        async def due(now: float, *, limit: int = 100, real: Any = real) -> Any:
            rows = await real(now, limit=limit)
            await barrier.wait()
            return rows

        rig.store.due_schedules = due  # the real query, then a rendezvous
    clock.advance(61)
    ra, rb = await asyncio.gather(a.scheduler.tick(), b.scheduler.tick())
    fired = ra.outcomes.get("started", []) + rb.outcomes.get("started", [])
    assert sorted(fired) == sorted(ids)
    assert ra.count("lost") + rb.count("lost") == 20  # every row was contested, one won
    await a.settle()
    await b.settle()
    sessions = await a.store.list_sessions(limit=100, offset=0)
    assert len(sessions) == 20
    for s in await a.schedules.list():
        assert s.fires == 1 and s.next_fire_at == START + 120


async def test_two_apps_on_one_file_race_their_loops(tmp_path: Path) -> None:
    from lovia.web import create_app

    db = tmp_path / "apps.db"
    apps = [
        create_app(
            scripted_agent(*(text("x") for _ in range(60))),
            db_path=db,
            generate_titles=False,
            scheduler_poll=None,
        )
        for _ in range(2)
    ]
    lifespans = [app.router.lifespan_context(app) for app in apps]
    for lifespan in lifespans:
        await lifespan.__aenter__()
    try:
        schedulers: list[Scheduler] = [app.state.lovia_background.scheduler for app in apps]
        clock = Clock()
        for s in schedulers:
            s.now = s.schedules.now = clock
        from lovia.web.scheduling import ScheduleSpec

        spec = ScheduleSpec(instruction="tick", trigger_kind="every", trigger_expr="1m")
        ids = [(await schedulers[0].schedules.create(spec, agent="helper")).id for _ in range(25)]
        total: list[str] = []
        for _ in range(3):  # three slots, each contested by both apps
            clock.advance(60)
            reports = await asyncio.gather(*(s.tick() for s in schedulers))
            total += [i for r in reports for i in r.outcomes.get("started", [])]
            for app in apps:
                for run in app.state.lovia.supervisor.live_runs():
                    assert run.task is not None
                    await asyncio.wait_for(asyncio.shield(run.task), 30)
        assert sorted(total) == sorted(ids * 3)
    finally:
        for lifespan in lifespans:
            await lifespan.__aexit__(None, None, None)


async def test_a_row_edited_into_nonsense_is_deactivated_not_fatal(make_rig: Any) -> None:
    from lovia.web.store.base import ScheduleRow

    rig = await make_rig(scripted_agent(text("fine")))
    good = await rig.create(trigger_kind="at", trigger_expr=str(START + 60))
    bad = ScheduleRow(
        "sch_bad", "helper", None, {"trigger_kind": "cron", "trigger_expr": "?"}, next_fire_at=START
    )
    await rig.store.save_schedule(bad)
    rig.clock.advance(61)
    report = await rig.scheduler.tick()
    assert report.outcomes == {"failed": ["sch_bad"], "started": [good.id]}
    assert (await rig.store.get_schedule("sch_bad")).active is False
    await rig.settle()


async def test_a_fire_a_crash_interrupted_does_not_block_the_next(make_rig: Any) -> None:
    from lovia.web.store.base import RunRecord

    rig = await make_rig(scripted_agent(text("a"), text("b")))
    s = await rig.create(trigger_kind="every", trigger_expr="1m")
    rig.clock.advance(61)
    await rig.scheduler.tick()
    await rig.settle()
    previous = (await rig.get(s.id)).last_session_id
    # The previous fire's session still points at a run: another process runs it...
    await rig.store.set_active_run(previous, "elsewhere")
    await rig.store.record_run_started(
        RunRecord("elsewhere", previous, "helper", "schedule", started_at=START)
    )
    rig.clock.advance(60)
    assert (await rig.scheduler.tick()).outcomes == {"skipped": [s.id]}
    # ... until a restart sweeps it: an interrupted run no longer holds the schedule back.
    await rig.store.sweep_stale_runs()
    rig.clock.advance(60)
    assert (await rig.scheduler.tick()).outcomes == {"started": [s.id]}
    await rig.settle()
