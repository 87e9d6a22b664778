"""Subagents served by the web app: children as supervised runs, reports routed back.

``wire_subagents(app)`` (or ``create_app(wire_subagents=True)``) finds the served agents'
``Subagents`` plugins left at the core defaults (no ``deliver``, no ``run_child``) and
rewires them to

* ``run_child``: a child runs as a **clientless supervised run** in a *task session* of its
  own (``ChatMeta.parent_id`` names the parent chat), so the UI lists it, can watch it live
  and can answer its approvals. ``cancel_subagent`` (the child's token) cancels that run.
* detached delivery through ``subagent_deliver``: the report is injected into the parent's
  live run, or starts a clientless run in the parent chat when it is idle; it is dropped when
  the parent chat is gone, and kept in the chat's transcript when every run slot is busy. A
  child that fails delivers a failure report like any other.

Children outlive the parent's run (detached mode); the app's shutdown cancels them first, so
a task session is never left half-run for a resume with the wrong agent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Literal
from uuid import uuid4

from lovia.exceptions import LoviaError
from lovia.transcript import InputEntry

from .errors import CapacityExceeded, RunConflict

if TYPE_CHECKING:
    from fastapi import FastAPI
    from lovia.plugins.subagents import ChildSpec, SubagentReport, Subagents
    from lovia.runtime.result import RunResult

    from .supervisor import RunSupervisor

__all__ = ["Delivery", "SupervisedSubagents", "subagent_deliver", "wire_subagents"]

logger = logging.getLogger(__name__)

Delivery = Literal["injected", "started", "stored", "dropped"]
_TITLE_PROMPT = 50


async def subagent_deliver(supervisor: RunSupervisor, report: SubagentReport) -> Delivery:
    """Route a detached child's report to its parent chat (see the module docstring)."""
    session_id = report.parent_session_id
    store = supervisor.store
    if session_id is None or await store.get_session(session_id) is None:
        logger.info("dropping the report of subagent %s: its chat is gone", report.id)
        return "dropped"
    message = report.render()
    try:
        if supervisor.live(session_id) is not None:
            supervisor.inject(session_id, message)
            return "injected"
        started = await supervisor.start(message, session_id=session_id, source="subagent")
    except (CapacityExceeded, RunConflict):
        # No slot (or a blocking chat holds the session, or its run is being cancelled):
        # keep the report in the chat, where its next run reads it.
        await store.session.append(session_id, [InputEntry(role="user", content=message)])
        return "stored"
    return "injected" if started.attached else "started"


class SupervisedSubagents:
    """The vehicle and the delivery of the ``Subagents`` plugins wired into one app."""

    def __init__(self, supervisor: RunSupervisor) -> None:
        self.supervisor = supervisor
        self.plugins: list[Subagents] = []
        self.children: dict[str, str] = {}
        """Child id -> its task session, while it runs."""

    def __repr__(self) -> str:
        return f"SupervisedSubagents(plugins={len(self.plugins)}, running={len(self.children)})"

    def wire(self, plugin: Subagents) -> bool:
        """Rewire ``plugin`` if it is at the core defaults; whether it was rewired."""
        if any(p is plugin for p in self.plugins):
            return False
        if plugin.deliver is not None or plugin.run_child is not None:
            return False  # the user chose a vehicle or a delivery: leave it alone
        plugin.deliver = self.deliver
        plugin.run_child = self.run_child
        self.plugins.append(plugin)
        return True

    async def deliver(self, report: SubagentReport) -> None:
        outcome = await subagent_deliver(self.supervisor, report)
        logger.info("report of subagent %s: %s", report.id, outcome)

    async def run_child(self, spec: ChildSpec) -> RunResult[Any]:
        """Run the child as a supervised run in a new task session; its result."""
        supervisor = self.supervisor
        if len(supervisor.live_runs()) >= supervisor.max_background_runs:
            raise CapacityExceeded(
                "every background-run slot is busy, so the subagent could not start",
                hint="wait for a run to finish, then spawn it again",
            )
        session_id = uuid4().hex
        prompt = " ".join(spec.prompt.split())
        if len(prompt) > _TITLE_PROMPT:
            prompt = prompt[: _TITLE_PROMPT - 1] + "…"
        await supervisor.store.create_session(
            session_id,
            agent=spec.agent.name,
            title=f"{spec.id}: {prompt}",
            parent_id=spec.parent_session_id,
        )
        try:
            run = await supervisor.start_child(
                spec.agent, spec.prompt, session_id=session_id, mailbox=spec.mailbox
            )
        except BaseException:
            await supervisor.store.delete_session(session_id)  # nothing ran: no stray chat
            raise
        self.children[spec.id] = session_id
        assert run.task is not None
        try:
            await spec.token.race(asyncio.shield(run.task))
        except BaseException:  # cancel_subagent, the parent's teardown, or shutdown
            stop = asyncio.ensure_future(supervisor.stop(session_id))
            await asyncio.shield(stop)
            raise
        finally:
            self.children.pop(spec.id, None)
        if run.handle is None:
            raise LoviaError("the subagent's run failed before it started")
        return await run.handle.result()

    async def aclose(self) -> None:
        """Cancel every running child (each stops its supervised run)."""
        for plugin in self.plugins:
            await plugin.aclose()


def wire_subagents(app: FastAPI) -> list[Subagents]:
    """Rewire the served agents' default ``Subagents`` plugins to the app's supervisor
    (idempotent); returns every plugin wired so far."""
    from lovia.plugins.subagents import Subagents

    background = app.state.lovia_background
    if background.subagents is None:
        background.subagents = SupervisedSubagents(background.state.supervisor)
    wiring: SupervisedSubagents = background.subagents
    for agent in background.state.agents.values():
        for plugin in agent.plugins:
            if isinstance(plugin, Subagents):
                wiring.wire(plugin)
    return list(wiring.plugins)
