"""The scheduler: fires through the supervisor, once per slot, on an injected clock."""

from __future__ import annotations

from typing import Any

from lovia import Agent
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry
from lovia.web.scheduling import Scheduling

from ..conftest import Gate, scripted_agent
from .conftest import START, Clock

HOUR = 3600.0


def texts(n: int, name: str = "helper") -> Agent[Any]:
    return scripted_agent(*(text(f"done {i}") for i in range(n)), name=name)


async def user_messages(rig: Any, session_id: str) -> list[str]:
    entries = await rig.store.session.load(session_id)
    return [
        e.content
        for e in entries
        if isinstance(e, InputEntry) and e.role == "user" and isinstance(e.content, str)
    ]


async def test_at_fires_once_then_deactivates(make_rig: Any) -> None:
    rig = await make_rig(texts(1))
    s = await rig.create(trigger_kind="at", trigger_expr=str(START + 60))
    assert (await rig.scheduler.tick()).outcomes == {}  # not due yet
    rig.clock.advance(61)
    report = await rig.scheduler.tick()
    assert report.outcomes == {"started": [s.id]}
    await rig.settle()
    after = await rig.get(s.id)
    assert (after.status, after.finished_reason, after.fires) == ("finished", "fired", 1)
    assert after.next_fire_at is None
    assert await user_messages(rig, after.last_session_id) == ["check the build"]
    rig.clock.advance(HOUR)
    assert (await rig.scheduler.tick()).outcomes == {}


async def test_missed_slots_coalesce_into_one_fire(make_rig: Any) -> None:
    rig = await make_rig(texts(2))
    s = await rig.create(trigger_kind="every", trigger_expr="10m")
    assert s.next_fire_at == START + 600
    rig.clock.advance(600 + 35 * 60)  # the server was down for seven slots
    assert (await rig.scheduler.tick()).count("started") == 1
    await rig.settle()
    assert (await rig.scheduler.tick()).outcomes == {}
    after = await rig.get(s.id)
    assert after.fires == 1 and after.next_fire_at == START + 600 * 5  # the grid, after now


async def test_cron_fires_on_its_slots(make_rig: Any) -> None:
    rig = await make_rig(texts(2))
    s = await rig.create(trigger_kind="cron", trigger_expr="0 * * * *")
    rig.clock.t = s.next_fire_at
    assert (await rig.scheduler.tick()).count("started") == 1
    await rig.settle()
    assert (await rig.get(s.id)).next_fire_at == s.next_fire_at + HOUR


async def test_an_expired_schedule_deactivates_without_firing(make_rig: Any) -> None:
    rig = await make_rig(texts(0))
    s = await rig.create(trigger_kind="every", trigger_expr="1h", expires_at=START + 30 * 60)
    rig.clock.advance(2 * HOUR)
    assert (await rig.scheduler.tick()).outcomes == {"expired": [s.id]}
    after = await rig.get(s.id)
    assert (after.status, after.finished_reason, after.fires) == ("finished", "expired", 0)
    assert await rig.store.list_sessions(limit=10, offset=0) == []


async def test_max_fires_stops_the_schedule(make_rig: Any) -> None:
    rig = await make_rig(texts(3))
    s = await rig.create(trigger_kind="every", trigger_expr="1m", max_fires=2)
    for _ in range(3):
        rig.clock.advance(61)
        await rig.scheduler.tick()
        await rig.settle()
    after = await rig.get(s.id)
    assert (after.fires, after.status, after.finished_reason) == (
        2,
        "finished",
        "max_fires reached",
    )


async def test_fresh_sessions_and_a_skip_while_the_previous_fire_runs(make_rig: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("one"), text("two"), tools=[gate.tool])
    rig = await make_rig(agent)
    s = await rig.create(trigger_kind="every", trigger_expr="1m")
    rig.clock.advance(61)
    assert (await rig.scheduler.tick()).count("started") == 1
    await gate.entered.wait()
    first = (await rig.get(s.id)).last_session_id
    rig.clock.advance(60)
    assert (await rig.scheduler.tick()).outcomes == {"skipped": [s.id]}
    gate.open()
    await rig.settle()
    rig.clock.advance(60)
    assert (await rig.scheduler.tick()).count("started") == 1
    await rig.settle()
    after = await rig.get(s.id)
    assert after.last_session_id != first and (after.fires, after.skipped) == (2, 1)
    assert [r.session_id for r in after.recent] == [first, after.last_session_id]


