"""Subagents served by the app: supervised children in task sessions, reports routed back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lovia import Agent
from lovia.plugins.subagents import SubagentReport, Subagents
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry
from lovia.web import create_app
from lovia.web.subagents import SupervisedSubagents, subagent_deliver, wire_subagents

from ..conftest import Gate


async def settle(app: Any) -> None:
    supervisor = app.state.lovia.supervisor
    for _ in range(1000):
        for plugin in (
            app.state.lovia_background.subagents.plugins
            if (app.state.lovia_background.subagents)
            else ()
        ):
            await asyncio.wait_for(plugin.drain(), 30)
        # Read the live runs after draining: a delivery may just have started the parent.
        tasks = [r.task for r in supervisor.live_runs() if r.task is not None]
        if not tasks:
            return
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
    raise AssertionError("runs never settled")


async def started(app: Any) -> Any:
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    return lifespan


async def reports_in(app: Any, session_id: str) -> list[str]:
    entries = await app.state.lovia.store.session.load(session_id)
    return [
        e.content
        for e in entries
        if isinstance(e, InputEntry)
        and isinstance(e.content, str)
        and "subagent-report" in e.content
    ]


def test_wiring_is_idempotent_and_leaves_custom_plugins_alone(tmp_path: Path) -> None:
    default = Subagents()
    custom = Subagents(deliver=lambda report: None)
    lead = Agent(name="lead", model=ScriptedProvider([]), plugins=[default, custom])
    app = create_app(lead, db_path=tmp_path / "c.db", generate_titles=False, wire_subagents=True)
    wiring = app.state.lovia_background.subagents
    assert isinstance(wiring, SupervisedSubagents)
    assert default.run_child == wiring.run_child and default.deliver == wiring.deliver
    assert custom.run_child is None
    assert wire_subagents(app) == [default]  # again: nothing changes
    assert wire_subagents(app) == [default]


async def test_a_child_runs_in_a_task_session_and_its_report_starts_the_idle_parent(
    tmp_path: Path,
) -> None:
    worker = Agent(name="worker", model=ScriptedProvider([text("42 apples")]))
    lead_model = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "count the apples"}),
            text("spawned"),
            text("The worker says 42."),
        ]
    )
    lead = Agent(name="lead", model=lead_model, plugins=[Subagents([worker])])
    app = create_app(
        lead,
        db_path=tmp_path / "c.db",
        generate_titles=False,
        wire_subagents=True,
        scheduler_poll=None,
    )
    lifespan = await started(app)
    try:
        supervisor = app.state.lovia.supervisor
        await supervisor.start("count apples in the background", session_id="parent")
        await settle(app)
        store = app.state.lovia.store
        metas = await store.list_sessions(limit=10, offset=0)
        (task,) = [m for m in metas if m.id != "parent"]
        assert task.parent_id == "parent" and task.agent == "worker"
        assert task.title.startswith("sa_1: count the apples")
        (report,) = await reports_in(app, "parent")
        assert 'status="completed"' in report and "42 apples" in report
        assert lead_model.calls[-1][-1].content == report  # the idle parent ran on it
        entries = await store.session.load(task.id)
        assert [e.content for e in entries if isinstance(e, InputEntry)] == ["count the apples"]
        if hasattr(store, "list_runs"):
            sources = {r.source for r in await store.list_runs(limit=10)}
            assert "subagent" in sources or sources <= {"chat"}
    finally:
        await lifespan.__aexit__(None, None, None)


async def test_a_report_joins_the_parents_live_run(tmp_path: Path) -> None:
    parent_gate = Gate("parent_gate")
    child_done = asyncio.Event()

    worker = Agent(name="worker", model=ScriptedProvider([text("done early")]))
    lead_model = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "quick job"}),
            call("parent_gate"),
            text("seen"),
        ]
    )
    lead = Agent(
        name="lead", model=lead_model, plugins=[Subagents([worker])], tools=[parent_gate.tool]
    )
    app = create_app(
        lead,
        db_path=tmp_path / "c.db",
        generate_titles=False,
        wire_subagents=True,
        scheduler_poll=None,
    )
    wiring = app.state.lovia_background.subagents
    original = wiring.deliver

    async def deliver(report: SubagentReport) -> None:
        await original(report)
        child_done.set()

    Subagents_plugin = lead.plugins[0]
    Subagents_plugin.deliver = deliver  # type: ignore[attr-defined]
    lifespan = await started(app)
    try:
        await app.state.lovia.supervisor.start("go", session_id="parent")
        await asyncio.wait_for(child_done.wait(), 10)  # delivered while the parent waits
        parent_gate.open()
        await settle(app)
        (report,) = await reports_in(app, "parent")
        assert "done early" in report
        # One parent run: the report went into its mailbox, not into a second run.
        assert len(lead_model.calls) == 3 and lead_model.calls[2][-1].content == report
    finally:
        await lifespan.__aexit__(None, None, None)


async def test_cancel_subagent_cancels_the_supervised_child(tmp_path: Path) -> None:
    child_gate = Gate("child_gate")
    parent_gate = Gate("parent_gate")
    worker = Agent(
        name="worker",
        model=ScriptedProvider([call("child_gate"), text("never")]),
        tools=[child_gate.tool],
    )
    lead_model = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "long job"}),
            call("parent_gate"),
            call("cancel_subagent", {"id": "sa_1"}),
            text("cancelled it"),
        ]
    )
    lead = Agent(
        name="lead", model=lead_model, plugins=[Subagents([worker])], tools=[parent_gate.tool]
    )
    app = create_app(
        lead,
        db_path=tmp_path / "c.db",
        generate_titles=False,
        wire_subagents=True,
        scheduler_poll=None,
    )
    lifespan = await started(app)
    try:
        supervisor = app.state.lovia.supervisor
        await supervisor.start("go", session_id="parent")
        await asyncio.wait_for(child_gate.entered.wait(), 10)
        (child_run,) = [r for r in supervisor.live_runs() if r.session_id != "parent"]
        parent_gate.open()
        assert child_run.task is not None
        await asyncio.wait_for(asyncio.shield(child_run.task), 10)
        assert supervisor.live(child_run.session_id) is None
        await settle(app)
        assert await reports_in(app, "parent") == []  # a cancelled child sends no report
        meta = await app.state.lovia.store.get_session(child_run.session_id)
        assert meta is not None and meta.active_run_id is None
    finally:
        await lifespan.__aexit__(None, None, None)


async def test_a_failed_child_delivers_a_failure_report(tmp_path: Path) -> None:
    worker = Agent(name="worker", model=ScriptedProvider([RuntimeError("model exploded")]))
    lead_model = ScriptedProvider(
        [
            call("spawn_subagent", {"prompt": "doomed"}),
            text("spawned"),
            text("noted the failure"),
        ]
    )
    lead = Agent(name="lead", model=lead_model, plugins=[Subagents([worker])])
    app = create_app(
        lead,
        db_path=tmp_path / "c.db",
        generate_titles=False,
        wire_subagents=True,
        scheduler_poll=None,
    )
    lifespan = await started(app)
    try:
        await app.state.lovia.supervisor.start("go", session_id="parent")
        await settle(app)
        (report,) = await reports_in(app, "parent")
        assert 'status="failed"' in report and "model exploded" in report
    finally:
        await lifespan.__aexit__(None, None, None)


async def test_delivery_to_a_gone_session_is_dropped_and_a_full_server_keeps_it(
    tmp_path: Path,
) -> None:
    gate = Gate()
    lead = Agent(
        name="lead", model=ScriptedProvider([call("wait_gate"), text("x")]), tools=[gate.tool]
    )
    app = create_app(
        lead,
        db_path=tmp_path / "c.db",
        generate_titles=False,
        max_background_runs=1,
        scheduler_poll=None,
    )
    lifespan = await started(app)
    try:
        supervisor = app.state.lovia.supervisor
        report = SubagentReport("sa_9", "worker", "completed", "late news", "nowhere")
        assert await subagent_deliver(supervisor, report) == "dropped"
        assert await subagent_deliver(supervisor, SubagentReport("a", "w", "completed", "x")) == (
            "dropped"
        )
        await app.state.lovia.store.create_session("idle", agent="lead", title="idle")
        await supervisor.start("hold the only slot", session_id="busy")
        await gate.entered.wait()
        kept = SubagentReport("sa_3", "worker", "completed", "kept for later", "idle")
        assert await subagent_deliver(supervisor, kept) == "stored"
        assert await reports_in(app, "idle") == [kept.render()]
        gate.open()
    finally:
        await lifespan.__aexit__(None, None, None)


async def test_shutdown_cancels_children_and_leaves_no_resumable_task_session(
    tmp_path: Path,
) -> None:
    child_gate = Gate("child_gate")
    worker = Agent(
        name="worker",
        model=ScriptedProvider([call("child_gate"), text("x")]),
        tools=[child_gate.tool],
    )
    lead_model = ScriptedProvider([call("spawn_subagent", {"prompt": "slow"}), text("later")])
    lead = Agent(name="lead", model=lead_model, plugins=[Subagents([worker])])
    app = create_app(
        lead,
        db_path=tmp_path / "c.db",
        generate_titles=False,
        wire_subagents=True,
        scheduler_poll=None,
    )
    lifespan = await started(app)
    store = app.state.lovia.store
    await app.state.lovia.supervisor.start("go", session_id="parent")
    await asyncio.wait_for(child_gate.entered.wait(), 10)
    (child,) = [r for r in app.state.lovia.supervisor.live_runs() if r.session_id != "parent"]
    await lifespan.__aexit__(None, None, None)
    reopened = create_app(
        lead, db_path=tmp_path / "c.db", generate_titles=False, scheduler_poll=None
    )
    lifespan = await started(reopened)
    try:
        meta = await reopened.state.lovia.store.get_session(child.session_id)
        assert meta is not None and meta.active_run_id is None  # cancelled, not interrupted
        assert await reopened.state.lovia.store.checkpointer.load(child.run_id) is None
    finally:
        await lifespan.__aexit__(None, None, None)
    del store
