"""Budgets and cancellation in the run loop (catalogue section 12, items 5 and 6)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.budget import RunBudget
from lovia.cancellation import CancelToken
from lovia.events import Event, RunFailed, ToolCallCompleted, ToolCallStarted
from lovia.exceptions import BudgetExceeded, RunCancelled
from lovia.messages import Usage
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry


def _results(entries: list[TranscriptEntry]) -> list[str]:
    return [e.call_id for e in entries if isinstance(e, ToolResultEntry)]


# -- budgets ------------------------------------------------------------------------------


async def test_budget_trip_mid_batch_lets_in_flight_calls_finish() -> None:
    gate = asyncio.Event()
    transcript: list[list[TranscriptEntry]] = []

    ran: list[str] = []

    @tool
    async def first(ctx: RunContext[Any]) -> str:
        """Waits for second."""
        ran.append("first")
        transcript.append(ctx.entries)
        await gate.wait()
        return "first"

    @tool
    async def second() -> str:
        """Opens the gate."""
        gate.set()
        return "second"

    provider = ScriptedProvider(
        [batch(("first", {}, "a"), ("second", {}, "b"), ("first", {}, "c")), text("never")]
    )
    handle = Runner.stream(
        Agent("b", model=provider, tools=[first, second]), "go", budget=RunBudget(max_tool_calls=2)
    )
    events = await asyncio.wait_for(_collect(handle), 5)
    completed = [e.call.id for e in events if isinstance(e, ToolCallCompleted)]
    assert sorted(completed) == ["a", "b"]
    assert isinstance(events[-1], RunFailed)
    assert isinstance(events[-1].error, BudgetExceeded)
    assert events[-1].error.limit == "max_tool_calls"
    assert sorted(_results(transcript[0])) == ["a", "b"]  # "c" stays pending for a resume
    assert ran == ["first"]  # the tripping call was never dispatched


async def test_budget_counts_rejected_calls_too() -> None:
    budget = RunBudget(max_tool_calls=5)
    provider = ScriptedProvider([batch(("nope", {}), ("nope", {}), ("nope", {})), text("ok")])
    await Runner.run(Agent("r", model=provider), "go", budget=budget)
    assert budget.tool_calls == 3


async def test_token_budget_is_checked_after_each_model_reply() -> None:
    provider = ScriptedProvider(
        [text("big", usage=Usage(input_tokens=100, output_tokens=50)), text("never")]
    )
    with pytest.raises(BudgetExceeded) as info:
        await Runner.run(Agent("t", model=provider), "go", budget=RunBudget(max_total_tokens=10))
    assert info.value.limit == "max_total_tokens"


async def test_budget_trip_after_a_reply_dispatches_none_of_its_calls() -> None:
    ran: list[str] = []

    @tool
    async def noop() -> str:
        """Noop."""
        ran.append("noop")
        return "ok"

    provider = ScriptedProvider([call("noop", {}, usage=Usage(input_tokens=11)), text("never")])
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            Agent("t", model=provider, tools=[noop]), "go", budget=RunBudget(max_input_tokens=10)
        )
    assert ran == []


async def test_tool_raising_the_runs_budget_ends_the_run() -> None:
    @tool
    async def spend(ctx: RunContext[Any]) -> str:
        """Spend."""
        raise BudgetExceeded("tool spent it all", limit="custom")

    provider = ScriptedProvider([call("spend", {}), text("never")])
    with pytest.raises(BudgetExceeded, match="tool spent it all"):
        await Runner.run(Agent("s", model=provider, tools=[spend]), "go")


# -- cancellation -------------------------------------------------------------------------


async def test_cancel_mid_batch_cancels_siblings_and_appends_nothing_for_them() -> None:
    cancelled: list[str] = []
    started = {"a": asyncio.Event(), "b": asyncio.Event()}
    transcript: list[list[TranscriptEntry]] = []

    @tool
    async def hang(name: str, ctx: RunContext[Any]) -> str:
        """Hang until cancelled."""
        transcript.append(ctx.entries)
        started[name].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    provider = ScriptedProvider(
        [batch(("hang", {"name": "a"}, "a"), ("hang", {"name": "b"}, "b")), text("never")]
    )
    handle = Runner.stream(Agent("c", model=provider, tools=[hang]), "go")
    events: list[Event] = []
    async for event in handle:
        events.append(event)
        if isinstance(event, ToolCallStarted) and event.call.id == "b":
            await started["a"].wait()
            await started["b"].wait()
            handle.cancel("stop")
    assert sorted(cancelled) == ["a", "b"]
    assert _results(transcript[0]) == []
    assert isinstance(events[-1], RunFailed) and isinstance(events[-1].error, RunCancelled)


async def test_tool_cancelling_the_token_stops_the_run_after_its_result() -> None:
    cancelled: list[str] = []
    other_started = asyncio.Event()
    transcript: list[list[TranscriptEntry]] = []

    @tool
    async def other(ctx: RunContext[Any]) -> str:
        """Runs until cancelled."""
        transcript.append(ctx.entries)
        other_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("other")
            raise
        return "other"

    @tool
    async def stopper(ctx: RunContext[Any]) -> str:
        """Cancels the run."""
        await other_started.wait()
        ctx.cancel_token.cancel("from tool")
        return "stopped"

    provider = ScriptedProvider([batch(("other", {}, "o"), ("stopper", {}, "s")), text("never")])
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(
            Runner.run(Agent("c", model=provider, tools=[other, stopper]), "go"), 5
        )
    assert cancelled == ["other"]
    assert _results(transcript[0]) == ["s"]


async def test_tool_raising_run_cancelled_ends_the_run() -> None:
    @tool
    async def quit_now() -> str:
        """Quit."""
        raise RunCancelled(reason="tool quit")

    provider = ScriptedProvider([call("quit_now", {}), text("never")])
    with pytest.raises(RunCancelled):
        await Runner.run(Agent("q", model=provider, tools=[quit_now]), "go")


async def test_cancelled_token_stops_the_run_before_the_first_turn() -> None:
    token = CancelToken()
    token.cancel("early")
    provider = ScriptedProvider([text("never")])
    with pytest.raises(RunCancelled):
        await Runner.run(Agent("e", model=provider), "go", cancel_token=token)
    assert len(provider.calls) == 0


async def test_cancel_between_turns_is_checked() -> None:
    token = CancelToken()

    @tool
    async def cancel_it() -> str:
        """Cancel."""
        token.cancel("between turns")
        return "done"

    provider = ScriptedProvider([call("cancel_it", {}), text("never")])
    with pytest.raises(RunCancelled):
        await Runner.run(Agent("e", model=provider, tools=[cancel_it]), "go", cancel_token=token)
    assert len(provider.calls) == 1


async def _collect(handle: Any) -> list[Event]:
    return [e async for e in handle]


async def test_a_second_cancel_is_a_no_op_and_keeps_the_first_reason() -> None:
    running = asyncio.Event()

    @tool
    async def hang() -> str:
        """Runs until cancelled."""
        running.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider([call("hang", {}), text("x")])
    handle = Runner.stream(Agent("c", model=provider, tools=[hang]), "go")
    events: list[Event] = []
    async for event in handle:
        events.append(event)
        if isinstance(event, ToolCallStarted):
            await running.wait()
            handle.cancel("first")
            handle.cancel("second")
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert len(failed) == 1 and events[-1] is failed[0]
    assert isinstance(failed[0].error, RunCancelled) and failed[0].error.reason == "first"
    assert not any(isinstance(e, ToolCallCompleted) for e in events)


async def test_a_result_kept_before_a_cancel_still_reaches_the_stream() -> None:
    other_started = asyncio.Event()

    @tool
    async def other() -> str:
        """Runs until cancelled."""
        other_started.set()
        await asyncio.Event().wait()
        return "other"

    @tool
    async def stopper(ctx: RunContext[Any]) -> str:
        """Cancels the run, then returns its result."""
        await other_started.wait()
        ctx.cancel_token.cancel("from tool")
        return "stopped"

    provider = ScriptedProvider([batch(("other", {}, "o"), ("stopper", {}, "s")), text("never")])
    handle = Runner.stream(Agent("c", model=provider, tools=[other, stopper]), "go")
    events = [event async for event in handle]
    completed = [e.call.id for e in events if isinstance(e, ToolCallCompleted)]
    assert completed == ["s"]
    assert isinstance(events[-1], RunFailed) and isinstance(events[-1].error, RunCancelled)


async def test_a_cancel_by_the_last_call_of_a_batch_ends_the_run_without_turn_ended() -> None:
    @tool
    async def stopper(ctx: RunContext[Any]) -> str:
        """Cancels the run."""
        ctx.cancel_token.cancel("from tool")
        return "stopped"

    provider = ScriptedProvider([batch(("stopper", {}, "s")), text("never")])
    handle = Runner.stream(Agent("c", model=provider, tools=[stopper]), "go")
    events = [event async for event in handle]
    assert [type(e).__name__ for e in events[-3:]] == [
        "ToolCallStarted",
        "ToolCallCompleted",
        "RunFailed",
    ]


async def test_a_time_budget_spent_by_tools_stops_the_run_before_the_next_model_call() -> None:
    now = [0.0]

    @tool
    async def slow() -> str:
        """Takes (fake) time."""
        now[0] += 10.0
        return "done"

    provider = ScriptedProvider([call("slow", {}), text("never")])
    budget = RunBudget(max_seconds=5.0, clock=lambda: now[0])
    with pytest.raises(BudgetExceeded) as info:
        await Runner.run(Agent("t", model=provider, tools=[slow]), "go", budget=budget)
    assert info.value.limit == "max_seconds"
    assert len(provider.calls) == 1  # checked between turns, not after a wasted call


async def test_a_budget_trip_inside_a_barrier_dispatches_nothing_after_it() -> None:
    ran: list[str] = []

    @tool(parallel=False)
    async def spend() -> str:
        """Trips the run's budget (a barrier: it runs alone)."""
        raise BudgetExceeded("tool spent it all", limit="custom")

    @tool
    async def later() -> str:
        """Must not be dispatched after the trip."""
        ran.append("later")
        return "later"

    provider = ScriptedProvider([batch(("spend", {}, "s"), ("later", {}, "l")), text("never")])
    with pytest.raises(BudgetExceeded, match="tool spent it all"):
        await Runner.run(Agent("b", model=provider, tools=[spend, later]), "go")
    assert ran == []