async def test_continue_session_joins_the_live_run_or_starts_one(make_rig: Any) -> None:
    gate = Gate()
    model = ScriptedProvider([call("wait_gate"), text("saw it"), text("again")])
    agent = Agent(name="helper", model=model, tools=[gate.tool])
    rig = await make_rig(agent)
    chat = await rig.supervisor.start("hello", session_id="chat1")
    await gate.entered.wait()
    s = await rig.create(
        trigger_kind="every", trigger_expr="1m", continue_session=True, session_id="chat1"
    )
    rig.clock.advance(61)
    assert (await rig.scheduler.tick()).outcomes == {"attached": [s.id]}
    assert (await rig.get(s.id)).last_run_id == chat.run.run_id
    gate.open()
    await rig.settle()
    rig.clock.advance(60)
    assert (await rig.scheduler.tick()).outcomes == {"started": [s.id]}
    await rig.settle()
    assert await user_messages(rig, "chat1") == ["hello", "check the build", "check the build"]


async def test_continue_session_without_a_session_pins_the_first_one(make_rig: Any) -> None:
    rig = await make_rig(texts(2))
    s = await rig.create(trigger_kind="every", trigger_expr="1m", continue_session=True)
    for _ in range(2):
        rig.clock.advance(61)
        await rig.scheduler.tick()
        await rig.settle()
    after = await rig.get(s.id)
    assert after.session_id is not None and after.fires == 2
    assert len(await user_messages(rig, after.session_id)) == 2
    assert len(await rig.store.list_sessions(limit=10, offset=0)) == 1


async def test_at_capacity_a_fire_is_deferred_and_leaks_no_session(make_rig: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("chat done"), text("fired"), tools=[gate.tool])
    rig = await make_rig(agent, capacity=1)
    await rig.supervisor.start("hold the slot", session_id="busy")
    await gate.entered.wait()
    s = await rig.create(trigger_kind="at", trigger_expr=str(START + 60))
    rig.clock.advance(61)
    assert (await rig.scheduler.tick()).outcomes == {"deferred": [s.id]}
    assert [m.id for m in await rig.store.list_sessions(limit=10, offset=0)] == ["busy"]
    assert (await rig.get(s.id)).status == "active"
    gate.open()
    await rig.settle()
    assert (await rig.scheduler.tick()).outcomes == {"started": [s.id]}
    await rig.settle()
    assert (await rig.get(s.id)).fires == 1


async def test_an_unavailable_agent_advances_and_records_a_failure(make_rig: Any) -> None:
    rig = await make_rig(texts(0))
    s = await rig.create(agent="ghost", trigger_kind="every", trigger_expr="1h")
    rig.clock.advance(HOUR + 1)
    assert (await rig.scheduler.tick()).outcomes == {"failed": [s.id]}
    after = await rig.get(s.id)
    assert after.failures == 1 and "ghost" in (after.last_error or "")
    assert after.next_fire_at == START + 2 * HOUR and after.status == "active"


async def test_until_appends_the_protocol_and_the_run_cancels_its_schedule(
    make_rig: Any, tmp_path: Any
) -> None:
    clock = Clock()
    rig = await make_rig(texts(0), clock=clock)
    s = await rig.create(
        trigger_kind="every", trigger_expr="1h", until="the build is green", max_fires=10
    )
    model = ScriptedProvider(
        [
            call("cancel_schedule", {"schedule_id": s.id, "reason": "the build is green"}),
            text("stopped"),
        ]
    )
    agent = Agent(name="helper", model=model, plugins=[Scheduling(rig.store, now=clock)])
    rig.supervisor.agents["helper"] = agent  # the same name, now with the plugin
    rig.clock.advance(HOUR + 1)
    assert (await rig.scheduler.tick()).count("started") == 1
    await rig.settle()
    sent = model.calls[0][-1].content
    assert isinstance(sent, str) and sent.startswith("check the build\n\n<schedule-stop-condition")
    assert "the build is green" in sent and f'cancel_schedule(schedule_id="{s.id}"' in sent
    after = await rig.get(s.id)
    assert (after.status, after.finished_reason) == ("finished", "cancelled: the build is green")
    rig.clock.advance(HOUR)
    assert (await rig.scheduler.tick()).outcomes == {}


