"""The lifecycle event bus (``/api/events``) and the recorder of run records.

``LifecycleBus`` tells every open client what changed on the server, so a sidebar stays
current without polling: a run started or finished, a chat was created or retitled, the
configuration changed. It is a plain fan-out:

* every event gets the bus's next ``seq`` (1, 2, ...), one counter for the whole bus;
* each subscriber has its own bounded queue; one that falls ``max_queue`` events behind is
  *dropped* (its iterator ends with ``dropped`` set) instead of slowing ``publish`` or the
  other subscribers. A dropped client reconnects and fetches a fresh snapshot;
* there is no history: a subscriber sees the events published after it subscribed;
* ``close`` ends every subscription after it has delivered what was already queued (the
  tail); a subscription taken after ``close`` is already ended (it sees only the close).

``RunLifecycle`` is what the ``RunSupervisor`` calls when it reserves a run's slot
(``run_started``) and when it releases it (``run_finished``). It writes the run's record
(``chat_runs``: status, error, duration, usage, source), publishes ``session_created``,
``run_started`` and ``run_finished``, and asks for a model title once a new chat's first run
is over. It never raises: a failing store or a broken title model costs a log line, never a
run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store.base import ChatStore, RunRecord, RunSource, RunStatus
    from .supervisor import LiveRun
    from .titles import TitleGenerator

__all__ = [
    "BusSubscription",
    "LIFECYCLE_KINDS",
    "LifecycleBus",
    "LifecycleEvent",
    "RunLifecycle",
]

logger = logging.getLogger(__name__)

LIFECYCLE_KINDS = (
    "run_started",
    "run_finished",
    "session_created",
    "session_retitled",
    "config_changed",
)
"""The event kinds the server publishes (``publish`` accepts only these)."""


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    """One published event: ``seq`` is its position on the bus, ``at`` Unix seconds."""

    seq: int
    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0


class BusSubscription:
    """One subscriber: an async iterator of ``LifecycleEvent``s that ends on close or drop.

    The queue holds ``limit`` events plus one reserved slot for the end marker, so ending
    a full subscription never fails and never discards its tail.
    """

    __slots__ = ("_limit", "_queue", "closed", "dropped")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._queue: asyncio.Queue[LifecycleEvent | None] = asyncio.Queue(limit + 1)
        self.closed = False
        """Whether the subscription has ended (its iterator stops after the queued tail)."""
        self.dropped = False
        """Whether the bus ended it for falling ``limit`` events behind."""

    def __repr__(self) -> str:
        return f"BusSubscription(queued={self._queue.qsize()}, closed={self.closed})"

    def _offer(self, event: LifecycleEvent) -> bool:
        if self.closed:
            return False
        if self._queue.qsize() >= self._limit:
            self.dropped = True
            self._end()
            return False
        self._queue.put_nowait(event)
        return True

    def _end(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)  # the reserved slot

    def __aiter__(self) -> BusSubscription:
        return self

    async def __anext__(self) -> LifecycleEvent:
        event = await self._queue.get()
        if event is None:
            self._queue.put_nowait(None)  # a second iteration ends at once too
            raise StopAsyncIteration
        return event


class LifecycleBus:
    """Server-wide fan-out of ``LifecycleEvent``s (see the module docstring)."""

    def __init__(self, *, max_queue: int = 256) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.max_queue = max_queue
        self._subscribers: list[BusSubscription] = []
        self._seq = 0
        self._closed = False
        self.relay: Callable[[str, dict[str, Any]], None] | None = None
        """Called with each event published here (not relayed): a cluster hands it to the
        other workers' buses."""

    def __repr__(self) -> str:
        return f"LifecycleBus(subscribers={len(self._subscribers)}, seq={self._seq})"

    @property
    def seq(self) -> int:
        """The ``seq`` of the last published event (0 before any)."""
        return self._seq

    @property
    def subscribers(self) -> int:
        """How many subscriptions are open."""
        return len(self._subscribers)

    @property
    def closed(self) -> bool:
        return self._closed

    def subscribe(self) -> BusSubscription:
        """A subscription to the events published from now on (already ended after close)."""
        sub = BusSubscription(self.max_queue)
        if self._closed:
            sub._end()
        else:
            self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: BusSubscription) -> None:
        """Forget ``sub`` (idempotent); its iterator ends after what it has queued."""
        if sub in self._subscribers:
            self._subscribers.remove(sub)
        sub._end()

    def publish(
        self, kind: str, data: dict[str, Any] | None = None, *, relayed: bool = False
    ) -> LifecycleEvent | None:
        """Number ``kind`` and hand it to every subscriber, dropping the ones that are full.

        ``data`` must be JSON-safe. Returns the event, or ``None`` once the bus is closed.
        ``relayed`` marks an event another worker published (it is not relayed back).
        Raises ``ValueError`` for a kind outside ``LIFECYCLE_KINDS``.
        """
        if kind not in LIFECYCLE_KINDS:
            raise ValueError(f"unknown lifecycle event kind {kind!r}")
        if self._closed:
            return None
        self._seq += 1
        event = LifecycleEvent(self._seq, kind, dict(data or {}), time.time())
        self._subscribers[:] = [sub for sub in self._subscribers if sub._offer(event)]
        if self.relay is not None and not relayed:
            self.relay(kind, event.data)
        return event

    def close(self) -> None:
        """End every subscription once its queued tail is delivered; publishing stops."""
        self._closed = True
        subscribers, self._subscribers = self._subscribers, []
        for sub in subscribers:
            sub._end()


