"""ApprovalChannel: out-of-band decisions by call id and scope."""

from __future__ import annotations

import asyncio
import threading

from lovia.approvals import ApprovalChannel, PendingApproval
from lovia.messages import ToolCall


def test_a_channel_can_be_built_outside_a_loop_and_answers_false_when_empty() -> None:
    channel = ApprovalChannel()
    assert channel.approve("c1") is False
    assert channel.reject("c1", reason="no") is False
    assert channel.resolve("c1", True) is False
    assert (channel.is_pending("c1"), channel.pending(), channel.release()) == (False, [], 0)


async def test_approve_resolves_the_registered_future() -> None:
    channel = ApprovalChannel()
    future = channel.register("c1")
    assert channel.is_pending("c1")
    assert channel.approve("c1") is True
    assert await future == (True, None)
    assert channel.is_pending("c1") is False


async def test_reject_carries_the_reason() -> None:
    channel = ApprovalChannel()
    future = channel.register("c1")
    assert channel.reject("c1", reason="too risky") is True
    assert await future == (False, "too risky")


async def test_a_call_is_decided_only_once() -> None:
    channel = ApprovalChannel()
    future = channel.register("c1")
    assert channel.resolve("c1", True) is True
    assert channel.resolve("c1", False) is False
    assert await future == (True, None)


async def test_scopes_keep_equal_call_ids_apart() -> None:
    channel = ApprovalChannel()
    alice = channel.register("c1", scope="alice")
    bob = channel.register("c1", scope="bob")
    assert channel.approve("c1") is False  # the unscoped id is not pending
    assert channel.approve("c1", scope="bob") is True
    assert (alice.done(), await bob) == (False, (True, None))
    assert channel.is_pending("c1", scope="alice")


async def test_a_decision_before_the_loop_awaits_is_kept() -> None:
    channel = ApprovalChannel()
    future = channel.register("c1")
    channel.reject("c1")
    await asyncio.sleep(0)  # the loop does other work before it waits
    assert await future == (False, None)


async def test_release_denies_everything_pending_in_a_scope() -> None:
    channel = ApprovalChannel()
    a = channel.register("a", scope="s1")
    b = channel.register("b", scope="s1")
    other = channel.register("c", scope="s2")
    assert channel.release(scope="s1") == 2
    assert [await a, await b] == [
        (False, "released without a decision"),
        (False, "released without a decision"),
    ]
    assert not other.done()
    assert channel.release(decision=True) == 1  # no scope: everything left
    assert await other == (True, None)


async def test_pending_lists_waiting_calls_oldest_first_with_their_call() -> None:
    channel = ApprovalChannel()
    call = ToolCall(id="c2", name="rm", arguments='{"path": "/"}')
    channel.register("c1", scope="s")
    channel.register("c2", scope="s", call=call)
    channel.register("c3", scope="t")
    assert channel.pending(scope="s") == [
        PendingApproval("c1", "s", None),
        PendingApproval("c2", "s", call),
    ]
    assert [p.call_id for p in channel.pending()] == ["c1", "c2", "c3"]


async def test_discard_stops_tracking_without_deciding() -> None:
    channel = ApprovalChannel()
    future = channel.register("c1")
    channel.discard("c1")
    channel.discard("c1")  # no-op the second time
    assert channel.approve("c1") is False
    assert (future.done(), channel.pending()) == (False, [])


async def test_registering_a_pending_id_again_denies_the_older_registration() -> None:
    channel = ApprovalChannel()
    stale = channel.register("c1", scope="s")
    fresh = channel.register("c1", scope="s")
    assert await stale == (False, "superseded by a newer request for the same call")
    assert channel.approve("c1", scope="s") is True
    assert await fresh == (True, None)


async def test_a_decision_for_an_abandoned_waiter_returns_false() -> None:
    channel = ApprovalChannel()
    future = channel.register("c1")
    future.cancel()  # the waiting call went away (its task was cancelled)
    assert channel.approve("c1") is False


async def test_a_decision_from_another_thread_reaches_the_loop() -> None:
    channel = ApprovalChannel()
    future = channel.register("c1")
    answered: list[bool] = []
    thread = threading.Thread(target=lambda: answered.append(channel.approve("c1")))
    thread.start()
    assert await future == (True, None)
    thread.join()
    assert answered == [True]


def test_a_decision_after_the_waiting_loop_closed_returns_false() -> None:
    channel = ApprovalChannel()

    async def register() -> None:
        channel.register("c1", scope="s")
        channel.register("c2", scope="s")

    asyncio.run(register())  # the run that waited is gone, its loop closed
    assert channel.is_pending("c1", scope="s")
    assert channel.approve("c1", scope="s") is False  # no "Event loop is closed" error
    assert channel.release() == 0
