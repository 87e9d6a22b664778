"""The stream contract of RunHandle (catalogue section 12, item 1)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lovia import Agent, Runner, tool
from lovia.events import (
    MessageCompleted,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
)
from lovia.exceptions import ProviderError
from lovia.providers.base import FinishDelta
from lovia.testing import ScriptedProvider, call, text


@tool
async def echo(value: str) -> str:
    """Echo."""
    return value


def _agent(provider: ScriptedProvider) -> Agent[Any]:
    return Agent("s", model=provider, tools=[echo], retry=None)


async def test_event_sequence_of_a_tool_turn_then_a_text_turn() -> None:
    provider = ScriptedProvider([call("echo", {"value": "v"}), text("ok")])
    kinds = [type(e) async for e in Runner.stream(_agent(provider), "go")]
    assert kinds == [
        RunStarted,
        TurnStarted,
        MessageCompleted,
        ToolCallStarted,
        ToolCallCompleted,
        TurnEnded,
        TurnStarted,
        TextDelta,
        TextDelta,
        MessageCompleted,
        TurnEnded,
        RunCompleted,
    ]


class _KnownDeltas:
    """A provider whose delta objects the test holds, to check identity (ScriptedProvider
    builds its own)."""

    name = "known"
    model = "known-model"
    supports_json_schema = False

    def __init__(self) -> None:
        self.sent = [TextDelta("a"), TextDelta("b"), TextDelta("c")]

    async def stream(self, entries: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for delta in self.sent:
            yield delta
        yield FinishDelta("stop")


async def test_text_deltas_are_the_providers_own_objects() -> None:
    provider = _KnownDeltas()
    agent = Agent("s", model=provider)
    got = [e async for e in Runner.stream(agent, "go") if isinstance(e, TextDelta)]
    assert len(got) == 3
    assert all(a is b for a, b in zip(got, provider.sent, strict=True))


async def test_second_iteration_raises_runtime_error() -> None:
    handle = Runner.stream(_agent(ScriptedProvider([text("x")])), "go")
    async for _ in handle:
        pass
    with pytest.raises(RuntimeError, match="only once"):
        async for _ in handle:
            pass


async def test_failure_ends_the_stream_with_run_failed_without_raising() -> None:
    boom = ProviderError("down", retryable=False)
    handle = Runner.stream(_agent(ScriptedProvider([boom])), "go")
    events = [e async for e in handle]
    assert isinstance(events[-1], RunFailed)
    assert events[-1].error is boom
    assert sum(isinstance(e, (RunCompleted, RunFailed)) for e in events) == 1
    with pytest.raises(ProviderError):
        await handle.result()


async def test_result_drives_an_unconsumed_stream() -> None:
    handle = Runner.stream(_agent(ScriptedProvider([text("driven")])), "go")
    assert (await handle.result()).output == "driven"


async def test_awaiting_the_handle_returns_the_result() -> None:
    handle = Runner.stream(_agent(ScriptedProvider([text("awaited")])), "go")
    assert (await handle).output == "awaited"


async def test_result_after_full_iteration_returns_the_same_result() -> None:
    handle = Runner.stream(_agent(ScriptedProvider([text("x")])), "go")
    events = [e async for e in handle]
    completed = events[-1]
    assert isinstance(completed, RunCompleted)
    assert await handle.result() is completed.result


async def test_breaking_out_early_makes_result_raise() -> None:
    handle = Runner.stream(_agent(ScriptedProvider([text("abcdef")])), "go")
    async for event in handle:
        if isinstance(event, TextDelta):
            break
    with pytest.raises(RuntimeError, match="abandoned"):
        await handle.result()


async def test_breaking_out_early_tears_down_in_flight_tools() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    provider = ScriptedProvider([call("hang", {}), text("x")])
    handle = Runner.stream(Agent("h", model=provider, tools=[hang]), "go")
    async for event in handle:
        if isinstance(event, ToolCallStarted):
            break
    with pytest.raises(RuntimeError):
        await handle.result()
    assert cancelled.is_set()


async def test_task_cancellation_propagates_out_of_iteration() -> None:
    entered = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        entered.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider([call("hang", {}), text("x")])
    handle = Runner.stream(Agent("h", model=provider, tools=[hang]), "go")

    async def consume() -> list[Any]:
        return [e async for e in handle]

    task = asyncio.ensure_future(consume())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_handle_cancel_ends_the_stream_with_run_failed() -> None:
    from lovia.exceptions import RunCancelled

    entered = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        entered.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider([call("hang", {}), text("x")])
    handle = Runner.stream(Agent("h", model=provider, tools=[hang]), "go")
    events = []
    async for event in handle:
        events.append(event)
        if isinstance(event, ToolCallStarted):
            await entered.wait()
            handle.cancel("user stop")
            handle.cancel("second")  # idempotent
    assert isinstance(events[-1], RunFailed)
    assert isinstance(events[-1].error, RunCancelled)
    assert events[-1].error.reason == "user stop"


async def test_a_base_exception_in_a_tool_is_not_turned_into_run_failed() -> None:
    class Stop(BaseException):
        pass

    @tool
    async def explode() -> str:
        """Explode."""
        raise Stop

    provider = ScriptedProvider([call("explode", {}), text("x")])
    with pytest.raises(Stop):
        async for _ in Runner.stream(Agent("b", model=provider, tools=[explode]), "go"):
            pass


async def test_stopping_at_the_terminal_event_still_yields_the_result() -> None:
    handle = Runner.stream(_agent(ScriptedProvider([text("done")])), "go")
    async for event in handle:
        if isinstance(event, RunCompleted):
            break
    assert (await handle.result()).output == "done"


async def test_anext_without_async_for_starts_the_stream() -> None:
    handle = Runner.stream(_agent(ScriptedProvider([text("x")])), "go")
    first = await anext(handle)
    assert isinstance(first, RunStarted)
    with pytest.raises(RuntimeError, match="abandoned"):  # and closes the run
        await handle.result()
