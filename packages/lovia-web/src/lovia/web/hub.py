"""``EventHub``: in-process fan-out of a run's records to the clients watching it.

One channel per run, opened by the supervisor before the run starts and closed when it ends.
Every subscriber has its own bounded queue, so a slow client never slows the run or the other
watchers: when its queue is full it is *dropped* (its iterator ends with ``dropped`` set) and
it catches up from the durable event log instead. Closing a channel lets each subscriber drain
what was already queued (the tail) before its iterator ends; subscribing to a closed or unknown
channel returns ``None``.

Records arrive already numbered (``EventRecord.seq``); the hub checks the numbers only ever
increase, which is what lets a reader dedupe the log against the live feed by ``seq``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from .eventlog import EventRecord

__all__ = ["EventHub", "Subscription"]


class Subscription:
    """One watcher of one run: an async iterator of records."""

    __slots__ = ("_closed", "_items", "_limit", "_wake", "dropped")

    def __init__(self, limit: int) -> None:
        self._items: deque[EventRecord] = deque()
        self._limit = limit
        self._wake = asyncio.Event()
        self._closed = False
        self.dropped = False
        """Whether the hub gave up on this watcher because it fell ``limit`` records behind."""

    def _offer(self, record: EventRecord) -> bool:
        if len(self._items) >= self._limit:
            self.dropped = True
            self._end()
            return False
        self._items.append(record)
        self._wake.set()
        return True

    def _end(self) -> None:
        self._closed = True
        self._wake.set()

    def __aiter__(self) -> AsyncIterator[EventRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[EventRecord]:
        while True:
            while self._items:
                yield self._items.popleft()
            if self._closed:
                return
            self._wake.clear()
            await self._wake.wait()


class EventHub:
    """Per-run channels of subscribers (see the module docstring)."""

    def __init__(self, *, max_queue: int = 1024) -> None:
        self.max_queue = max_queue
        self._channels: dict[str, list[Subscription]] = {}
        self._last_seq: dict[str, int] = {}
        self.published: Callable[[EventRecord], None] | None = None
        """Called with each record once its watchers have it (a cluster tells the other
        workers: the record is durable by then)."""

    def __repr__(self) -> str:
        return f"EventHub(channels={len(self._channels)})"

    def open(self, run_id: str) -> None:
        """Start accepting subscribers for ``run_id``."""
        self._channels.setdefault(run_id, [])
        self._last_seq.setdefault(run_id, 0)

    def is_open(self, run_id: str) -> bool:
        return run_id in self._channels

    def subscribe(self, run_id: str) -> Subscription | None:
        """A new watcher of ``run_id``'s future records; ``None`` if the channel is not open."""
        channel = self._channels.get(run_id)
        if channel is None:
            return None
        sub = Subscription(self.max_queue)
        channel.append(sub)
        return sub

    def unsubscribe(self, run_id: str, sub: Subscription) -> None:
        channel = self._channels.get(run_id)
        if channel is not None and sub in channel:
            channel.remove(sub)

    def publish(self, record: EventRecord) -> None:
        """Hand ``record`` to every watcher of its run, dropping those that are full."""
        channel = self._channels.get(record.run_id)
        if channel is None:
            raise RuntimeError(f"run {record.run_id!r} has no open channel")
        if record.seq <= self._last_seq[record.run_id]:
            raise RuntimeError(
                f"seq {record.seq} of run {record.run_id!r} is not after "
                f"{self._last_seq[record.run_id]}"
            )
        self._last_seq[record.run_id] = record.seq
        channel[:] = [sub for sub in channel if sub._offer(record)]
        if self.published is not None:
            self.published(record)

    def close(self, run_id: str) -> None:
        """End the channel: watchers drain their queued tail, then their iterators end."""
        self._last_seq.pop(run_id, None)
        for sub in self._channels.pop(run_id, ()):
            sub._end()
