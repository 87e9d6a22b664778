"""``RunSupervisor``: runs as server-owned tasks, one live run per chat, bounded in number.

A run is an ``asyncio`` task of the server, not of the request that started it: a client that
disconnects only stops *watching*, and the run completes headless. The supervisor reaches the
core through ``Runner.stream`` only, and for every event it

1. turns it into records (``lovia.web.eventlog.records_of``),
2. hands them to the run's ``RunLog``, which numbers them with the run's next ``seq``,
   appends them to the store's event log in batches, and only then publishes them to the
   ``EventHub`` (append *before* publish: see ``follow``).

Rules it keeps:

* At most one live run per session. ``start`` on a session with a live run *attaches*: the
  message goes into that run's mailbox (the run takes it at its next turn).
* At most ``max_background_runs`` live runs; one more raises ``CapacityExceeded``.
* A gated tool call holds the run's stream in the ``ApprovalRegistry`` until a route decides
  it or ``approval_timeout`` denies it.
* A run's slot is released *before* its ``done`` record is published, so a client that saw
  ``done`` and sends the next message starts a new run rather than attaching to a dying one.
* Messages that reach a run's mailbox after its last turn began are not lost: when the run
  completes, they start the session's next run (*auto-chaining*), and the ``done`` record
  names it as ``next_run_id`` (a run a new message started meanwhile takes them instead).
  A cancelled run chains nothing. Until the next run is reserved the session stays busy,
  so a blocking chat cannot slip in between.
* A chat's runs share one workspace session (``workspaces``, a ``WorkspaceRegistry``): the
  agent runs as ``workspaces.agent_for(session_id, agent)``, so background processes outlive
  a run; ``stop`` (the chat is deleted) and ``aclose`` close the chat's session.
* ``cancel`` stops a run; its completed turns and partial transcript (dangling calls
  trimmed) join the session, and its checkpoint is forgotten. A failed run keeps its partial
  transcript the same way. ``aclose`` (server shutdown) cancels every run cooperatively but
  keeps its checkpoint and the chat's ``active_run_id``, and logs no ``done`` for it:
  ``resume`` (after a restart) continues the same run id and seq.
* A configured ``budget`` is a template: each run gets ``budget.fresh()``.
* ``todo_write`` results are logged as ``todo`` records instead of ``tool_result``.
* ``run_blocking`` runs one message in the request (``POST /api/chat``), not as a task: it
  reserves the session as a live run does, so neither kind can start over the other. It
  checkpoints only so that a failure keeps its turns so far, as a streamed run's does.

With a ``cluster`` (``lovia.web.scale``: several workers on one PostgreSQL) ``start`` and
chaining hand new runs to the engine instead of launching them here, ``resume`` and
``follow`` watch a run that lives on another worker instead of resuming it here, and the
engine's consumer launches the runs this worker takes (docs/web-scale.md). Without one,
everything above holds as written.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from lovia.checkpointer import CheckpointOptions
from lovia.events import ApprovalRequired, RunCompleted, RunFailed
from lovia.exceptions import RunBusyError, RunCancelled, UserError
from lovia.messages import user
from lovia.parts import ContentPart, text_of
from lovia.runner import RunInput, Runner
from lovia.runtime.checkpoint import segment_meta
from lovia.session import read_segments
from lovia.steering import Mailbox
from lovia.transcript import (
    InputEntry,
    drop_dangling_tool_calls,
    entry_to_dict,
    input_to_entries,
)

from .approvals import ApprovalRegistry
from .errors import CapacityExceeded, NotFound, RunConflict
from .eventlog import EventRecord, RunLog, done_record, error_record, records_of
from .hub import EventHub
from .recorder import record_views
from .titles import provisional_title
from .workspaces import WorkspaceRegistry

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.budget import RunBudget
    from lovia.runtime.result import RunHandle, RunResult

    from .lifecycle import RunLifecycle
    from .questions import QuestionRegistry
    from .scale.cluster import Cluster
    from .store.base import ChatMeta, ChatStore

__all__ = ["LiveRun", "RunSupervisor", "Snapshot", "StartedRun"]

logger = logging.getLogger(__name__)

_SHUTDOWN_GRACE_SECONDS = 10.0


@dataclass(eq=False)
class LiveRun:
    """A run the supervisor owns, from its reservation until its slot is released."""

    run_id: str
    session_id: str
    agent: str
    mailbox: Mailbox = field(default_factory=Mailbox)
    source: str = "chat"
    """What started it: ``"chat"``, ``"resume"``, or a caller's own tag (``"schedule"``, ...)."""
    prompt: list[dict[str, Any]] = field(default_factory=list)
    """The run's input as transcript entries (JSON): what a reconnect's snapshot shows
    before the run's own events, so the user message is shown exactly once."""
    injected: dict[int, int] = field(default_factory=dict)
    """Steering ids handed out by ``inject`` -> the mailbox tokens they stand for."""
    task: asyncio.Task[None] | None = None
    handle: RunHandle[Any] | None = None
    log: RunLog | None = None
    resumed: bool = False
    """Whether this run continues an interrupted one from its checkpoint."""
    stop_reason: str | None = None
    """Why the supervisor stopped it: ``"cancel"`` (a client) or ``"shutdown"``."""
    runner_agent: Agent[Any] | None = None
    """A child run's own agent object (``start_child``), run instead of ``agents[agent]``."""
    launched: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once ``task`` exists (or the launch failed): ``stop`` waits for it."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a reconnecting client is shown before the live events: the session's completed
    turns (``entries``, the live run's input last) and the live run, if any."""

    session_id: str
    entries: list[dict[str, Any]]
    run: LiveRun | None


@dataclass(frozen=True, slots=True)
class StartedRun:
    """What ``start`` did: started ``run``, or ``attached`` the message to it."""

    run: LiveRun
    attached: bool


def _input_entries(input: RunInput) -> list[dict[str, Any]]:
    return [
        entry_to_dict(e)
        for e in input_to_entries(input)
        if isinstance(e, InputEntry) and e.role == "user"
    ]


def _todo_tool_names(agent: Agent[Any]) -> frozenset[str]:
    """``todo_write`` plus the tool name of every ``Todo`` plugin the agent has."""
    from lovia.plugins.todo import Todo

    names = {"todo_write"}
    names.update(p.tool_name for p in agent.plugins if isinstance(p, Todo))
    return frozenset(names)


class RunSupervisor:
    """Owns run lifetimes: start or attach, follow, steer, cancel, shut down."""

    def __init__(
        self,
        agents: Mapping[str, Agent[Any]],
        store: ChatStore,
        *,
        hub: EventHub | None = None,
        approvals: ApprovalRegistry | None = None,
        questions: QuestionRegistry | None = None,
        max_background_runs: int = 8,
        max_turns: int = 50,
        lifecycle: RunLifecycle | None = None,
        workspaces: WorkspaceRegistry | None = None,
        budget: RunBudget | None = None,
    ) -> None:
        if not agents:
            raise UserError("RunSupervisor needs at least one agent", hint="pass {name: Agent}")
        if max_background_runs < 1:
            raise UserError(
                f"max_background_runs must be >= 1, got {max_background_runs}",
                hint="the default is 8",
            )
        self.agents = dict(agents)
        self.store = store
        self.hub = hub or EventHub()
        self.approvals = approvals or ApprovalRegistry()
        self.questions = questions
        self.max_background_runs = max_background_runs
        self.max_turns = max_turns
        self.lifecycle = lifecycle
        """Told when a run's slot is reserved and released (run records, ``/api/events``)."""
        self.workspaces = workspaces or WorkspaceRegistry()
        """Each chat's bound workspace session (its background processes outlive a run)."""
        self.budget = budget
        self._live: dict[str, LiveRun] = {}
        self._blocking: set[str] = set()
        self._resuming: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per chat: the lock its resumes take, and how many callers hold or wait for it."""
        self._exclusive: set[str] = set()
        """Chats a rewind or a delete is changing: no run starts in them meanwhile."""
        self._chaining: set[str] = set()
        """Sessions whose finished run is about to chain the next one (busy meanwhile)."""
        self._closing = False
        self.cluster: Cluster | None = None
        """Set by ``Cluster.attach`` when several workers share the database."""
        # Steering ids: unique across runs, and (seeded from the clock) across restarts.
        self._inject_ids = itertools.count(time.time_ns() // 1_000_000)

    def __repr__(self) -> str:
        return f"RunSupervisor(live={len(self._live)}/{self.max_background_runs})"

    @property
    def default_agent(self) -> str | None:
        """The only agent's name; ``None`` on a multi-agent server."""
        return next(iter(self.agents)) if len(self.agents) == 1 else None

    def live(self, session_id: str) -> LiveRun | None:
        """The session's live run, if any."""
        return self._live.get(session_id)

    def live_runs(self) -> list[LiveRun]:
        return list(self._live.values())

    def busy(self, session_id: str) -> bool:
        """Whether a live run, a blocking chat, a rewind or delete, or the chaining of a
        finished run owns the session right now."""
        return (
            session_id in self._live
            or session_id in self._blocking
            or session_id in self._exclusive
            or session_id in self._chaining
        )

    async def resolve_agent(self, session_id: str | None, requested: str | None) -> str:
        """The agent a message to ``session_id`` runs with: the chat's stored agent while this
        server has it, else ``requested``, else the only agent. Raises ``NotFound``."""
        meta = await self.store.get_session(session_id) if session_id is not None else None
        return self._agent_of(meta, requested)

    def _agent_of(self, meta: ChatMeta | None, requested: str | None) -> str:
        if meta is not None and meta.agent in self.agents:
            return meta.agent
        name = requested if requested is not None else self.default_agent
        if name is None or name not in self.agents:
            raise NotFound(
                f"unknown agent {name!r}" if name else "this server has several agents",
                hint=f"pass one of: {', '.join(sorted(self.agents))}",
            )
        return name

    def _fresh_budget(self) -> RunBudget | None:
        return self.budget.fresh() if self.budget is not None else None

    @contextmanager
    def exclusive(self, session_id: str) -> Iterator[None]:
        """Hold off new runs of the chat (``start`` raises ``RunConflict``) while a rewind
        or a delete changes it. Raises ``RunConflict`` if a run of it is live already."""
        if self.busy(session_id):
            raise RunConflict(
                f"session {session_id!r} has a live run",
                hint="cancel it or wait until it is done",
            )
        self._exclusive.add(session_id)
        try:
            yield
        finally:
            self._exclusive.discard(session_id)

    # -- start -----------------------------------------------------------------------------

    async def start(
        self,
        message: str | list[ContentPart],
        *,
        session_id: str | None = None,
        agent: str | None = None,
        source: str = "chat",
        mailbox: Mailbox | None = None,
        attach: bool = True,
    ) -> StartedRun:
        """Start a run of ``message`` in the session, or attach it to the session's live run.

        A session whose run a restart interrupted resumes that run first, and the message
        joins it. ``source`` tags the run (``"chat"``; a scheduler passes its own);
        ``mailbox`` lets a caller keep the run's mailbox. ``attach=False`` refuses a live run
        (one this call did not resume) with ``RunConflict`` instead of attaching to it.
        Raises ``NotFound`` for an unknown agent, ``RunConflict`` while a blocking chat holds
        the session or its live run is being stopped, and ``CapacityExceeded`` when every
        slot is taken (or the server is shutting down).
        """
        if self.cluster is not None and mailbox is None:
            return await self.cluster.start_run(
                message, session_id=session_id, agent=agent, source=source, attach=attach
            )
        self._refuse_blocking(session_id)
        meta = None
        resumed = None
        if session_id is not None and session_id not in self._live:
            meta = await self.store.get_session(session_id)
            if meta is not None and meta.active_run_id is not None:
                # an interrupted run continues; the message joins
                resumed = await self.resume(session_id)
        # From here to ``_launch``'s reservation nothing awaits: no other start can slip in.
        live = self._live.get(session_id) if session_id is not None else None
        if live is not None and not attach and live is not resumed:
            raise RunConflict(
                f"session {session_id!r} already has a live run",
                hint="wait for it to finish, or cancel it",
            )
        if live is not None:  # a live run (maybe one another start launched meanwhile)
            self._refuse_stopping(live)
            live.mailbox.push(message)
            return StartedRun(live, attached=True)
        self._refuse_blocking(session_id)  # a blocking chat may have taken it meanwhile
        self._check_capacity()
        name = self._agent_of(meta, agent)
        input: RunInput = message if isinstance(message, str) else [user(message)]
        run = await self._launch(
            session_id or uuid4().hex,
            name,
            input,
            title=provisional_title(text_of(message)),
            source=source,
            mailbox=mailbox,
        )
        return StartedRun(run, attached=False)

    def _refuse_blocking(self, session_id: str | None) -> None:
        if session_id is not None and session_id in self._blocking:
            raise RunConflict(
                f"session {session_id!r} is busy with a blocking chat",
                hint="wait for POST /api/chat to answer",
            )

    def _refuse_stopping(self, run: LiveRun) -> None:
        """A run being stopped chains nothing: a message attached to it would be lost."""
        if run.stop_reason is not None:
            raise RunConflict(
                f"session {run.session_id!r} has a run being stopped ({run.stop_reason})",
                hint="send the message again once its done event has arrived",
            )

    def _check_capacity(self) -> None:
        if self._closing:
            raise CapacityExceeded("the server is shutting down", hint="retry in a moment")
        if len(self._live) >= self.max_background_runs:
            raise CapacityExceeded(
                f"all {self.max_background_runs} background-run slots are busy",
                hint="retry when a run has finished",
            )

    async def resume(self, session_id: str) -> LiveRun | None:
        """The session's live run, or its interrupted run resumed from its checkpoint (after a
        shutdown or a crash); ``None`` when there is nothing to resume.

        Raises ``CapacityExceeded`` when a resume needs a slot and none is free.
        """
        live = self._live.get(session_id)
        if live is not None or session_id in self._blocking:
            return live
        if self.cluster is not None:  # the engine resumes it; this worker only watches
            # A client re-attaches: if the run's worker died before publishing it, it is
            # published again now (``Cluster.heal``), so the run does not hang.
            await self.cluster.heal(session_id=session_id)
            return await self.cluster.remote_run(session_id)
        # One resume of a chat at a time in this process: concurrent reconnects wait and then
        # find the run live, instead of colliding on the run's lease probe below.
        lock, users = self._resuming.get(session_id, (asyncio.Lock(), 0))
        self._resuming[session_id] = (lock, users + 1)
        try:
            async with lock:
                return await self._resume_now(session_id)
        finally:
            lock, users = self._resuming[session_id]
            if users == 1:
                del self._resuming[session_id]
            else:
                self._resuming[session_id] = (lock, users - 1)

    async def _resume_now(self, session_id: str) -> LiveRun | None:
        if session_id in self._live or session_id in self._blocking:
            return self._live.get(session_id)
        meta = await self.store.get_session(session_id)
        if meta is None or meta.active_run_id is None or session_id in self._live:
            return self._live.get(session_id)
        run_id = meta.active_run_id
        snapshot = await self.store.checkpointer.load(run_id)
        if snapshot is None:  # died before its first save
            await self._end_unsaved(session_id, run_id)
            return None
        if session_id in self._live:  # a concurrent start or resume got there first
            return self._live[session_id]
        if session_id in self._blocking:  # a blocking chat took it meanwhile
            return None
        await self._require_unheld(session_id, run_id)
        if session_id in self._live:
            return self._live[session_id]
        if self._closing or len(self._live) >= self.max_background_runs:
            raise CapacityExceeded(
                f"no free slot to resume run {run_id!r}", hint="retry when a run has finished"
            )
        agent = meta.agent if meta.agent in self.agents else next(iter(self.agents))
        prompt = []
        for entry in snapshot.entries:  # the run's input: the entries before its first reply
            if not isinstance(entry, InputEntry):
                break
            if entry.role == "user":
                prompt.append(entry_to_dict(entry))
        return await self._launch(
            session_id,
            agent,
            [],
            title=meta.title,
            resume_run=run_id,
            source="resume",
            prompt=prompt,
        )

    async def _end_unsaved(self, session_id: str, run_id: str) -> None:
        """End a run that died before its first checkpoint (it cannot resume): its log gets
        ``error`` and ``done`` (``failed``), so a watcher stops reconnecting, and its record
        says ``failed``. Only the caller that clears the chat's pointer does it."""
        if not await self.store.set_active_run(session_id, None, expected=run_id):
            return
        error = {
            "type": "RunInterrupted",
            "message": "the server stopped before the run saved any progress",
        }
        last = await self.store.last_seq(run_id)
        if last:
            await self.store.append_events(
                session_id,
                [
                    EventRecord(run_id, last + 1, "error", error),
                    EventRecord(run_id, last + 2, "done", done_record("failed")),
                ],
            )
        await self.store.record_run_finished(
            run_id, status="failed", error=f"{error['type']}: {error['message']}"
        )

    async def _require_unheld(self, session_id: str, run_id: str) -> None:
        """Raise ``RunConflict`` when another server process on this database is running
        ``run_id`` (it holds the run's lease): resuming it here would run it twice."""
        lease = getattr(self.store.checkpointer, "lease", None)
        if lease is None:
            return
        try:
            async with lease(run_id, wait=False):
                pass
        except RunBusyError:
            raise RunConflict(
                f"run {run_id!r} of session {session_id!r} is live in another server process",
                hint="send the message to that server, or wait until the run is done",
            ) from None

    async def _launch(
        self,
        session_id: str,
        agent: str,
        input: RunInput,
        *,
        title: str,
        resume_run: str | None = None,
        source: str = "chat",
        mailbox: Mailbox | None = None,
        prompt: list[dict[str, Any]] | None = None,
        runner_agent: Agent[Any] | None = None,
        run_id: str | None = None,
    ) -> LiveRun:
        if session_id in self._exclusive:
            raise RunConflict(
                f"session {session_id!r} is being rewound or deleted", hint="retry in a moment"
            )
        # Reserve the slot before the first await, so a concurrent start attaches to it.
        run = LiveRun(
            run_id=resume_run or run_id or uuid4().hex,
            session_id=session_id,
            agent=agent,
            source=source,
            prompt=prompt if prompt is not None else _input_entries(input),
            runner_agent=runner_agent,
        )
        if mailbox is not None:
            run.mailbox = mailbox
        run.resumed = resume_run is not None
        self._live[session_id] = run
        self.hub.open(run.run_id)
        try:
            if self.questions is not None:
                self.questions.ensure_started()
            meta = await self.store.get_session(session_id)
            if meta is None:
                await self.store.create_session(session_id, agent=agent, title=title)
            elif meta.agent in self.agents:  # a chat keeps its agent while that agent exists
                run.agent = meta.agent
            await self.store.set_active_run(session_id, run.run_id)
            if self.lifecycle is not None:
                await self.lifecycle.run_started(run, created=meta is None)
        except BaseException:
            self._live.pop(session_id, None)
            self.hub.close(run.run_id)
            run.launched.set()
            raise
        run.task = asyncio.create_task(self._drive(run, input), name=f"lovia-run-{run.run_id}")
        run.launched.set()
        return run

    # -- blocking chat ---------------------------------------------------------------------

    async def run_blocking(
        self,
        message: str | list[ContentPart],
        *,
        session_id: str | None = None,
        agent: str | None = None,
    ) -> tuple[str, RunResult[Any]]:
        """Run ``message`` (text, or parts such as resolved attachments) to its end in the
        caller's task (no log, no hub, no checkpoint); returns the session id and the result.
        Raises ``RunConflict`` while a live run or another blocking chat holds the session,
        ``NotFound`` for an unknown agent.
        """
        if session_id is not None and self.busy(session_id):
            raise RunConflict(
                f"session {session_id!r} has a run in progress",
                hint="stream it (POST /api/chat/reconnect) or cancel it first",
            )
        if session_id is not None:
            meta = await self.store.get_session(session_id)
            if meta is not None and meta.active_run_id is not None:
                raise RunConflict(
                    f"session {session_id!r} has an interrupted run",
                    hint="resume it with POST /api/chat/reconnect, or cancel it",
                )
        name = await self.resolve_agent(session_id, agent)
        sid = session_id or uuid4().hex
        if self.busy(sid):
            raise RunConflict(f"session {sid!r} has a run in progress")
        self._blocking.add(sid)
        try:
            if await self.store.get_session(sid) is None:
                title = provisional_title(text_of(message))
                await self.store.create_session(sid, agent=name, title=title)
            run_id = uuid4().hex
            try:
                result = await Runner.run(
                    await self.workspaces.agent_for(sid, self.agents[name]),
                    message if isinstance(message, str) else [user(message)],
                    session=self.store.session,
                    session_id=sid,
                    max_turns=self.max_turns,
                    budget=self._fresh_budget(),
                    checkpoint=CheckpointOptions(
                        checkpointer=self.store.checkpointer,
                        run_id=run_id,
                        if_run_exists="fail",
                        delete_on_success=True,
                    ),
                )
            except BaseException:  # failed or cancelled: keep its turns so far, as a stream's
                await asyncio.shield(self._keep_partial_quietly(sid, run_id))
                raise
        finally:
            self._blocking.discard(sid)
        return sid, result

    async def _keep_partial_quietly(self, session_id: str, run_id: str) -> None:
        try:
            await self._keep_partial(session_id, run_id)
        except Exception:
            logger.exception("could not keep the partial turns of run %s", run_id)

    # -- the run's task --------------------------------------------------------------------

    async def _drive(self, run: LiveRun, input: RunInput) -> None:
        terminal: list[tuple[str, dict[str, Any]]] = []
        try:
            last_seq = await self.store.last_seq(run.run_id)
            run.log = RunLog(run.run_id, run.session_id, self.store, self.hub, last_seq=last_seq)
            agent = await self.workspaces.agent_for(
                run.session_id, run.runner_agent or self.agents[run.agent]
            )
            # -- context inspector (lovia.web.recorder): log what each model call is sent --
            agent = record_views(agent, run.log.put)
            todo_tools = _todo_tool_names(agent)
            handle = Runner.stream(
                agent,
                input,
                session=self.store.session,
                session_id=run.session_id,
                checkpoint=CheckpointOptions(
                    checkpointer=self.store.checkpointer,
                    run_id=run.run_id,
                    if_run_exists="resume_only" if run.resumed else "fail",
                    delete_on_success=True,
                ),
                mailbox=run.mailbox,
                max_turns=self.max_turns,
                budget=self._fresh_budget(),
            )
            run.handle = handle
            if run.stop_reason is not None:  # stopped while it was being set up
                handle.cancel(run.stop_reason)
            async for event in handle:
                if isinstance(event, (RunCompleted, RunFailed)):
                    terminal = records_of(event)
                    continue
                for kind, data in records_of(event, todo_tools=todo_tools):
                    await run.log.put(kind, data)
                if isinstance(event, ApprovalRequired):
                    await self.approvals.wait(run.session_id, event)
        except Exception as exc:  # the run must end with error + done, whatever broke
            logger.exception(
                "run %s of session %s failed in the supervisor", run.run_id, run.session_id
            )
            terminal = [("error", error_record(exc)), ("done", done_record("failed"))]
        finally:
            if not terminal:  # the task itself was cancelled (hard shutdown)
                terminal = [
                    ("error", error_record(RunCancelled("server shutting down"))),
                    ("done", done_record("cancelled")),
                ]
            await self._finish(run, terminal)

    async def _keep_partial(self, session_id: str, run_id: str) -> None:
        """Append what the checkpoint of an unfinished run holds to the session (dangling
        calls trimmed), then forget the checkpoint. The append is idempotent by run id, so a
        run finalised whose own session append failed is stored whole, not dropped."""
        snapshot = await self.store.checkpointer.load(run_id)
        if snapshot is not None:
            entries = drop_dangling_tool_calls(snapshot.entries)
            if entries:
                head = snapshot.head
                meta = segment_meta(head.context_state, head.notices, head.last_input_tokens)
                await self.store.session.append(session_id, entries, run_id=run_id, meta=meta)
        await self.store.checkpointer.delete(run_id)

    async def _finish(self, run: LiveRun, terminal: list[tuple[str, dict[str, Any]]]) -> None:
        self.approvals.release(run.session_id, reason="the run ended")
        if self.questions is not None:
            self.questions.sweep(run.session_id, reason="the run ended")
        status = terminal[-1][1].get("status")
        # Interrupted by a shutdown: the pointer, the checkpoint and an open-ended log stay,
        # so ``resume`` continues the same run (and the same seq) after a restart.
        interrupted = run.stop_reason == "shutdown" and status != "completed"
        ended = dict(terminal)  # {"error": {...}, "done": {status, usage?}}
        if interrupted:
            terminal = []
        try:
            if not interrupted:
                if status != "completed":
                    await self._keep_partial(run.session_id, run.run_id)
                await self.store.set_active_run(run.session_id, None, expected=run.run_id)
        except Exception:  # cleanup must not keep the slot or the watchers
            logger.exception("could not clear run %s of session %s", run.run_id, run.session_id)
        finally:
            # It may still chain (a message can reach its mailbox until then): no blocking
            # chat slips in before that is decided.
            chains = status == "completed" and run.stop_reason is None
            chains = chains and run.runner_agent is None  # not a child
            if chains:
                self._chaining.add(run.session_id)
            if self._live.get(run.session_id) is run:
                del self._live[run.session_id]
            try:
                # Inside this try, so a hard cancel here still closes the channel below.
                if self.lifecycle is not None:
                    await self.lifecycle.run_finished(
                        run,
                        status="interrupted" if interrupted else status or "failed",
                        error=ended.get("error"),
                        usage=ended.get("done", {}).get("usage"),
                    )
                if chains and len(run.mailbox):
                    chained = await self._chain(run)
                    if chained is not None:
                        terminal[-1][1]["next_run_id"] = chained.run_id
                # Decided: free the chat before ``done`` is published, so a client that saw
                # ``done`` and sends the next message starts a run instead of a 409.
                self._chaining.discard(run.session_id)
                if run.log is None:  # failed before its log existed
                    last_seq = await self.store.last_seq(run.run_id)
                    run.log = RunLog(
                        run.run_id, run.session_id, self.store, self.hub, last_seq=last_seq
                    )
                for kind, data in terminal:
                    await run.log.put(kind, data)
                await run.log.close()
                await self.store.prune_events(run.session_id)
            except Exception:  # the watchers still get the close below
                logger.exception("could not log the end of run %s", run.run_id)
            finally:
                if chains:
                    self._chaining.discard(run.session_id)
                if run.log is not None:
                    await run.log.close()
                self.hub.close(run.run_id)

    async def _chain(self, run: LiveRun) -> LiveRun | None:
        """Start the session's next run with the messages ``run`` left in its mailbox (they
        arrived after its last turn began); ``None`` when it cannot start."""
        try:
            contents = run.mailbox.drain()
            if self._closing:
                return None
            current = self._live.get(run.session_id)
            if current is not None:  # a new message started a run meanwhile: they join it
                for content in contents:
                    current.mailbox.push(content)
                return current
            leftovers = [user(content) for content in contents]
            if self.cluster is not None:
                return await self.cluster.chain(run, leftovers)
            return await self._launch(
                run.session_id, run.agent, leftovers, title="", source=run.source
            )
        except Exception:  # the messages are lost, but the finished run must still close
            logger.exception("could not chain the leftovers of run %s", run.run_id)
            return None
        finally:
            self._chaining.discard(run.session_id)  # the next run (if any) holds it now

    # -- watching --------------------------------------------------------------------------

    async def snapshot(self, session_id: str) -> Snapshot:
        """The session's completed turns and its live run (resumed first if a restart
        interrupted it). The live run's own segment is left out even if it has just been
        stored, so its entries reach the client once: through its replayed events."""
        run = self._live.get(session_id) or await self.resume(session_id)
        segments = await read_segments(self.store.session, session_id)
        entries = [
            entry_to_dict(e)
            for seg in segments
            if run is None or seg.run_id != run.run_id
            for e in seg.entries
        ]
        if run is not None:
            entries.extend(run.prompt)
        return Snapshot(session_id, entries, run)

    async def follow(self, run_id: str, *, after: int = 0) -> AsyncIterator[EventRecord]:
        """The run's records with ``seq > after``: the logged ones, then live ones until the
        run ends. No gap and no duplicate: the hub subscription is taken *before* the log is
        read, every record is logged before it is published, and records are deduplicated by
        ``seq``. A watcher the hub drops for being slow catches up from the log again.
        """
        while True:
            sub = self.hub.subscribe(run_id)
            if sub is None and self.cluster is not None:  # it may live on another worker
                async for record in self.cluster.tail(run_id, after=after):
                    yield record
                    after = record.seq
                if not self.hub.is_open(run_id):
                    return
                continue  # the engine gave it to this worker: follow it in process
            try:
                for record in await self.store.read_events(run_id, after=after):
                    yield record
                    after = record.seq
                if sub is None:
                    return
                async for record in sub:
                    if record.seq > after:
                        yield record
                        after = record.seq
                if not sub.dropped:
                    return
            finally:
                if sub is not None:
                    self.hub.unsubscribe(run_id, sub)

    # -- steering and stopping -------------------------------------------------------------

    def _require_live(self, session_id: str) -> LiveRun:
        run = self._live.get(session_id)
        if run is None:
            raise NotFound(f"session {session_id!r} has no live run")
        return run

    def inject(self, session_id: str, message: str) -> int:
        """Queue ``message`` into the live run's mailbox; returns its steering id (for
        ``uninject``)."""
        run = self._require_live(session_id)
        self._refuse_stopping(run)
        token = run.mailbox.push(message)
        inject_id = next(self._inject_ids)
        run.injected[inject_id] = token
        return inject_id

    def uninject(self, session_id: str, inject_id: int) -> bool:
        """Withdraw a message ``inject`` queued, unless the run has taken it already;
        ``False`` when it has (or the id is unknown, or no run is live)."""
        run = self._live.get(session_id)
        if run is None:
            return False
        token = run.injected.pop(inject_id, None)
        return token is not None and run.mailbox.remove(token)

    def cancel(self, session_id: str) -> LiveRun:
        """Cancel the session's live run (raises ``NotFound`` without one); returns it."""
        run = self._require_live(session_id)
        self._stop(run, "cancel")
        return run

    async def clear_stranded(self, session_id: str) -> str | None:
        """With no live run, forget the session's interrupted run (its checkpoint's turns
        join the session, as a cancel's would); returns its id, ``None`` if there is none."""
        if self.busy(session_id):
            return None
        if self.cluster is not None:  # another worker may be taking the run right now
            return await self.cluster.clear_stranded(session_id)
        meta = await self.store.get_session(session_id)
        if meta is None or meta.active_run_id is None:
            return None
        run_id = meta.active_run_id
        await self._keep_partial(session_id, run_id)
        await self.store.set_active_run(session_id, None, expected=run_id)
        return run_id

    async def stop(self, session_id: str) -> None:
        """Cancel the session's live run, if any, and wait until its task has ended; then
        close the chat's workspace session (the chat is going away: its processes die)."""
        run = self._live.get(session_id)
        if run is None and self.cluster is not None:  # a run of it on another worker
            await self.cluster.cancel_elsewhere(session_id)
        if run is not None:
            self._stop(run, "cancel")
            if run.task is None:  # still being set up: its task would bind the workspace
                await run.launched.wait()
            if run.task is not None:
                await asyncio.shield(run.task)
        await self.workspaces.release(session_id)

    def _stop(self, run: LiveRun, reason: str) -> None:
        if run.stop_reason is None:
            run.stop_reason = reason
        if run.handle is not None:
            run.handle.cancel(
                "cancelled by the user" if reason == "cancel" else "server shutting down"
            )
        if reason == "shutdown":  # undecided: the resumed run asks again
            self.approvals.abandon(run.session_id)
        else:
            self.approvals.release(run.session_id, reason="the run was cancelled")
            if self.questions is not None:
                self.questions.sweep(run.session_id, reason="the run was cancelled")

    async def aclose(self) -> None:
        """Stop every run cooperatively (checkpoints kept); cancel stragglers after a grace."""
        self._closing = True
        runs = list(self._live.values())
        for run in runs:
            self._stop(run, "shutdown")
        tasks = [run.task for run in runs if run.task is not None]
        if tasks:
            _, stragglers = await asyncio.wait(tasks, timeout=_SHUTDOWN_GRACE_SECONDS)
            for task in stragglers:
                task.cancel()
            if stragglers:
                await asyncio.wait(stragglers)
        if self.questions is not None:
            await self.questions.aclose()
        await self.workspaces.aclose()  # background processes die with the server

    # -- subagent children -----------------------------------------------------------------

    async def start_child(
        self, agent: Agent[Any], message: str, *, session_id: str, mailbox: Mailbox
    ) -> LiveRun:
        """Start a clientless run (source ``"subagent"``) of ``agent``, which need not be a
        served one, in ``session_id`` (a task session the caller created), with the child's
        own ``mailbox``. A child's leftover messages chain no next run.

        Raises ``RunConflict`` when the session has a live run and ``CapacityExceeded`` when
        every slot is taken.
        """
        if session_id in self._live:
            raise RunConflict(f"session {session_id!r} already has a live run")
        if self._closing or len(self._live) >= self.max_background_runs:
            raise CapacityExceeded(
                f"all {self.max_background_runs} background-run slots are busy",
                hint="retry when a run has finished",
            )
        return await self._launch(
            session_id,
            agent.name,
            message,
            title="",
            source="subagent",
            mailbox=mailbox,
            runner_agent=agent,
        )
