"""CancelToken: an idempotent latch, checkable, awaitable by many tasks, and raceable."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from lovia.cancellation import CancelToken
from lovia.exceptions import RunCancelled


def test_a_new_token_is_not_cancelled_and_check_passes() -> None:
    token = CancelToken()  # built outside any event loop
    assert (token.is_cancelled, token.reason) == (False, None)
    token.check()


def test_cancel_is_idempotent_and_keeps_the_first_reason() -> None:
    token = CancelToken()
    token.cancel("user pressed stop")
    token.cancel("second reason")
    assert (token.is_cancelled, token.reason) == (True, "user pressed stop")


def test_check_raises_run_cancelled_carrying_the_reason() -> None:
    token = CancelToken()
    token.cancel("bye")
    with pytest.raises(RunCancelled) as info:
        token.check()
    assert info.value.reason == "bye"
    assert str(info.value) == "run cancelled: bye"


def test_cancel_without_reason_gives_a_reasonless_error() -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(RunCancelled) as info:
        token.check()
    assert (info.value.reason, str(info.value)) == (None, "run cancelled")


async def test_wait_returns_at_once_when_already_cancelled() -> None:
    token = CancelToken()
    token.cancel()
    await token.wait()


async def test_cancel_wakes_every_waiter() -> None:
    token = CancelToken()
    waiters = [asyncio.create_task(token.wait()) for _ in range(3)]
    await asyncio.sleep(0)  # let the waiters block (a scheduling yield, not a timing wait)
    assert not any(w.done() for w in waiters)
    token.cancel("go")
    await asyncio.gather(*waiters)


async def test_a_cancelled_waiter_leaves_the_token_usable() -> None:
    token = CancelToken()
    waiter = asyncio.create_task(token.wait())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    other = asyncio.create_task(token.wait())
    token.cancel()
    await other


async def test_race_returns_the_result_when_the_work_finishes_first() -> None:
    async def work() -> int:
        return 42

    assert await CancelToken().race(work()) == 42


async def test_race_propagates_the_work_error() -> None:
    async def work() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await CancelToken().race(work())


async def test_race_raises_run_cancelled_and_cancels_the_work_when_the_token_fires() -> None:
    token = CancelToken()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def canceller() -> None:
        await started.wait()
        token.cancel("stop")

    helper = asyncio.create_task(canceller())
    with pytest.raises(RunCancelled) as info:
        await token.race(work())
    await helper
    assert info.value.reason == "stop"
    assert cancelled.is_set()  # the work was cancelled, and drained before race returned


async def test_race_on_a_cancelled_token_never_starts_the_work() -> None:
    token = CancelToken()
    token.cancel()
    ran = False

    async def work() -> None:
        nonlocal ran
        ran = True

    with pytest.raises(RunCancelled):
        await token.race(work())  # the coroutine is closed, so no "never awaited" warning
    assert not ran


async def test_race_leaves_no_task_behind() -> None:
    token = CancelToken()
    before = asyncio.all_tasks()

    async def work() -> str:
        return "done"

    await token.race(work())
    assert asyncio.all_tasks() == before


async def test_external_cancellation_of_race_propagates_and_cleans_up() -> None:
    token = CancelToken()
    started = asyncio.Event()
    work_cancelled = asyncio.Event()

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            work_cancelled.set()
            raise

    outer = asyncio.create_task(token.race(work()))
    await started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert work_cancelled.is_set()
    assert not token.is_cancelled  # task cancellation is not our cancellation


def test_repr_shows_the_state() -> None:
    token = CancelToken()
    assert repr(token) == "CancelToken(active)"
    token.cancel("x")
    assert repr(token) == "CancelToken(cancelled, reason='x')"


async def test_cancel_from_another_thread_wakes_a_waiter() -> None:
    token = CancelToken()
    waiter = asyncio.create_task(token.wait())
    await asyncio.sleep(0)  # let the waiter block
    thread = threading.Thread(target=token.cancel, args=("from a thread",))
    thread.start()
    await waiter
    thread.join()
    assert token.reason == "from a thread"


def test_one_token_can_be_waited_on_from_successive_event_loops() -> None:
    token = CancelToken()

    async def wait_then_cancel() -> None:
        waiter = asyncio.create_task(token.wait())
        await asyncio.sleep(0)
        waiter.cancel()  # abandon the wait: the token is still live
        with contextlib.suppress(asyncio.CancelledError):
            await waiter

    asyncio.run(wait_then_cancel())

    async def second_loop() -> None:
        waiter = asyncio.create_task(token.wait())
        await asyncio.sleep(0)
        token.cancel()
        await waiter

    asyncio.run(second_loop())
