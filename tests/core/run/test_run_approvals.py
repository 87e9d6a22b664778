"""Approvals: consumer, then approval_handler, then deny; fail closed; never hang.

Catalogue section 12, item 4.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.cancellation import CancelToken
from lovia.events import ApprovalRequired, Event, ToolCallCompleted, ToolCallFailed, ToolCallStarted
from lovia.exceptions import RunCancelled
from lovia.hooks import AgentHooks
from lovia.messages import ToolCall
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolResultEntry

ran: list[str] = []


@tool(needs_approval=True)
async def delete(path: str) -> str:
    """Delete a file."""
    ran.append(path)
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


def _agent(provider: ScriptedProvider, **kw: Any) -> Agent[Any]:
    return Agent("a", model=provider, tools=[delete], **kw)


def _script() -> ScriptedProvider:
    return ScriptedProvider([call("delete", {"path": "x"}, call_id="d1"), text("ok")])


def _result_of(events: list[Event], call_id: str) -> ToolCallCompleted:
    return next(e for e in events if isinstance(e, ToolCallCompleted) and e.call.id == call_id)


async def test_non_streaming_run_without_handler_denies_the_call() -> None:
    result = await Runner.run(_agent(_script()), "go")
    assert ran == []
    denied = result.entries[2]
    assert isinstance(denied, ToolResultEntry) and denied.is_error
    assert "denied" in denied.output


async def test_stream_consumer_that_ignores_the_event_gets_a_denial_not_a_hang() -> None:
    handle = Runner.stream(_agent(_script()), "go")
    events = await asyncio.wait_for(_collect(handle), 5)
    assert ran == []
    assert _result_of(events, "d1").is_error


async def test_stream_consumer_approves_on_the_event() -> None:
    events = []
    async for event in Runner.stream(_agent(_script()), "go"):
        events.append(event)
        if isinstance(event, ApprovalRequired):
            event.approve()
    assert ran == ["x"]
    assert not _result_of(events, "d1").is_error


async def test_stream_consumer_rejects_with_a_reason_the_model_sees() -> None:
    events = []
    async for event in Runner.stream(_agent(_script()), "go"):
        events.append(event)
        if isinstance(event, ApprovalRequired):
            event.reject("too risky")
    assert ran == []
    assert "too risky" in _result_of(events, "d1").output


async def test_rejected_call_emits_no_tool_call_started() -> None:
    events = [e async for e in Runner.stream(_agent(_script()), "go")]
    assert not any(isinstance(e, ToolCallStarted) for e in events)


async def test_out_of_band_channel_approves_by_call_id() -> None:
    handle = Runner.stream(_agent(_script()), "go")
    async for event in handle:
        if isinstance(event, ApprovalRequired):
            assert handle.approvals.is_pending("d1")
            assert handle.approvals.approve("d1")
    assert ran == ["x"]


@pytest.mark.parametrize("verdict", [True, "allow"])
async def test_approval_handler_allows(verdict: Any) -> None:
    result = await Runner.run(_agent(_script(), approval_handler=lambda c, ctx: verdict), "go")
    assert ran == ["x"]
    assert not result.entries[2].is_error  # type: ignore[union-attr]


@pytest.mark.parametrize("verdict", [False, "deny", "ask"])
async def test_approval_handler_denies_or_defers_to_an_absent_consumer(verdict: Any) -> None:
    await Runner.run(_agent(_script(), approval_handler=lambda c, ctx: verdict), "go")
    assert ran == []


async def test_async_approval_handler_sees_the_call() -> None:
    seen: list[ToolCall] = []

    async def handler(call: ToolCall, ctx: RunContext[Any]) -> bool:
        seen.append(call)
        return True

    await Runner.run(_agent(_script(), approval_handler=handler), "go")
    assert seen == [ToolCall("d1", "delete", '{"path": "x"}')]


async def test_consumer_decision_wins_over_the_handler() -> None:
    agent = _agent(_script(), approval_handler=lambda c, ctx: False)
    async for event in Runner.stream(agent, "go"):
        if isinstance(event, ApprovalRequired):
            event.approve()
    assert ran == ["x"]


async def test_ask_defers_to_the_stream_consumer() -> None:
    agent = _agent(_script(), approval_handler=lambda c, ctx: "ask")
    async for event in Runner.stream(agent, "go"):
        if isinstance(event, ApprovalRequired):
            event.approve()
    assert ran == ["x"]


async def test_raising_handler_denies_and_emits_tool_call_failed() -> None:
    def handler(call: ToolCall, ctx: RunContext[Any]) -> bool:
        raise RuntimeError("handler broke")

    events = [e async for e in Runner.stream(_agent(_script(), approval_handler=handler), "go")]
    assert ran == []
    assert any(isinstance(e, ToolCallFailed) for e in events)
    assert _result_of(events, "d1").is_error


async def test_predicate_decides_per_call() -> None:
    @tool(needs_approval=lambda args, ctx: args["path"].startswith("/"))
    async def remove(path: str) -> str:
        """Remove."""
        ran.append(path)
        return "ok"

    provider = ScriptedProvider(
        [batch(("remove", {"path": "rel"}, "r1"), ("remove", {"path": "/abs"}, "r2")), text("ok")]
    )
    await Runner.run(Agent("p", model=provider, tools=[remove]), "go")
    assert ran == ["rel"]


async def test_raising_predicate_denies_records_a_result_and_emits_failure() -> None:
    def predicate(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
        raise KeyError("nope")

    @tool(needs_approval=predicate)
    async def guarded() -> str:
        """Guarded."""
        ran.append("guarded")
        return "ok"

    provider = ScriptedProvider([call("guarded", {}, call_id="g"), text("ok")])
    handle = Runner.stream(Agent("p", model=provider, tools=[guarded]), "go")
    events = [e async for e in handle]
    result = await handle.result()
    assert ran == []
    assert any(isinstance(e, ToolCallFailed) for e in events)
    assert any(isinstance(e, ToolResultEntry) and e.call_id == "g" for e in result.entries)


async def test_hook_can_approve_in_a_non_streaming_run() -> None:
    hooks = AgentHooks()

    @hooks.on(ApprovalRequired)
    def approve(event: ApprovalRequired, ctx: RunContext[Any]) -> None:
        event.approve()

    await Runner.run(_agent(_script(), hooks=hooks), "go")
    assert ran == ["x"]


async def test_other_calls_keep_running_while_the_consumer_holds_the_event() -> None:
    slow_running = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        slow_running.set()
        return "slow"

    provider = ScriptedProvider(
        [batch(("slow", {}, "s"), ("delete", {"path": "y"}, "d")), text("ok")]
    )
    handle = Runner.stream(Agent("h", model=provider, tools=[slow, delete]), "go")

    async def consume() -> None:
        async for event in handle:
            if isinstance(event, ApprovalRequired):
                await slow_running.wait()  # the other call runs while we hold the event
                event.approve()

    await asyncio.wait_for(consume(), 5)
    assert ran == ["y"]


async def test_late_out_of_band_decision_while_another_call_runs() -> None:
    approve_now = asyncio.Event()
    handle_box: list[Any] = []

    @tool
    async def reviewer() -> str:
        """Approves the gated call out of band, then finishes."""
        await approve_now.wait()
        handle_box[0].approvals.approve("d")
        return "reviewed"

    provider = ScriptedProvider(
        [batch(("reviewer", {}, "r"), ("delete", {"path": "z"}, "d")), text("ok")]
    )
    handle = Runner.stream(Agent("h", model=provider, tools=[reviewer, delete]), "go")
    handle_box.append(handle)

    async def consume() -> list[Event]:
        events = []
        async for event in handle:
            events.append(event)
            if isinstance(event, ApprovalRequired):
                approve_now.set()  # move on without deciding; the tool decides later
        return events

    events = await asyncio.wait_for(consume(), 5)
    assert ran == ["z"]
    assert not _result_of(events, "d").is_error


async def _collect(handle: Any) -> list[Event]:
    return [e async for e in handle]


async def test_undecided_call_is_denied_once_nothing_else_runs() -> None:
    finish_slow = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        await finish_slow.wait()
        return "slow"

    provider = ScriptedProvider(
        [batch(("slow", {}, "s"), ("delete", {"path": "w"}, "d")), text("ok")]
    )
    handle = Runner.stream(Agent("h", model=provider, tools=[slow, delete]), "go")

    async def consume() -> list[Event]:
        events = []
        async for event in handle:
            events.append(event)
            if isinstance(event, ApprovalRequired):
                finish_slow.set()  # ignore the request; the other call can now finish
        return events

    events = await asyncio.wait_for(consume(), 5)
    assert ran == []
    assert _result_of(events, "d").is_error
    assert not _result_of(events, "s").is_error
    order = [e.call.id for e in events if isinstance(e, ToolCallCompleted)]
    assert order == ["s", "d"]  # denied only when the turn needed the answer


async def test_release_denies_everything_pending() -> None:
    handle = Runner.stream(_agent(_script()), "go")
    async for event in handle:
        if isinstance(event, ApprovalRequired):
            assert handle.approvals.release() == 1
    assert ran == []
    result = await handle.result()
    assert "denied" in result.entries[2].output  # type: ignore[union-attr]


async def test_a_cancel_while_a_decision_is_pending_leaves_nothing_on_the_channel() -> None:
    running = asyncio.Event()

    @tool
    async def hang() -> str:
        """Runs until the run is cancelled."""
        running.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider(
        [batch(("hang", {}, "h"), ("delete", {"path": "x"}, "d")), text("")]
    )
    handle = Runner.stream(Agent("h", model=provider, tools=[hang, delete]), "go")
    pending_at_event: list[bool] = []
    async for event in handle:
        if isinstance(event, ApprovalRequired):
            await running.wait()
            pending_at_event.append(handle.approvals.is_pending("d"))
            handle.cancel("stop")  # undecided, while the other call still runs
    with pytest.raises(RunCancelled):
        await handle.result()
    assert pending_at_event == [True]
    assert handle.approvals.pending() == []
    assert handle.approvals.approve("d") is False  # a late answer is not taken as accepted
    assert ran == []


async def test_a_cancel_interrupts_an_approval_handler_that_is_still_waiting() -> None:
    asked = asyncio.Event()
    token = CancelToken()

    async def handler(call: ToolCall, ctx: RunContext[Any]) -> bool:
        asked.set()
        await asyncio.Event().wait()  # a human who never answers
        return True

    async def cancel_once_asked() -> None:
        await asked.wait()
        token.cancel("user left")

    canceller = asyncio.create_task(cancel_once_asked())
    run = Runner.run(_agent(_script(), approval_handler=handler), "go", cancel_token=token)
    with pytest.raises(RunCancelled, match="user left"):
        await asyncio.wait_for(run, 5)
    await canceller
    assert ran == []
