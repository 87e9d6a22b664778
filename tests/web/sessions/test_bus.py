"""``LifecycleBus``: fan-out with one monotonic seq, bounded queues, drop, close."""

from __future__ import annotations

import asyncio
import time

import pytest
from lovia.web.lifecycle import LifecycleBus, LifecycleEvent


async def _drain(sub: object) -> list[LifecycleEvent]:
    return [event async for event in sub]  # type: ignore[attr-defined]


async def test_every_subscriber_sees_the_events_in_order_with_one_seq() -> None:
    bus = LifecycleBus()
    a, b = bus.subscribe(), bus.subscribe()
    bus.publish("session_created", {"session_id": "s1"})
    bus.publish("run_started", {"run_id": "r1"})
    c = bus.subscribe()  # no history: sees only what follows
    bus.publish("config_changed")
    bus.close()
    seen = [await _drain(s) for s in (a, b, c)]
    assert [[(e.seq, e.kind) for e in events] for events in seen] == [
        [(1, "session_created"), (2, "run_started"), (3, "config_changed")],
        [(1, "session_created"), (2, "run_started"), (3, "config_changed")],
        [(3, "config_changed")],
    ]
    assert seen[0][0].data == {"session_id": "s1"} and seen[0][2].data == {}
    assert bus.seq == 3


async def test_a_slow_subscriber_is_dropped_and_the_others_keep_going() -> None:
    bus = LifecycleBus(max_queue=4)
    slow, fast = bus.subscribe(), bus.subscribe()
    got: list[int] = []
    for n in range(10):
        bus.publish("run_started", {"n": n})
        got.extend([(await anext(fast)).data["n"]])
    assert got == list(range(10))
    assert slow.dropped and slow.closed and not fast.dropped
    assert bus.subscribers == 1
    # The dropped one still gets what it had queued, then its iterator ends.
    assert [e.data["n"] for e in await _drain(slow)] == [0, 1, 2, 3]


async def test_close_delivers_the_queued_tail_and_a_later_subscribe_sees_only_the_close() -> None:
    bus = LifecycleBus(max_queue=8)
    sub = bus.subscribe()
    for n in range(8):  # a full queue: the end marker has its own slot
        bus.publish("run_finished", {"n": n})
    bus.close()
    assert [e.data["n"] for e in await _drain(sub)] == list(range(8))
    assert await _drain(sub) == []  # iterating again ends at once
    late = bus.subscribe()
    assert late.closed and await _drain(late) == []
    assert bus.publish("run_started") is None and bus.seq == 8


async def test_a_waiting_subscriber_wakes_on_close() -> None:
    bus = LifecycleBus()
    sub = bus.subscribe()
    waiter = asyncio.create_task(_drain(sub))
    await asyncio.sleep(0)  # let it park on the empty queue
    bus.close()
    assert await asyncio.wait_for(waiter, 5) == []


async def test_unsubscribe_ends_the_iterator_and_is_idempotent() -> None:
    bus = LifecycleBus()
    sub = bus.subscribe()
    bus.publish("run_started")
    bus.unsubscribe(sub)
    bus.unsubscribe(sub)
    bus.publish("run_finished")
    assert [e.kind for e in await _drain(sub)] == ["run_started"]
    assert bus.subscribers == 0


def test_unknown_kinds_and_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown lifecycle event kind"):
        LifecycleBus().publish("run_exploded")
    with pytest.raises(ValueError, match="max_queue"):
        LifecycleBus(max_queue=0)


async def test_a_thousand_slow_subscribers_never_slow_publish_down() -> None:
    bus = LifecycleBus(max_queue=16)
    subs = [bus.subscribe() for _ in range(1000)]
    reader = bus.subscribe()
    started = time.perf_counter()
    for n in range(100):
        bus.publish("run_started", {"n": n})
        assert (await anext(reader)).data["n"] == n
    elapsed = time.perf_counter() - started
    assert all(s.dropped for s in subs) and not reader.dropped
    assert bus.subscribers == 1
    # 1000 subscribers x 17 offers, then 83 publishes with one subscriber: well under 1 s.
    assert elapsed < 2.0, elapsed