async def test_schedule_run_needs_approval_and_remembers_the_chat(make_rig: Any) -> None:
    from lovia import Runner
    from lovia.stores.memory import InMemorySession

    clock = Clock()
    rig = await make_rig(texts(0), clock=clock)
    asked: list[str] = []

    async def approve(tool_call: Any, ctx: Any) -> bool:
        asked.append(tool_call.name)
        return True

    args = {"instruction": "ping", "trigger_kind": "every", "trigger_expr": "2h", "max_fires": 3}
    model = ScriptedProvider(
        [
            call("schedule_run", args),
            call("schedule_run", {**args, "trigger_expr": "5s"}),
            call("list_schedules", {}),
            text("ok"),
        ]
    )
    agent = Agent(
        name="helper",
        model=model,
        plugins=[Scheduling(rig.store, now=clock)],
        approval_handler=approve,
    )
    result = await Runner.run(agent, "ping me", session=InMemorySession(), session_id="c9")
    assert asked == ["schedule_run", "schedule_run"]
    outputs = [e.output for e in result.entries if e.type == "tool_result"]
    assert outputs[0].startswith("Scheduled sch_")
    assert "at least 60 s" in outputs[1]
    assert "every '2h'" in outputs[2]
    (only,) = await rig.schedules.list()
    assert only.session_id == "c9" and only.agent == "helper" and only.spec.max_fires == 3


async def test_a_continue_session_schedule_finishes_when_its_chat_is_deleted(
    make_rig: Any,
) -> None:
    rig = await make_rig(texts(1))
    await rig.store.create_session("chat2", agent="helper", title="mine")
    s = await rig.create(
        trigger_kind="every", trigger_expr="1m", continue_session=True, session_id="chat2"
    )
    await rig.store.delete_session("chat2")
    rig.clock.advance(61)
    assert (await rig.scheduler.tick()).outcomes == {"failed": [s.id]}
    after = await rig.get(s.id)
    assert (after.status, after.finished_reason) == ("finished", "its session was deleted")
    assert await rig.store.get_session("chat2") is None  # not brought back


def test_a_non_positive_poll_is_refused(tmp_path: Any) -> None:
    import pytest
    from lovia.exceptions import UserError
    from lovia.web import create_app

    for poll in (0, -1.0):
        with pytest.raises(UserError, match="scheduler_poll"):
            create_app(
                texts(0), db_path=tmp_path / "x.db", generate_titles=False, scheduler_poll=poll
            )


async def test_a_skipped_slot_does_not_count_toward_max_fires(make_rig: Any) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("one"), text("two"), tools=[gate.tool])
    rig = await make_rig(agent)
    s = await rig.create(trigger_kind="every", trigger_expr="1m", max_fires=2)
    rig.clock.advance(61)
    assert (await rig.scheduler.tick()).count("started") == 1
    await gate.entered.wait()
    rig.clock.advance(60)
    assert (await rig.scheduler.tick()).outcomes == {"skipped": [s.id]}
    assert (await rig.get(s.id)).status == "active"  # one fire so far, one to go
    gate.open()
    await rig.settle()
    rig.clock.advance(60)
    assert (await rig.scheduler.tick()).count("started") == 1
    await rig.settle()
    after = await rig.get(s.id)
    assert (after.fires, after.skipped, after.finished_reason) == (2, 1, "max_fires reached")


async def test_scheduling_without_a_store_offers_no_tools_until_an_app_binds_it(
    tmp_path: Any, asgi_client: Any
) -> None:
    from lovia import Runner
    from lovia.web import create_app

    plugin = Scheduling()
    model = ScriptedProvider([text("plain"), text("served")])
    agent = Agent(name="helper", model=model, plugins=[plugin])
    assert (await Runner.run(agent, "hi")).output == "plain"  # no store: no tools, no crash
    assert "schedule_run" not in model.tools[0]
    app = create_app(agent, db_path=tmp_path / "c.db", generate_titles=False, scheduler_poll=None)
    await asgi_client(app)  # the lifespan binds the app's store
    assert plugin.store is app.state.lovia.store
    await Runner.run(agent, "hi again")
    assert {"schedule_run", "list_schedules", "cancel_schedule"} <= set(model.tools[1])


async def test_schedules_survive_a_restart_and_a_downtime_coalesces(
    make_rig: Any, tmp_path: Any
) -> None:
    db = tmp_path / "restart.db"
    clock = Clock()
    first = await make_rig(texts(0), clock=clock, db=db)
    s = await first.create(trigger_kind="every", trigger_expr="15m")
    await first.supervisor.aclose()
    await first.store.aclose()
    clock.advance(6 * 900 + 1)  # down for six slots
    second = await make_rig(texts(1), clock=clock, db=db)
    assert (await second.scheduler.tick()).outcomes == {"started": [s.id]}
    await second.settle()
    after = await second.get(s.id)
    assert after.fires == 1 and after.next_fire_at == START + 7 * 900
