"""EventHub: fan-out with a monotonic seq, slow subscribers dropped, close delivers the tail."""

from __future__ import annotations

import pytest
from lovia.web import EventHub, EventRecord


def _rec(seq: int, run_id: str = "r1") -> EventRecord:
    return EventRecord(run_id, seq, "text_delta", {"delta": str(seq)})


async def _drain(sub: object) -> list[int]:
    return [r.seq async for r in sub]  # type: ignore[attr-defined]


async def test_every_subscriber_gets_every_record_and_close_delivers_the_tail() -> None:
    hub = EventHub()
    hub.open("r1")
    a, b = hub.subscribe("r1"), hub.subscribe("r1")
    assert a is not None and b is not None
    for seq in (1, 2, 3):
        hub.publish(_rec(seq))
    hub.close("r1")  # nothing consumed yet: the queued tail still arrives
    assert await _drain(a) == [1, 2, 3]
    assert await _drain(b) == [1, 2, 3]
    assert not a.dropped


async def test_a_slow_subscriber_is_dropped_without_stalling_the_others() -> None:
    hub = EventHub(max_queue=2)
    hub.open("r1")
    slow, fast = hub.subscribe("r1"), hub.subscribe("r1")
    assert slow is not None and fast is not None
    fast_seen = []
    for seq in (1, 2, 3, 4):
        hub.publish(_rec(seq))
        fast_seen.append(await anext(aiter(fast)))
    hub.close("r1")
    assert [r.seq for r in fast_seen] == [1, 2, 3, 4]
    assert slow.dropped
    assert await _drain(slow) == [1, 2]  # what it had queued, then the end


async def test_subscribing_to_a_closed_or_unknown_run_gets_nothing() -> None:
    hub = EventHub()
    hub.open("r1")
    hub.close("r1")
    assert hub.subscribe("r1") is None
    assert hub.subscribe("never") is None


async def test_seq_must_increase() -> None:
    hub = EventHub()
    hub.open("r1")
    hub.publish(_rec(1))
    with pytest.raises(RuntimeError, match="not after 1"):
        hub.publish(_rec(1))
    with pytest.raises(RuntimeError, match="no open channel"):
        hub.publish(_rec(1, run_id="r2"))
