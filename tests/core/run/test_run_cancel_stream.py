"""Cancelling a run abandons a model call in flight (waiting for bytes or mid-stream).

Every provider here waits on an event nobody sets, so a run that ends did so because the
cancel interrupted the call, not because a timeout or the stream's end came first. The
``wait_for`` bounds only turn a regression into a failure instead of a hung test.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from lovia import Agent, Runner, tool
from lovia.cancellation import CancelToken
from lovia.events import (
    Event,
    MessageCompleted,
    RunFailed,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
)
from lovia.exceptions import RunCancelled
from lovia.providers.base import FinishDelta, ModelDelta
from lovia.runtime.result import RunHandleError
from lovia.testing import ScriptedProvider, call, text

BOUND = 5.0  # seconds; a safety net against a hang, never what ends a passing test


class Endless:
    """Yields ``head`` text deltas (one loop iteration apart), then waits forever.

    ``produced`` counts the deltas handed out; ``closed`` is set by the stream's ``finally``
    (``aclose`` or an exception thrown into it), ``waiting`` once it waits for good.
    """

    name = "endless"
    model = "endless-model"
    supports_json_schema = False

    def __init__(self, head: int = 1, *, silent: bool = False) -> None:
        self.head = 0 if silent else head
        self.produced = 0
        self.waiting = asyncio.Event()
        self.closed = asyncio.Event()
        self.calls = 0

    async def stream(self, entries: Sequence[Any], **_: Any) -> AsyncIterator[ModelDelta]:
        self.calls += 1
        try:
            for _n in range(self.head):
                await asyncio.sleep(0)  # like a network read: control goes back to the loop
                self.produced += 1
                yield TextDelta("x")
            self.waiting.set()
            await asyncio.Event().wait()
            yield FinishDelta("stop")  # never reached
        finally:
            self.closed.set()


def _agent(provider: Any, **kwargs: Any) -> Agent[Any]:
    return Agent("c", model=provider, **kwargs)


async def _drain(handle: Any, *, stop_after: int | None = None) -> list[Event]:
    events: list[Event] = []
    deltas = 0
    async for event in handle:
        events.append(event)
        if type(event) is TextDelta:
            deltas += 1
            if deltas == stop_after:
                handle.cancel("user stop")
    return events


def _cancelled(events: list[Event], reason: str | None = "user stop") -> None:
    last = events[-1]
    assert isinstance(last, RunFailed), last
    assert isinstance(last.error, RunCancelled) and last.error.reason == reason


async def test_a_cancel_abandons_a_stream_that_never_yields_again() -> None:
    provider = Endless(head=1)
    handle = Runner.stream(_agent(provider), "go")
    events = await asyncio.wait_for(_drain(handle, stop_after=1), BOUND)
    _cancelled(events)
    assert provider.closed.is_set()  # the stream was closed: its connection is released
    assert sum(type(e) is TextDelta for e in events) == 1
    with pytest.raises(RunCancelled):
        await handle.result()


async def test_no_delta_is_forwarded_after_the_cancel_reaches_the_loop() -> None:
    provider = Endless(head=1000)
    handle = Runner.stream(_agent(provider), "go")
    events = await asyncio.wait_for(_drain(handle, stop_after=10), BOUND)
    _cancelled(events)
    assert sum(type(e) is TextDelta for e in events) == 10
    assert provider.produced == 10 and provider.closed.is_set()


async def test_a_cancel_while_the_consumer_holds_a_delta_lands_in_the_stream_not_the_consumer() -> (
    None
):
    provider = Endless(head=1000)
    handle = Runner.stream(_agent(provider), "go")
    token_fired = asyncio.Event()
    events: list[Event] = []

    async def consume() -> None:
        async for event in handle:
            events.append(event)
            if type(event) is TextDelta and len(events) > 3:
                await token_fired.wait()  # the consumer's own await: must not be cancelled

    consumer = asyncio.ensure_future(consume())
    while not any(type(e) is TextDelta for e in events[3:]):
        await asyncio.sleep(0)
    handle.cancel("user stop")
    for _ in range(5):  # the cancel is seen by the loop while the consumer still waits
        await asyncio.sleep(0)
    token_fired.set()
    await asyncio.wait_for(consumer, BOUND)
    _cancelled(events)
    deltas = sum(type(e) is TextDelta for e in events)
    # The delta the consumer held was the last: the cancel landed in the provider's next
    # read, never in the consumer's own await.
    assert deltas == 2 and provider.produced == 2 and provider.closed.is_set()


async def test_a_cancel_before_the_first_byte_abandons_the_call() -> None:
    provider = Endless(silent=True)
    token = CancelToken()
    run = asyncio.ensure_future(Runner.run(_agent(provider), "go", cancel_token=token))
    await asyncio.wait_for(provider.waiting.wait(), BOUND)
    token.cancel("before the first byte")
    with pytest.raises(RunCancelled) as info:
        await asyncio.wait_for(run, BOUND)
    assert info.value.reason == "before the first byte"
    assert provider.closed.is_set() and provider.calls == 1


async def test_a_cancel_from_another_thread_abandons_the_call() -> None:
    provider = Endless(silent=True)
    token = CancelToken()
    run = asyncio.ensure_future(Runner.run(_agent(provider), "go", cancel_token=token))
    await asyncio.wait_for(provider.waiting.wait(), BOUND)
    thread = threading.Thread(target=token.cancel, args=("from a thread",))
    thread.start()
    with pytest.raises(RunCancelled) as info:
        await asyncio.wait_for(run, BOUND)
    thread.join()
    assert info.value.reason == "from a thread" and provider.closed.is_set()


async def test_a_cancelled_call_keeps_the_completed_turns_and_drops_the_partial_reply() -> None:
    @tool
    async def note() -> str:
        """Take a note."""
        return "noted"

    class Then(Endless):
        """One scripted turn (a tool call), then the endless one."""

        def __init__(self) -> None:
            super().__init__(head=3)
            self.first = ScriptedProvider([call("note", {})])

        async def stream(self, entries: Sequence[Any], **kw: Any) -> AsyncIterator[ModelDelta]:
            inner = self.first.stream(entries, **kw) if self.calls == 0 else None
            if inner is not None:
                self.calls += 1
                async for delta in inner:
                    yield delta
                return
            async for delta in super().stream(entries, **kw):
                yield delta

    token = CancelToken()
    provider = Then()
    handle = Runner.stream(_agent(provider, tools=[note]), "go", cancel_token=token)
    events = await asyncio.wait_for(_drain(handle, stop_after=3), BOUND)
    _cancelled(events)
    assert sum(type(e) is TextDelta for e in events) == 3
    # Like a reply cut off by an error: the transcript only receives completed replies, so
    # the turn with the tool call is kept and the cut-off text is not.
    completed = [e for e in events if isinstance(e, MessageCompleted)]
    assert [type(entry).__name__ for e in completed for entry in e.entries] == ["ToolCallEntry"]
    assert [type(e).__name__ for e in events if isinstance(e, ToolCallCompleted)] == [
        "ToolCallCompleted"
    ]


async def test_a_cancel_during_a_tool_call_behaves_as_before() -> None:
    entered = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        entered.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider([call("hang", {}), text("never")])
    handle = Runner.stream(_agent(provider, tools=[hang]), "go")
    events: list[Event] = []
    async for event in handle:
        events.append(event)
        if isinstance(event, ToolCallStarted):
            await entered.wait()
            handle.cancel("user stop")
    _cancelled(events)
    assert len(provider.calls) == 1


async def test_task_cancellation_of_a_run_in_a_model_call_stays_cancelled_error() -> None:
    provider = Endless(silent=True)
    token = CancelToken()
    run = asyncio.ensure_future(Runner.run(_agent(provider), "go", cancel_token=token))
    await asyncio.wait_for(provider.waiting.wait(), BOUND)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert provider.closed.is_set()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is 3.11+")
async def test_an_outer_timeout_around_a_run_still_raises_timeout_error() -> None:
    provider = Endless(silent=True)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):  # type: ignore[attr-defined,unused-ignore]
            await Runner.run(_agent(provider), "go")
    assert provider.closed.is_set()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is 3.11+")
async def test_a_timeout_and_a_cancel_on_the_runs_own_task_leave_the_timeout_its_error() -> None:
    provider = Endless(silent=True)
    token = CancelToken()
    outcome: list[BaseException] = []

    async def go() -> None:
        try:
            async with asyncio.timeout(None) as scope:  # type: ignore[attr-defined,unused-ignore]

                async def fire() -> None:
                    await provider.waiting.wait()
                    scope.reschedule(asyncio.get_running_loop().time())
                    token.cancel("together")  # same loop iteration as the timeout

                helper = asyncio.ensure_future(fire())
                await Runner.run(_agent(provider), "go", cancel_token=token)
                await helper
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome.append(exc)

    await asyncio.wait_for(go(), BOUND)
    assert len(outcome) == 1 and isinstance(outcome[0], TimeoutError), outcome
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling is 3.11+")
async def test_an_interrupted_call_leaves_no_cancel_request_on_the_runs_task() -> None:
    provider = Endless(silent=True)
    token = CancelToken()

    async def go() -> int:
        with pytest.raises(RunCancelled):
            await Runner.run(_agent(provider), "go", cancel_token=token)
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0)  # a pending cancel would land here
        left: int = task.cancelling()  # type: ignore[attr-defined,unused-ignore]
        return left

    runner = asyncio.ensure_future(go())
    await asyncio.wait_for(provider.waiting.wait(), BOUND)
    token.cancel()
    assert await asyncio.wait_for(runner, BOUND) == 0


def test_a_cancel_registration_fires_once_and_can_be_removed() -> None:
    token = CancelToken()
    fired: list[str] = []
    kept, removed = (lambda: fired.append("kept")), (lambda: fired.append("removed"))
    token.add_callback(kept)
    token.add_callback(removed)
    token.remove_callback(removed)
    token.remove_callback(removed)  # removing twice is fine
    token.cancel()
    token.cancel()
    assert fired == ["kept"]
    token.add_callback(lambda: fired.append("late"))  # already fired: called at once
    assert fired == ["kept", "late"]


def test_a_failing_cancel_callback_does_not_stop_the_others() -> None:
    token = CancelToken()
    fired: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    token.add_callback(broken)
    token.add_callback(lambda: fired.append("second"))
    token.cancel()
    assert fired == ["second"] and token.is_cancelled


async def test_without_uncancel_our_interrupt_is_told_by_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lovia.runtime import model_turn

    monkeypatch.setattr(model_turn, "_UNCANCEL", False)  # the 3.10 path
    provider = Endless(silent=True)
    token = CancelToken()
    run = asyncio.ensure_future(Runner.run(_agent(provider), "go", cancel_token=token))
    await asyncio.wait_for(provider.waiting.wait(), BOUND)
    token.cancel("on 3.10")
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(run, BOUND)
    assert provider.closed.is_set()
    other = Endless(silent=True)
    run = asyncio.ensure_future(Runner.run(_agent(other), "go"))
    await asyncio.wait_for(other.waiting.wait(), BOUND)
    run.cancel()  # a task cancel, not ours: it stays CancelledError
    with pytest.raises(asyncio.CancelledError):
        await run


async def test_a_handle_passed_to_another_task_mid_stream_cancels_that_task_not_the_first() -> None:
    # The first task reads one delta, then hands the handle to a second task and waits on
    # its own. The cancel must land in the second (inside the provider's read), never in
    # the first, which no longer iterates.
    provider = Endless(head=1)
    handle = Runner.stream(_agent(provider), "go")
    events: list[Event] = []
    while not events or type(events[-1]) is not TextDelta:
        events.append(await anext(handle))

    async def rest() -> None:
        while True:
            try:
                events.append(await anext(handle))
            except StopAsyncIteration:
                return

    second = asyncio.ensure_future(rest())
    await asyncio.wait_for(provider.waiting.wait(), BOUND)
    handle.cancel("user stop")
    await asyncio.sleep(0.2)  # the first task's own await: a cancel meant for it lands here
    await asyncio.wait_for(second, BOUND)
    _cancelled(events)
    assert provider.closed.is_set()


async def test_a_cancel_after_the_consumer_broke_out_does_not_poll_for_ever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A consumer that broke out of `async for` and keeps the handle never resumes the
    # stream: the cancel has nothing to interrupt, and must not keep a timer going while
    # the handle lives.
    import lovia.runtime.model_turn as model_turn

    looks = 0
    interrupt = model_turn._interrupt

    def counting(ref: Any) -> None:
        nonlocal looks
        looks += 1
        interrupt(ref)

    monkeypatch.setattr(model_turn, "_interrupt", counting)
    provider = Endless(head=5)
    handle = Runner.stream(_agent(provider), "go")
    async for event in handle:
        if type(event) is TextDelta:
            break
    handle.cancel("user stop")
    await asyncio.sleep(0.3)
    before = looks
    await asyncio.sleep(0.3)
    assert looks == before
    with pytest.raises(RunHandleError):  # abandoned: result() tears the run down
        await handle.result()
    assert provider.closed.is_set()


class Converts:
    """Yields one delta, then waits; turns the cancel it receives into ``RuntimeError``
    (an adapter that wraps every failure of its read in its own error)."""

    name = "converts"
    model = "converts-model"
    supports_json_schema = False

    def __init__(self) -> None:
        self.waiting = asyncio.Event()

    async def stream(self, entries: Sequence[Any], **_: Any) -> AsyncIterator[ModelDelta]:
        yield TextDelta("x")
        try:
            self.waiting.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("read failed") from None
        yield FinishDelta("stop")  # never reached


async def test_a_provider_that_turns_the_cancel_into_its_own_error_still_ends_cancelled() -> None:
    provider = Converts()
    handle = Runner.stream(_agent(provider), "go")
    consumer = asyncio.ensure_future(_drain(handle))
    await asyncio.wait_for(provider.waiting.wait(), BOUND)
    handle.cancel("user stop")
    _cancelled(await asyncio.wait_for(consumer, BOUND))