def _error_text(error: dict[str, Any] | None) -> str | None:
    if not error:
        return None
    kind, message = error.get("type"), error.get("message")
    return f"{kind}: {message}" if kind and message else str(message or kind or "") or None


class RunLifecycle:
    """The supervisor's collaborator at a run's start and end (see the module docstring)."""

    def __init__(
        self, store: ChatStore, bus: LifecycleBus, *, titles: TitleGenerator | None = None
    ) -> None:
        self.store = store
        self.bus = bus
        self.titles = titles
        self._live: dict[str, RunRecord] = {}
        self._starts: dict[str, asyncio.Task[None]] = {}

    def __repr__(self) -> str:
        return f"RunLifecycle(live={len(self._live)}, titles={self.titles is not None})"

    def record(self, run_id: str) -> RunRecord | None:
        """The record of a run that has started and not finished here."""
        return self._live.get(run_id)

    async def run_started(self, live: LiveRun, *, created: bool = False) -> None:
        """The supervisor reserved ``live``'s slot; ``created`` when it created the chat.

        Returns at once: the record is written and the events published by a task of its
        own, so a run's first event never waits on this; ``run_finished`` waits for it.
        """
        from .store.base import RunRecord

        record = RunRecord(
            run_id=live.run_id,
            session_id=live.session_id,
            agent=live.agent,
            source=_source(live),
            status="running",
            started_at=time.time(),
            ended_at=None,
            error=None,
            usage=None,
        )
        self._live[live.run_id] = record
        self._starts[live.run_id] = asyncio.create_task(
            self._started(record, created), name=f"lovia-run-record-{live.run_id}"
        )

    async def _started(self, record: RunRecord, created: bool) -> None:
        try:
            await self.store.record_run_started(record)
        except Exception:
            logger.exception("could not record the start of run %s", record.run_id)
        if created:
            title = ""
            try:
                meta = await self.store.get_session(record.session_id)
                title = meta.title if meta is not None else ""
            except Exception:
                logger.exception("could not read session %s", record.session_id)
            self.bus.publish(
                "session_created",
                {"session_id": record.session_id, "agent": record.agent, "title": title},
            )
        self.bus.publish("run_started", _run_data(record))

    async def run_finished(
        self,
        live: LiveRun,
        *,
        status: RunStatus,
        error: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        """The supervisor released ``live``'s slot; ``status`` is ``completed``, ``failed``,
        ``cancelled`` or ``interrupted`` (a shutdown: the run resumes after a restart)."""
        ended = time.time()
        started = self._live.pop(live.run_id, None)
        start = self._starts.pop(live.run_id, None)
        if start is not None:  # its record and its events come first
            await asyncio.wait({start})
        try:
            await self.store.record_run_finished(
                live.run_id, status=status, error=_error_text(error), usage=usage, ended_at=ended
            )
        except Exception:
            logger.exception("could not record the end of run %s", live.run_id)
        data: dict[str, Any] = {
            "run_id": live.run_id,
            "session_id": live.session_id,
            "agent": live.agent,
            "source": started.source if started is not None else _source(live),
            "status": status,
            "error": _error_text(error),
            "duration": None if started is None else max(0.0, ended - started.started_at),
            "usage": usage,
        }
        self.bus.publish("run_finished", data)
        if status != "interrupted":
            await self._maybe_title(live)

    async def _maybe_title(self, live: LiveRun) -> None:
        """Ask for a model title of a chat whose title is still provisional, unless one was
        already asked for (see ``TitleGenerator.wants``)."""
        if self.titles is None or not self.titles.wants(live.session_id):
            return
        try:
            meta = await self.store.get_session(live.session_id)
        except Exception:
            logger.exception("could not read session %s", live.session_id)
            return
        if meta is None or not meta.title_provisional or meta.parent_id:
            return
        self.titles.schedule(live.session_id, live.agent)

    async def aclose(self) -> None:
        """Cancel pending title tasks and close the bus (subscribers get their tail)."""
        try:
            if self._starts:
                await asyncio.wait(list(self._starts.values()))
            if self.titles is not None:
                await self.titles.aclose()
        finally:
            self.bus.close()


def _source(live: LiveRun) -> RunSource:
    from .store.base import RUN_SOURCES

    source = getattr(live, "source", None)
    for known in RUN_SOURCES:
        if source == known:
            return known
    return "resume" if live.resumed else "chat"


def _run_data(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "session_id": record.session_id,
        "agent": record.agent,
        "source": record.source,
        "started_at": record.started_at,
    }
