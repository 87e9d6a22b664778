"""Parallel tool execution: serial preflight, concurrent execution, pairing by call id.

Catalogue section 12, items 2 and 3. Tools synchronise on asyncio.Events so completion
order is chosen by the test, never by timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.events import Event, ToolCallCompleted, ToolCallFailed, ToolCallStarted, ToolEvent
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolCallEntry, ToolResultEntry


def _tool_trace(events: list[Event]) -> list[tuple[str, str]]:
    out = []
    for e in events:
        if isinstance(e, (ToolCallStarted, ToolCallCompleted)):
            out.append((type(e).__name__, e.call.id))
    return out


async def _stream(agent: Agent[Any], prompt: str = "go") -> list[Event]:
    return [e async for e in Runner.stream(agent, prompt)]


async def test_calls_overlap_and_results_append_in_completion_order() -> None:
    first_may_finish = asyncio.Event()

    @tool
    async def first() -> str:
        """Waits for second."""
        await first_may_finish.wait()
        return "first"

    @tool
    async def second() -> str:
        """Releases first."""
        first_may_finish.set()
        return "second"

    provider = ScriptedProvider([batch(("first", {}, "c1"), ("second", {}, "c2")), text("done")])
    agent = Agent("p", model=provider, tools=[first, second])
    result = await asyncio.wait_for(Runner.run(agent, "go"), 5)
    assert result.entries[1:5] == [
        ToolCallEntry("c1", "first", "{}"),
        ToolCallEntry("c2", "second", "{}"),
        ToolResultEntry("c2", "second", raw="second"),
        ToolResultEntry("c1", "first", raw="first"),
    ]


async def test_completions_are_emitted_in_completion_order() -> None:
    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        await gate.wait()
        return "slow"

    @tool
    async def fast() -> str:
        """Fast."""
        gate.set()
        return "fast"

    provider = ScriptedProvider([batch(("slow", {}, "s"), ("fast", {}, "f")), text("ok")])
    events = await asyncio.wait_for(_stream(Agent("p", model=provider, tools=[slow, fast])), 5)
    completed = [e.call.id for e in events if isinstance(e, ToolCallCompleted)]
    assert completed == ["f", "s"]


async def test_duplicate_call_ids_are_rewritten_unique_and_pair_by_id() -> None:
    @tool
    async def say(word: str) -> str:
        """Say."""
        return word

    provider = ScriptedProvider(
        [batch(("say", {"word": "a"}, "dup"), ("say", {"word": "b"}, "dup")), text("ok")]
    )
    result = await Runner.run(Agent("d", model=provider, tools=[say]), "go")
    results = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert sorted(r.output for r in results) == ["a", "b"]
    assert sorted(r.call_id for r in results) == ["dup", "dup_1"]  # issue 20.2


async def test_all_barrier_turn_reproduces_the_serial_event_stream() -> None:
    order: list[str] = []

    @tool(parallel=False)
    async def step(name: str) -> str:
        """Step."""
        order.append(f"start {name}")
        await asyncio.sleep(0)
        order.append(f"end {name}")
        return name

    provider = ScriptedProvider(
        [batch(("step", {"name": "a"}, "a"), ("step", {"name": "b"}, "b")), text("ok")]
    )
    events = await _stream(Agent("b", model=provider, tools=[step]))
    assert _tool_trace(events) == [
        ("ToolCallStarted", "a"),
        ("ToolCallCompleted", "a"),
        ("ToolCallStarted", "b"),
        ("ToolCallCompleted", "b"),
    ]
    assert order == ["start a", "end a", "start b", "end b"]


async def test_barrier_waits_for_in_flight_calls_then_runs_alone() -> None:
    log: list[str] = []
    release = asyncio.Event()

    @tool
    async def background() -> str:
        """Runs in parallel."""
        log.append("background start")
        await release.wait()
        log.append("background end")
        return "bg"

    @tool(parallel=False)
    async def barrier() -> str:
        """Runs alone."""
        log.append("barrier")
        return "barrier"

    @tool
    async def after() -> str:
        """Dispatched after the barrier."""
        log.append("after")
        return "after"

    async def go() -> list[Event]:
        events = []
        async for event in Runner.stream(Agent("b", model=provider, tools=tools), "go"):
            events.append(event)
            if isinstance(event, ToolCallStarted) and event.call.id == "bg":
                release.set()
        return events

    tools = [background, barrier, after]
    provider = ScriptedProvider(
        [batch(("background", {}, "bg"), ("barrier", {}, "bar"), ("after", {}, "af")), text("ok")]
    )
    await asyncio.wait_for(go(), 5)
    assert log == ["background start", "background end", "barrier", "after"]


async def test_unknown_tool_gets_an_error_result_and_no_started_event() -> None:
    provider = ScriptedProvider([call("missing", {}, call_id="m"), text("ok")])
    events = await _stream(Agent("u", model=provider))
    tool_events = [e for e in events if isinstance(e, ToolEvent)]
    assert len(tool_events) == 1
    completed = tool_events[0]
    assert isinstance(completed, ToolCallCompleted)
    assert completed.is_error
    assert "unknown tool 'missing'" in completed.output


async def test_bad_json_arguments_are_rejected_and_the_stored_call_is_rewritten() -> None:
    ran: list[int] = []

    @tool
    async def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    provider = ScriptedProvider([call("count", '{"n": 1', call_id="bad"), text("ok")])
    result = await Runner.run(Agent("j", model=provider, tools=[count]), "go")
    assert ran == []
    assert result.entries[1] == ToolCallEntry("bad", "count", "{}")
    rejected = result.entries[2]
    assert isinstance(rejected, ToolResultEntry) and rejected.is_error
    assert "not valid JSON" in rejected.output


async def test_truncated_reply_reports_a_cut_off_call() -> None:
    from lovia.messages import AssistantTurn, ToolCall

    cut = AssistantTurn(tool_calls=(ToolCall("t", "count", '{"n": 1'),), finish_reason="length")

    @tool
    async def count(n: int) -> int:
        """Count."""
        return n

    provider = ScriptedProvider([cut, text("ok")])
    result = await Runner.run(Agent("j", model=provider, tools=[count]), "go")
    rejected = result.entries[2]
    assert isinstance(rejected, ToolResultEntry)
    assert "cut off" in rejected.output


async def test_invalid_arguments_never_reach_the_tool() -> None:
    ran: list[int] = []

    @tool
    async def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    provider = ScriptedProvider([call("count", {"n": "not a number"}), text("ok")])
    result = await Runner.run(Agent("j", model=provider, tools=[count]), "go")
    assert ran == []
    assert isinstance(result.entries[2], ToolResultEntry) and result.entries[2].is_error


async def test_two_parallel_failures_each_become_error_results() -> None:
    @tool
    async def broken(tag: str) -> str:
        """Broken."""
        raise ValueError(f"boom {tag}")

    provider = ScriptedProvider(
        [batch(("broken", {"tag": "a"}, "a"), ("broken", {"tag": "b"}, "b")), text("ok")]
    )
    events = await _stream(Agent("f", model=provider, tools=[broken]))
    completed = {e.call.id: e for e in events if isinstance(e, ToolCallCompleted)}
    assert set(completed) == {"a", "b"}
    assert all(e.is_error for e in completed.values())
    assert "boom a" in completed["a"].output
    failed = [e.call.id for e in events if isinstance(e, ToolCallFailed)]
    assert sorted(failed) == ["a", "b"]


async def test_sync_tools_run_in_parallel_on_worker_threads() -> None:
    import threading

    both_running = threading.Barrier(2, timeout=5)

    @tool
    def left() -> str:
        """Left."""
        both_running.wait()
        return "left"

    @tool
    def right() -> str:
        """Right."""
        both_running.wait()
        return "right"

    provider = ScriptedProvider([batch(("left", {}), ("right", {})), text("ok")])
    result = await Runner.run(Agent("t", model=provider, tools=[left, right]), "go")
    assert result.output == "ok"
    outputs = sorted(e.output for e in result.entries if isinstance(e, ToolResultEntry))
    assert outputs == ["left", "right"]


async def test_tool_context_sees_the_call_entries_of_its_turn() -> None:
    seen: list[int] = []

    @tool
    async def peek(ctx: RunContext[Any]) -> str:
        """Peek."""
        seen.append(sum(isinstance(e, ToolCallEntry) for e in ctx.entries))
        return "ok"

    provider = ScriptedProvider([batch(("peek", {}), ("peek", {})), text("ok")])
    await Runner.run(Agent("c", model=provider, tools=[peek]), "go")
    assert seen == [2, 2]


@pytest.mark.parametrize("where", ["first step", "after a suspension", "beside another call"])
async def test_a_cancelled_error_raised_by_a_tool_propagates_instead_of_hanging(where: str) -> None:
    # docs/tools.md: task cancellation (asyncio.CancelledError) propagates. A tool can raise
    # it without its task being cancelled (awaiting a future someone else cancelled).
    @tool
    async def doomed() -> str:
        """Awaits a future that was cancelled elsewhere."""
        if where != "first step":
            await asyncio.sleep(0)
        gone = asyncio.get_running_loop().create_future()
        gone.cancel()
        await gone
        return "unreachable"

    @tool
    async def other() -> str:
        """Runs beside it."""
        await asyncio.sleep(0.01)
        return "ok"

    first = (
        batch(("doomed", {}, "d"), ("other", {}, "o"))
        if where == "beside another call"
        else call("doomed", {})
    )
    provider = ScriptedProvider([first, text("done")])
    agent = Agent("t", model=provider, tools=[doomed, other])
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(Runner.run(agent, "go"), 5)
