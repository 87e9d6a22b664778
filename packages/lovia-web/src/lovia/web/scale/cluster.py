"""``Cluster``: one web worker's view of the others on the same PostgreSQL database.

What it adds to a ``RunSupervisor`` (which stays the only thing that runs a run):

* **Dispatch.** ``start`` claims the chat for a new run id (``active_run_id`` goes from
  ``NULL`` to the id in one ``UPDATE``, so two workers never start two runs of one chat) and
  publishes the run to the ``RunEngine``. The worker whose consumer takes it runs it through
  its supervisor (``execute``); a redelivered run (its worker died) resumes from its
  checkpoint under the same id, its event ``seq`` continuing where the durable log stops.
* **Live events.** Every record a worker publishes is already in the store; the worker then
  sends ``NOTIFY`` with ``run_id:seq`` (one per run per batch). A worker streaming a run that
  lives elsewhere (``tail``) reads the log after its last ``seq`` and sleeps until such a
  notification, so a client re-attaches through any worker with ``Last-Event-ID`` and sees
  every record once. A missed notification costs at most ``poll`` seconds (it re-reads).
* **Commands.** Approve, answer, cancel, inject, uninject and a message for a live run go
  to every worker as one ``NOTIFY``; only the worker holding the run live acts and replies.
  No reply within ``command_timeout`` means no worker holds it (it may be between workers).
* **Lifecycle.** ``/api/events`` kinds about runs and chats are relayed to every worker.
* **Sweeping.** A ``running`` run record is stale only when its chat no longer points at the
  run: a run pointed at is live somewhere or waiting in the engine to be resumed.
* **Healing.** The claim writes the run's message to an outbox table in the same statement,
  and the row is marked published once the broker has the message (from then on the broker
  keeps it until a worker has run it). A worker holds the run's *take lock* (an advisory lock
  on a connection of its own) from taking a delivery until the run ends there. A claimed run
  whose message was never marked published ``heal_after`` seconds after its claim, and whose
  take lock is free, is published again (its ``attempt`` bumped, so a copy that did reach the
  broker is dropped when taken): at a worker's start, when a client re-attaches to its chat
  or sends it a message, and while a client waits on it. So a worker that dies between the
  claim and the publish costs its run a pause, not the run.

The notification channels are named after the store's schema, so deployments sharing one
database in different schemas never hear each other. Payloads stay under PostgreSQL's
8000-byte limit: a message too long to route is refused with a hint.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from lovia.exceptions import UserError
from lovia.parts import ContentPart, text_of
from lovia.transcript import InputEntry, entry_from_dict, entry_to_dict, input_to_entries

from ..errors import CapacityExceeded, NotFound, RunConflict, WebError
from ..eventlog import EventRecord
from ..titles import provisional_title
from .engine import RunEngine, RunRejected

if TYPE_CHECKING:
    from lovia.messages import Message
    from psycopg import AsyncConnection

    from ..lifecycle import LifecycleBus
    from ..store.base import ChatMeta, ChatStore
    from ..store.postgres import PostgresChatStore
    from ..supervisor import LiveRun, RunSupervisor, StartedRun

__all__ = ["Cluster", "EngineUnavailable"]

logger = logging.getLogger(__name__)

_MAX_PAYLOAD = 7900
"""PostgreSQL refuses a NOTIFY payload of 8000 bytes or more."""
_RELAYED_KINDS = frozenset({"run_started", "run_finished", "session_created", "session_retitled"})
_ERRORS: dict[int, type[WebError]] = {404: NotFound, 409: RunConflict, 429: CapacityExceeded}


class EngineUnavailable(WebError):
    """The run could not be handed to the engine (the broker is down): 503."""

    status = 503


_MIN_KEEP = 64
"""No string of a reply is cut shorter than this (ids stay whole)."""


def _fit(reply: dict[str, Any]) -> str:
    """``reply`` as JSON under NOTIFY's limit: its longest strings shortened if need be (a
    question's text, say; they only inform), else a refusal: the caller must not mistake a
    reply too large to send for no worker holding the run."""
    text = json.dumps(reply)
    if len(text.encode()) <= _MAX_PAYLOAD:
        return text
    lo, hi = _MIN_KEEP, len(text)  # the longest strings may keep, found by halving
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(json.dumps(_shortened(reply, mid)).encode()) <= _MAX_PAYLOAD:
            lo = mid
        else:
            hi = mid - 1
    fitted = json.dumps(_shortened(reply, lo))
    if len(fitted.encode()) <= _MAX_PAYLOAD:
        return fitted
    refusal = {"status": 409, "message": "the reply is too large to route between workers"}
    return json.dumps({"id": reply.get("id"), "error": refusal})


def _shortened(value: Any, keep: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= keep else value[:keep] + " ..."
    if isinstance(value, dict):
        return {k: _shortened(v, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_shortened(v, keep) for v in value]
    return value


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Cluster:
    """This worker's link to the others (see the module docstring)."""

    def __init__(
        self,
        store: ChatStore,
        engine: RunEngine,
        *,
        worker_id: str | None = None,
        command_timeout: float = 5.0,
        poll: float = 1.0,
        lease_wait: float = 30.0,
        heal_after: float = 5.0,
        stop_timeout: float = 15.0,
        end_grace: float = 2.0,
    ) -> None:
        from ..store.postgres import PostgresChatStore

        if not isinstance(store, PostgresChatStore):
            raise UserError(
                "several workers need the chat store in PostgreSQL",
                hint="pass --db postgresql://... (or LOVIA_DB); SQLite serves one process",
            )
        self.store: PostgresChatStore = store
        self.engine = engine
        self.worker_id = worker_id or uuid4().hex[:12]
        self.command_timeout = command_timeout
        self.poll = poll
        self.lease_wait = lease_wait
        self.heal_after = heal_after
        self.stop_timeout = stop_timeout
        """How long a delete waits for a run on another worker to end (its supervisor
        gives a run 10 s to stop cooperatively before cancelling it)."""
        self.end_grace = end_grace
        """How long a watcher reads on once the run freed its chat, for its ``done``."""
        self.supervisor: RunSupervisor | None = None
        self.bus: LifecycleBus | None = None
        tag = hashlib.sha1((store.schema or "").encode()).hexdigest()[:16]
        self._channels = {k: f"lovia_{tag}_{k}" for k in ("ev", "cmd", "re", "bus")}
        self._tables = "" if store.schema is None else _quote(store.schema) + "."
        self._listener: AsyncConnection[Any] | None = None
        self._conn: AsyncConnection[Any] | None = None
        self._talk = asyncio.Lock()
        # Take locks live on a connection of their own: ``_reconnect_talk`` replaces the
        # query connection after an error, and a lock would silently go with it.
        self._locks: AsyncConnection[Any] | None = None
        self._locking = asyncio.Lock()
        self._taking: set[str] = set()
        self._lock_prefix = f"lovia-take:{store.schema or ''}:"
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._pending: dict[str, int] = {}
        self._pending_wake = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self._spawned: set[asyncio.Task[None]] = set()
        self._closing = False

    def __repr__(self) -> str:
        return f"Cluster(worker={self.worker_id!r}, engine={self.engine!r})"

    def attach(self, supervisor: RunSupervisor, bus: LifecycleBus | None = None) -> None:
        """Make ``supervisor`` (and the lifecycle ``bus``) cluster-aware."""
        self.supervisor = supervisor
        supervisor.cluster = self
        supervisor.hub.published = self._published
        self.bus = bus
        if bus is not None:
            bus.relay = self._relay

    def _sup(self) -> RunSupervisor:
        if self.supervisor is None:
            raise RuntimeError("Cluster.attach(supervisor) was not called")
        return self.supervisor

    # -- lifetime ----------------------------------------------------------------------------

    async def start(self) -> int:
        """Listen, sweep stale run records, then start consuming runs (a run taken must find
        this worker ready). Returns how many records the sweep marked ``interrupted``."""
        import psycopg

        await self.store.list_runs(limit=1)  # creates (or migrates) the tables first
        dsn = self.store._dsn
        self._listener = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        self._conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        self._locks = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        await self._create_outbox()
        for channel in self._channels.values():
            await self._listener.execute(f"LISTEN {_quote(channel)}")
        self._loops = [
            asyncio.create_task(self._listen(), name="lovia-cluster-listen"),
            asyncio.create_task(self._send_events(), name="lovia-cluster-notify"),
        ]
        swept = await self.sweep_stale_runs()
        await self.engine.start(self.execute)
        await self.heal()  # runs a dead worker claimed and never published
        return swept

    async def _create_outbox(self) -> None:
        """The outbox table (under an advisory lock: ``CREATE TABLE IF NOT EXISTS`` races
        between workers starting together)."""
        conn = await self._db()
        async with self._talk, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"lovia-outbox:{self.store.schema or ''}",),
            )
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._tables}lovia_run_outbox ("
                "run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, payload TEXT NOT NULL, "
                "attempt INTEGER NOT NULL DEFAULT 0, claimed_at DOUBLE PRECISION NOT NULL, "
                "published_at DOUBLE PRECISION)"
            )

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    async def stop_consuming(self) -> None:
        """Stop taking runs; the ones running end with the supervisor's shutdown (run this
        beside ``RunSupervisor.aclose``: the engine waits for its tasks to end)."""
        await self.engine.aclose()

    async def aclose(self) -> None:
        self._closing = True
        await self.engine.aclose()
        tasks = [*self._loops, *self._spawned]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for conn in (self._listener, self._conn, self._locks):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        for waiters in self._waiters.values():
            for wake in waiters:
                wake.set()

    # -- starting runs -----------------------------------------------------------------------

    async def start_run(
        self,
        message: str | list[ContentPart],
        *,
        session_id: str | None,
        agent: str | None,
        source: str,
        attach: bool,
    ) -> StartedRun:
        """``RunSupervisor.start`` on a cluster: attach to the chat's live run wherever it
        is, or claim the chat for a new run and hand that to the engine."""
        from ..supervisor import LiveRun, StartedRun

        sup = self._sup()
        sup._refuse_blocking(session_id)
        if session_id is not None and session_id in sup._exclusive:
            raise RunConflict(
                f"session {session_id!r} is being rewound or deleted", hint="retry in a moment"
            )
        meta = await self.store.get_session(session_id) if session_id is not None else None
        name = sup._agent_of(meta, agent)
        sid = session_id or uuid4().hex
        if meta is None:
            title = provisional_title(text_of(message))
            meta = await self.store.create_session(sid, agent=name, title=title)
            if self.bus is not None:
                data = {"session_id": sid, "agent": name, "title": meta.title}
                self.bus.publish("session_created", data)
        content = entry_to_dict(
            InputEntry("user", message if isinstance(message, str) else tuple(message))
        )
        for _ in range(3):  # the chat's run may end between the read and the claim
            live = sup.live(sid)
            if live is not None or meta.active_run_id is not None:
                if not attach:
                    raise RunConflict(
                        f"session {sid!r} already has a live run",
                        hint="wait for it to finish, or cancel it",
                    )
                if live is not None:
                    sup._refuse_stopping(live)
                    live.mailbox.push(message)
                    return StartedRun(live, attached=True)
                run_id = meta.active_run_id
                assert run_id is not None
                reply = await self.call(sid, "push", entry=content)
                if reply is None:
                    found = await self.store.get_session(sid)
                    if found is None:
                        raise NotFound(f"session {sid!r} was deleted")
                    if found.active_run_id != run_id:  # it ended while we asked: start anew
                        meta = found
                        continue
                    await self.heal(session_id=sid)  # its worker may have died unpublished
                    raise RunConflict(
                        f"session {sid!r} has a run no worker holds right now",
                        hint="it waits for a free worker, or moves after a worker died: "
                        "retry in a few seconds",
                    )
                placeholder = LiveRun(run_id=reply["run_id"], session_id=sid, agent=name)
                return StartedRun(placeholder, attached=True)
            run = LiveRun(
                run_id=uuid4().hex, session_id=sid, agent=name, source=source, prompt=[content]
            )
            payload = self._payload(run, [content], title=meta.title)
            if await self._claim(sid, run.run_id, payload):
                break
            found = await self.store.get_session(sid)
            if found is None:
                raise NotFound(f"session {sid!r} was deleted")
            meta = found
        else:
            raise RunConflict(f"session {sid!r} is busy", hint="retry in a moment")
        await self.dispatch(run, payload)
        return StartedRun(run, attached=False)

    def _payload(
        self, run: LiveRun, entries: list[dict[str, Any]], *, title: str
    ) -> dict[str, Any]:
        """The engine's message for a run: all a worker needs to start it from nothing."""
        return {
            "run_id": run.run_id,
            "session_id": run.session_id,
            "agent": run.agent,
            "source": run.source,
            "input": entries,
            "title": title,
            "from": self.worker_id,
            "attempt": 0,
        }

    async def dispatch(self, run: LiveRun, payload: dict[str, Any]) -> None:
        """Hand a claimed run to the engine; on failure the chat is released again."""
        try:
            await self.engine.dispatch(payload)
        except Exception as exc:
            # Not published: release the chat (if this worker dies here instead, ``heal``
            # publishes the outbox's copy).
            await self.store.set_active_run(run.session_id, None, expected=run.run_id)
            await self._forget_outbox(run.run_id)
            logger.exception("could not dispatch run %s", run.run_id)
            raise EngineUnavailable(
                "the run engine is unreachable", hint="check the message broker is running"
            ) from exc
        await self._published_run(run.run_id, payload["attempt"])

    async def _published_run(self, run_id: str, attempt: int) -> None:
        """Mark the run's outbox row published: the broker keeps the message from now on, so
        ``heal`` leaves it alone (a run waiting for a free worker keeps its place in the
        queue). If this fails, a heal publishes a copy that supersedes the first."""
        sql = (
            f"UPDATE {self._tables}lovia_run_outbox SET published_at = %s "
            "WHERE run_id = %s AND attempt = %s"
        )
        try:
            async with self._talk:
                await (await self._db()).execute(sql, (time.time(), run_id, attempt))
        except Exception:
            logger.exception("could not mark run %s published", run_id)

    async def chain(self, run: LiveRun, leftovers: list[Message]) -> LiveRun | None:
        """Start the chat's next run with messages a finished ``run`` left over (the
        supervisor's auto-chaining); they join a run another worker started meanwhile."""
        from ..supervisor import LiveRun

        entries = [entry_to_dict(e) for e in input_to_entries(leftovers)]
        following = LiveRun(
            run_id=uuid4().hex,
            session_id=run.session_id,
            agent=run.agent,
            source=run.source,
            prompt=entries,
        )
        payload = self._payload(following, entries, title="")
        if not await self._claim(run.session_id, following.run_id, payload):
            for entry in entries:
                reply = await self.call(run.session_id, "push", entry=entry)
                if reply is None:
                    logger.error("run %s left messages no run could take", run.run_id)
                    return None
            return await self.remote_run(run.session_id)
        await self.dispatch(following, payload)
        return following

    async def cancel_elsewhere(self, session_id: str) -> None:
        """Ask the worker holding the chat's run to stop it (the chat is being deleted), and
        wait until the run has ended there, as ``RunSupervisor.stop`` does for a run of its
        own: a run still ending would write its partial turns into the deleted chat. No
        answer means no worker holds it (a delivery later finds the chat gone)."""
        meta = await self.store.get_session(session_id)
        if meta is None or meta.active_run_id is None:
            return
        run_id = meta.active_run_id
        try:
            if await self.call(session_id, "stop") is None:
                return
        except WebError:
            return
        # The holder answered at once and stops the run; it is over once the chat no longer
        # points at it (its partial turns are kept before the pointer is cleared).
        deadline = time.monotonic() + self.stop_timeout
        while time.monotonic() < deadline:
            meta = await self.store.get_session(session_id)
            if meta is None or meta.active_run_id != run_id:
                return
            await asyncio.sleep(0.05)  # another process: nothing better to wait on
        logger.warning("run %s did not stop within %g s", run_id, self.stop_timeout)

    async def clear_stranded(self, session_id: str) -> str | None:
        """``RunSupervisor.clear_stranded`` on a cluster: forget the chat's run that no
        worker answered for, unless a worker took it meanwhile (``RunConflict``: the cancel
        is asked again). The run's take lock is held while its turns are kept and the pointer
        is cleared, so no worker launches it in between; a delivery then finds it gone."""
        sup = self._sup()
        meta = await self.store.get_session(session_id)
        if meta is None or meta.active_run_id is None:
            return None
        run_id = meta.active_run_id
        taken = RunConflict(
            f"the run of session {session_id!r} was just taken by a worker",
            hint="send the cancel again: that worker answers it now",
        )
        if not await self._try_take(run_id):
            raise taken
        try:
            try:
                await sup._require_unheld(session_id, run_id)
            except RunConflict:  # a process outside the engine runs it
                raise taken from None
            meta = await self.store.get_session(session_id)
            if meta is None or meta.active_run_id != run_id:
                return None  # it ended meanwhile
            await sup._keep_partial(session_id, run_id)
            await self.store.set_active_run(session_id, None, expected=run_id)
        finally:
            await self._untake(run_id)
        await self._forget_outbox(run_id)
        return run_id

    async def pending_state(self, session_id: str, run_id: str) -> dict[str, Any] | None:
        """What the chat's run waits on (approvals, a question), asked of the worker holding
        it; ``None`` when no worker holds it (queued, or between workers: it waits on
        nothing then) or none answers within a second (a reconnect does not wait longer)."""
        if not await self._held(run_id):
            return None
        try:
            return await self.call(session_id, "pending", timeout=min(1.0, self.command_timeout))
        except WebError:
            return None

    async def _held(self, run_id: str) -> bool:
        """Whether a worker (this one included) holds the run's take lock right now."""
        if not await self._try_take(run_id):
            return True
        await self._untake(run_id)
        return False

    async def stop_everywhere(self) -> None:
        """Stop every run of this deployment that lives on another worker, and wait for
        each to end (every chat is being deleted)."""
        sql = f"SELECT id FROM {self._tables}chat_sessions WHERE active_run_id IS NOT NULL"
        async with self._talk:
            cur = await (await self._db()).execute(sql)
            rows = await cur.fetchall()
        sup = self._sup()
        elsewhere = [sid for (sid,) in rows if sup.live(sid) is None]
        await asyncio.gather(*(self.cancel_elsewhere(sid) for sid in elsewhere))

    async def _claim(self, session_id: str, run_id: str, payload: dict[str, Any]) -> bool:
        """Point the chat at ``run_id`` if no run holds it (the cross-worker reservation),
        and write the run's message to the outbox in the same statement: a worker that dies
        before publishing leaves what another needs to publish it (``heal``)."""
        t = self._tables
        sql = (
            f"WITH claimed AS (UPDATE {t}chat_sessions SET active_run_id = %s, updated_at = %s "
            "WHERE id = %s AND active_run_id IS NULL RETURNING id) "
            f"INSERT INTO {t}lovia_run_outbox (run_id, session_id, payload, attempt, "
            "claimed_at) SELECT %s, id, %s, 0, %s FROM claimed"
        )
        now = time.time()
        args = (run_id, now, session_id, run_id, json.dumps(payload), now)
        async with self._talk:
            cur = await (await self._db()).execute(sql, args)
            return cur.rowcount == 1

    async def _forget_outbox(self, run_id: str) -> None:
        """Drop the run's outbox row once no chat points at the run (it needs no worker)."""
        t = self._tables
        sql = (
            f"DELETE FROM {t}lovia_run_outbox WHERE run_id = %s AND NOT EXISTS "
            f"(SELECT 1 FROM {t}chat_sessions WHERE active_run_id = %s)"
        )
        try:
            async with self._talk:
                await (await self._db()).execute(sql, (run_id, run_id))
        except Exception:  # the next start's sweep drops it
            logger.exception("could not drop the outbox row of run %s", run_id)

    # -- take locks and healing ----------------------------------------------------------------

    def _lock_key(self, run_id: str) -> str:
        return self._lock_prefix + run_id

    async def _try_take(self, run_id: str) -> bool:
        """Take the run's take lock for this worker; ``False`` when a worker (this one
        included) holds it. It goes with this worker's connection if the worker dies."""
        if run_id in self._taking:  # advisory locks nest per connection: check here first
            return False
        async with self._locking:
            conn = await self._lock_conn()
            cur = await conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (self._lock_key(run_id),)
            )
            row = await cur.fetchone()
        if row is None or not row[0]:
            return False
        self._taking.add(run_id)
        return True

    async def _lock_conn(self) -> AsyncConnection[Any]:
        """The take locks' connection (under ``_locking``), connected again once it broke (a
        PostgreSQL blip): otherwise this worker could take no run any more. The locks it
        held went with it; the runs holding them are still guarded by their run leases."""
        import psycopg

        if self._locks is None:
            raise RuntimeError("the cluster is not started")
        if self._locks.closed or self._locks.broken:
            logger.warning("the take-lock connection broke; connecting again")
            self._locks = await psycopg.AsyncConnection.connect(self.store._dsn, autocommit=True)
        return self._locks

    async def _untake(self, run_id: str) -> None:
        if run_id not in self._taking:
            return
        self._taking.discard(run_id)
        try:
            async with self._locking:
                await (await self._lock_conn()).execute(
                    "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (self._lock_key(run_id),)
                )
        except Exception:  # a lock on a broken connection went with it
            logger.exception("could not release the take lock of run %s", run_id)

    async def heal(self, *, session_id: str | None = None, run_id: str | None = None) -> int:
        """Publish again each claimed run (of ``session_id``, or ``run_id``, or all) that no
        worker has taken and whose message went out over ``heal_after`` seconds ago: its
        worker may have died between the claim and the publish. Returns how many.

        Each is re-published under its take lock with its ``attempt`` bumped, so a worker
        taking an older copy meanwhile either holds the lock (and this skips the run) or
        finds its copy stale once it gets the lock."""
        t = self._tables
        sql = (
            f"SELECT o.run_id, o.payload, o.attempt FROM {t}lovia_run_outbox o JOIN "
            f"{t}chat_sessions s ON s.id = o.session_id AND s.active_run_id = o.run_id "
            "WHERE o.published_at IS NULL AND o.claimed_at < %s "
            "AND (%s::text IS NULL OR o.session_id = %s) "
            "AND (%s::text IS NULL OR o.run_id = %s)"
        )
        args = (time.time() - self.heal_after, session_id, session_id, run_id, run_id)
        try:
            async with self._talk:
                cur = await (await self._db()).execute(sql, args)
                rows = await cur.fetchall()
        except Exception:  # best effort: the next trigger tries again
            logger.exception("could not look for runs to heal")
            return 0
        healed = 0
        for found, body, attempt in rows:
            if not await self._try_take(found):
                continue  # a worker has it (or is taking it)
            try:
                bump = (
                    f"UPDATE {t}lovia_run_outbox SET attempt = attempt + 1, claimed_at = %s "
                    "WHERE run_id = %s AND attempt = %s AND published_at IS NULL"
                )
                async with self._talk:
                    cur = await (await self._db()).execute(bump, (time.time(), found, attempt))
                if cur.rowcount != 1:
                    continue  # another worker healed it first
                payload = json.loads(body)
                payload["attempt"] = attempt + 1
                await self.engine.dispatch(payload)
                await self._published_run(found, attempt + 1)
                healed += 1
                logger.warning("published run %s again: no worker had taken it", found)
            except Exception:
                logger.exception("could not publish run %s again", found)
            finally:
                await self._untake(found)
        return healed

    async def _run_pointed_at(self, run_id: str) -> bool:
        sql = f"SELECT 1 FROM {self._tables}chat_sessions WHERE active_run_id = %s LIMIT 1"
        async with self._talk:
            cur = await (await self._db()).execute(sql, (run_id,))
            return await cur.fetchone() is not None

    async def _db(self) -> AsyncConnection[Any]:
        """The query connection (its callers hold ``_talk``), connected again once it broke:
        a PostgreSQL blip costs the request that met it, not every request after it."""
        import psycopg

        if self._conn is None:
            raise RuntimeError("the cluster is not started")
        if self._conn.closed or self._conn.broken:
            logger.warning("the cluster's query connection broke; connecting again")
            self._conn = await psycopg.AsyncConnection.connect(self.store._dsn, autocommit=True)
        return self._conn

    async def remote_run(self, session_id: str) -> LiveRun | None:
        """The chat's run that lives (or waits to be resumed) elsewhere, as a ``LiveRun``
        this worker only watches; ``None`` when the chat has no run."""
        from ..supervisor import LiveRun

        meta = await self.store.get_session(session_id)
        if meta is None or meta.active_run_id is None:
            return None
        prompt = []
        snapshot = await self.store.checkpointer.load(meta.active_run_id)
        for entry in snapshot.entries if snapshot is not None else []:
            if not isinstance(entry, InputEntry):
                break
            if entry.role == "user":
                prompt.append(entry_to_dict(entry))
        if snapshot is None:  # not saved yet: its input is in its outbox message
            prompt = await self._outbox_input(meta.active_run_id)
        return LiveRun(meta.active_run_id, session_id, meta.agent, prompt=prompt)

    async def _outbox_input(self, run_id: str) -> list[dict[str, Any]]:
        """The input a run was dispatched with (its user entries), from its outbox row."""
        sql = f"SELECT payload FROM {self._tables}lovia_run_outbox WHERE run_id = %s"
        async with self._talk:
            cur = await (await self._db()).execute(sql, (run_id,))
            row = await cur.fetchone()
        if row is None:
            return []
        entries = json.loads(row[0]).get("input") or []
        return [e for e in entries if isinstance(e, dict) and e.get("role") == "user"]

    # -- running what the engine hands over ---------------------------------------------------

    async def execute(self, payload: dict[str, Any]) -> None:
        """Run a dispatched run here until it ends (the engine's task body, on the loop).

        A run whose chat no longer points at it is over (finished, cancelled, deleted): the
        task is dropped. A run with a checkpoint resumes from it, under the same id. Raises
        ``RunRejected`` to hand the task back when this worker cannot run it now, or when
        taking it failed (a database blip must not drop a run: the broker retries it).
        """
        sup = self._sup()
        if sup._closing or self._closing:
            raise RunRejected("this worker is shutting down")
        try:
            run = await self._take(payload)
        except RunRejected:
            raise
        except Exception as exc:
            logger.exception("could not take run %s", payload.get("run_id"))
            await asyncio.sleep(self.poll)  # not in a hot loop while the cause lasts
            raise RunRejected(f"taking the run failed: {type(exc).__name__}") from exc
        run_id = payload["run_id"]
        try:
            if run is None or run.task is None:
                return
            await asyncio.shield(run.task)
            if run.stop_reason == "shutdown":
                raise RunRejected("the worker shut down mid-run; another one resumes it")
        finally:
            if run is not None and run.run_id == run_id:
                await self._untake(run_id)
            await self._forget_outbox(run_id)

    async def _take(self, payload: dict[str, Any]) -> LiveRun | None:
        """Launch the delivered run here (resumed when it has a checkpoint); ``None`` when
        there is nothing to run."""
        sup = self._sup()
        session_id, run_id = payload["session_id"], payload["run_id"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lease_wait
        while True:
            meta = await self.store.get_session(session_id)
            if meta is None or meta.active_run_id != run_id:
                await self._forget_outbox(run_id)
                return None
            live = sup.live(session_id)
            if live is not None:  # only a duplicate delivery finds it here
                if live.run_id == run_id:
                    return live
                raise RunRejected(f"session {session_id!r} has another run here")
            # A dead worker's take lock and lease go with its connections: wait for that.
            if await self._try_take(run_id):
                try:
                    if not await self._current(run_id, payload.get("attempt", 0)):
                        await self._untake(run_id)
                        return None  # a stale copy: a healed one went out after it
                    await sup._require_unheld(session_id, run_id)
                    break
                except RunConflict:
                    await self._untake(run_id)
                except BaseException:
                    await self._untake(run_id)
                    raise
            if loop.time() > deadline:
                raise RunRejected(f"run {run_id!r} is still held elsewhere")
            await asyncio.sleep(0.05)
        try:
            return await self._launch_taken(payload, meta)
        except BaseException:
            await self._untake(run_id)
            raise

    async def _current(self, run_id: str, attempt: Any) -> bool:
        """Whether a delivery of ``attempt`` is the run's latest message (a run without an
        outbox row, from before the outbox, has only one)."""
        sql = f"SELECT attempt FROM {self._tables}lovia_run_outbox WHERE run_id = %s"
        async with self._talk:
            cur = await (await self._db()).execute(sql, (run_id,))
            row = await cur.fetchone()
        return row is None or row[0] == attempt

    async def _launch_taken(self, payload: dict[str, Any], meta: ChatMeta) -> LiveRun:
        """Launch a run this worker holds the take lock of."""
        sup = self._sup()
        session_id, run_id = payload["session_id"], payload["run_id"]
        agent = meta.agent if meta.agent in sup.agents else payload["agent"]
        if agent not in sup.agents:
            agent = next(iter(sup.agents))
        snapshot = await self.store.checkpointer.load(run_id)
        if snapshot is not None:
            remote = await self.remote_run(session_id)
            return await sup._launch(
                session_id,
                agent,
                [],
                title=meta.title,
                resume_run=run_id,
                source="resume",
                prompt=remote.prompt if remote is not None else [],
            )
        # it never saved: it starts over from its input, under its id
        entries = [entry_from_dict(d) for d in payload["input"]]
        return await sup._launch(
            session_id,
            agent,
            entries,
            title=payload.get("title", ""),
            run_id=run_id,
            source=payload.get("source", "chat"),
            prompt=list(payload["input"]),
        )

    # -- live events -------------------------------------------------------------------------

    def _published(self, record: EventRecord) -> None:
        """The hub's hook: ``record`` is durable; tell the other workers (coalesced)."""
        if self._closing:
            return
        if record.seq > self._pending.get(record.run_id, 0):
            self._pending[record.run_id] = record.seq
        self._pending_wake.set()
        self._wake(record.run_id)

    async def _send_events(self) -> None:
        channel = self._channels["ev"]
        while True:
            await self._pending_wake.wait()
            self._pending_wake.clear()
            batch, self._pending = self._pending, {}
            try:
                async with self._talk:
                    for run_id, seq in batch.items():
                        await (await self._db()).execute(
                            "SELECT pg_notify(%s, %s)", (channel, f"{run_id}:{seq}")
                        )
            except Exception:  # watchers elsewhere fall back on their poll
                logger.exception("could not notify %d run(s)", len(batch))
                await self._reconnect_talk()

    async def _reconnect_talk(self) -> None:
        """A fresh connection for queries and notifications (under the lock its users take)."""
        import psycopg

        async with self._talk:
            with contextlib.suppress(Exception):
                if self._conn is not None:
                    await self._conn.close()
            try:
                self._conn = await psycopg.AsyncConnection.connect(self.store._dsn, autocommit=True)
                return
            except Exception:
                logger.exception("could not reconnect to PostgreSQL")
        await asyncio.sleep(self.poll)

    def _wake(self, run_id: str) -> None:
        for wake in self._waiters.get(run_id, ()):
            wake.set()

    async def tail(self, run_id: str, *, after: int = 0) -> AsyncIterator[EventRecord]:
        """The run's records with ``seq > after`` from the log, following it until ``done``
        or until no chat points at the run any more (see the module docstring). It also
        ends once the run is live in this process: the caller follows it in process then."""
        hub = self._sup().hub
        wake = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(wake)
        loop = asyncio.get_running_loop()
        next_heal = loop.time() + self.heal_after
        ending_at: float | None = None
        try:
            while True:
                wake.clear()  # before the read: a notification during it reads again
                records = await self.store.read_events(run_id, after=after)
                for record in records:
                    yield record
                    after = record.seq
                    if record.type == "done":
                        return
                if records:
                    continue
                if self._closing or hub.is_open(run_id):
                    return
                try:
                    await asyncio.wait_for(wake.wait(), self.poll)
                except asyncio.TimeoutError:
                    if ending_at is not None:
                        if loop.time() > ending_at:
                            return  # freed, no done: it never ran, or died at its very end
                        continue
                    if not await self._run_pointed_at(run_id):
                        # A finishing run frees its chat just before it logs its done:
                        # read on for a moment rather than stop in between.
                        ending_at = loop.time() + self.end_grace
                        continue
                    if loop.time() > next_heal:  # a client waits on it: is it lost?
                        next_heal = loop.time() + self.heal_after
                        await self.heal(run_id=run_id)
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[run_id]

    # -- commands ----------------------------------------------------------------------------

    async def call(
        self, session_id: str, op: str, *, timeout: float | None = None, **args: Any
    ) -> dict[str, Any] | None:
        """Run ``op`` on the worker holding the chat's live run; its result, or ``None``
        when no worker answers within ``timeout`` (``command_timeout`` by default). A
        refusal there is raised here as the same ``WebError``."""
        meta = await self.store.get_session(session_id)
        if meta is None or meta.active_run_id is None:
            return None  # no run to ask about: no need to wait for silence
        request_id = uuid4().hex
        body = json.dumps(
            {
                "id": request_id,
                "from": self.worker_id,
                "session_id": session_id,
                "op": op,
                "args": args,
            }
        )
        if len(body.encode()) > _MAX_PAYLOAD:
            raise UserError(
                "the message is too long to route to the worker running this chat",
                hint="send a shorter message, or send it once the run is done",
            )
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        try:
            async with self._talk:
                await (await self._db()).execute(
                    "SELECT pg_notify(%s, %s)", (self._channels["cmd"], body)
                )
            wait = self.command_timeout if timeout is None else timeout
            reply = await asyncio.wait_for(future, wait)
        except asyncio.TimeoutError:
            return None
        finally:
            self._replies.pop(request_id, None)
        error = reply.get("error")
        if error is not None:
            kind = _ERRORS.get(int(error.get("status", 409)), RunConflict)
            raise kind(str(error.get("message")), hint=error.get("hint"))
        result: dict[str, Any] = reply.get("result") or {}
        return result

    async def _on_command(self, body: dict[str, Any]) -> None:
        sup = self._sup()
        session_id = body.get("session_id")
        if not isinstance(session_id, str) or sup.live(session_id) is None:
            return  # not ours: the worker that holds it answers
        reply: dict[str, Any] = {"id": body.get("id")}
        try:
            if body.get("op") == "stop":  # the chat is being deleted
                # Cancel now and answer; the caller waits for the run to end. The rest of a
                # stop (the chat's workspace session released) follows the run's end here.
                reply["result"] = {"run_id": sup.cancel(session_id).run_id}
                self._spawn(sup.stop(session_id))
            else:
                args = body.get("args", {})
                reply["result"] = self._command(sup, session_id, body.get("op"), args)
        except WebError as exc:
            reply["error"] = {"status": exc.status, "message": exc.message, "hint": exc.hint}
        except Exception as exc:
            logger.exception("command %s for session %s failed", body.get("op"), session_id)
            reply["error"] = {"status": 409, "message": f"the command failed: {type(exc).__name__}"}
        try:
            async with self._talk:
                await (await self._db()).execute(
                    "SELECT pg_notify(%s, %s)", (self._channels["re"], _fit(reply))
                )
        except Exception:  # the caller times out and answers as if no worker held the run
            logger.exception("could not reply to command %s", body.get("op"))
            await self._reconnect_talk()

    def _command(
        self, sup: RunSupervisor, session_id: str, op: Any, args: dict[str, Any]
    ) -> dict[str, Any]:
        live = sup.live(session_id)
        assert live is not None
        if op == "push":
            sup._refuse_stopping(live)
            entry = entry_from_dict(args["entry"])
            assert isinstance(entry, InputEntry)
            content = entry.content
            live.mailbox.push(content if isinstance(content, str) else list(content))
            return {"run_id": live.run_id}
        if op == "pending":
            from ..routes.chat import pending_state  # lazily: a route module pulls in FastAPI

            return pending_state(sup, session_id)
        if op == "inject":
            return {"id": sup.inject(session_id, str(args["message"])), "run_id": live.run_id}
        if op == "uninject":
            return {"withdrawn": sup.uninject(session_id, int(args["id"]))}
        if op == "cancel":
            return {"run_id": sup.cancel(session_id).run_id}
        if op == "approve":
            decided = sup.approvals.decide(
                session_id, str(args["call_id"]), bool(args["approve"]), reason=args.get("reason")
            )
            return {"decided": decided}
        if op == "answer":
            question = sup.questions.answer(session_id, args["answer"]) if sup.questions else None
            if question is None:
                return {"answered": False}
            return {"answered": True, "question_id": question.id, "question": question.question}
        raise RunConflict(f"unknown command {op!r}")

    # -- lifecycle relay ---------------------------------------------------------------------

    def _relay(self, kind: str, data: dict[str, Any]) -> None:
        """The bus's hook: tell the other workers' buses (best effort, like the bus)."""
        if kind not in _RELAYED_KINDS or self._closing:
            return
        body = json.dumps({"from": self.worker_id, "kind": kind, "data": data})
        if len(body.encode()) > _MAX_PAYLOAD and isinstance(data.get("error"), str):
            # A long error (a provider's response body, say) must not cost the other
            # workers the run's end: it is shortened to fit, the rest is in the run's log.
            error: str = data["error"]

            def shortened(keep: int) -> str:
                cut = {**data, "error": error[:keep] + " ..."}
                return json.dumps({"from": self.worker_id, "kind": kind, "data": cut})

            lo, hi = 0, len(error)  # the longest head that fits (escapes make bytes vary)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (
                    (mid, hi) if len(shortened(mid).encode()) <= _MAX_PAYLOAD else (lo, mid - 1)
                )
            body = shortened(lo)
        if len(body.encode()) > _MAX_PAYLOAD:
            logger.warning("a %s event is too large to relay to the other workers", kind)
            return
        self._spawn(self._notify_bus(body))

    async def _notify_bus(self, body: str) -> None:
        try:
            async with self._talk:
                await (await self._db()).execute(
                    "SELECT pg_notify(%s, %s)", (self._channels["bus"], body)
                )
        except Exception:
            logger.exception("could not relay a lifecycle event")

    # -- the listener ------------------------------------------------------------------------

    async def _listen(self) -> None:
        import psycopg

        names = {v: k for k, v in self._channels.items()}
        while True:
            try:
                assert self._listener is not None
                async for note in self._listener.notifies():
                    self._dispatch_note(names.get(note.channel), note.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("the cluster listener lost PostgreSQL; reconnecting")
                await asyncio.sleep(self.poll)
                with contextlib.suppress(Exception):
                    self._listener = await psycopg.AsyncConnection.connect(
                        self.store._dsn, autocommit=True
                    )
                    for channel in self._channels.values():
                        await self._listener.execute(f"LISTEN {_quote(channel)}")
                for run_id in list(self._waiters):  # they re-read what they may have missed
                    self._wake(run_id)

    def _dispatch_note(self, kind: str | None, payload: str) -> None:
        if kind == "ev":
            run_id, _, _ = payload.partition(":")
            self._wake(run_id)
            return
        try:
            body = json.loads(payload)
        except ValueError:
            return
        if kind == "cmd":
            self._spawn(self._on_command(body))
        elif kind == "re":
            future = self._replies.get(body.get("id"))
            if future is not None and not future.done():
                future.set_result(body)
        elif kind == "bus" and body.get("from") != self.worker_id and self.bus is not None:
            with contextlib.suppress(ValueError):
                self.bus.publish(body["kind"], body.get("data") or {}, relayed=True)

    # -- sweeping ----------------------------------------------------------------------------

    async def sweep_stale_runs(self) -> int:
        """Mark ``running`` records whose chat no longer points at them ``interrupted``
        (a run pointed at is live on some worker or waiting in the engine)."""
        sql = (
            f"UPDATE {self._tables}chat_runs SET status = 'interrupted', ended_at = %s "
            "WHERE status = 'running' AND run_id NOT IN (SELECT active_run_id FROM "
            f"{self._tables}chat_sessions WHERE active_run_id IS NOT NULL)"
        )
        forget = (
            f"DELETE FROM {self._tables}lovia_run_outbox WHERE run_id NOT IN (SELECT "
            f"active_run_id FROM {self._tables}chat_sessions WHERE active_run_id IS NOT NULL)"
        )
        async with self._talk:
            cur = await (await self._db()).execute(sql, (time.time(),))
            await (await self._db()).execute(forget)  # rows of runs that need no worker any more
            return max(cur.rowcount, 0)
