"""Run-loop defects found by probing under realistic faults (issue 20), through the public API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from lovia import Agent, BudgetExceeded, RunCancelled, Runner, Usage, UserError, tool
from lovia.budget import RunBudget
from lovia.checkpointer import CheckpointOptions
from lovia.context_policy import CompactionRequest
from lovia.events import Event, RunCompleted, ToolCallCompleted
from lovia.messages import AssistantTurn
from lovia.providers.base import ModelDelta, TextDelta
from lovia.stores import InMemoryCheckpointer
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry

# -- 20.2: duplicate and blank call ids ----------------------------------------------------


def _call_ids(entries: Sequence[TranscriptEntry]) -> tuple[list[str], list[str]]:
    calls = [e.call_id for e in entries if isinstance(e, ToolCallEntry)]
    results = [e.call_id for e in entries if isinstance(e, ToolResultEntry)]
    return calls, results


async def test_duplicate_call_ids_are_made_unique_and_each_result_pairs_with_its_call() -> None:
    b_done = asyncio.Event()

    @tool
    async def say(word: str) -> str:
        """Say a word."""
        if word == "a":
            await b_done.wait()  # "a" completes second: completion order != request order
        else:
            b_done.set()
        return word

    provider = ScriptedProvider(
        [batch(("say", {"word": "a"}, "dup"), ("say", {"word": "b"}, "dup")), text("ok")]
    )
    result = await asyncio.wait_for(Runner.run(Agent("d", model=provider, tools=[say]), "go"), 5)
    calls, results = _call_ids(result.entries)
    assert len(set(calls)) == 2 and calls[0] == "dup"
    by_id = {e.call_id: e for e in result.entries if isinstance(e, ToolResultEntry)}
    words = {e.call_id: e.arguments for e in result.entries if isinstance(e, ToolCallEntry)}
    for call_id, entry in by_id.items():
        assert f'"{entry.output}"' in words[call_id]  # each call is shown its own result
    # The provider replays the rewritten ids: call and result agree on the wire.
    replayed = provider.calls[1]
    sent = [c.id for m in replayed for c in m.tool_calls]
    answered = [m.tool_call_id or "" for m in replayed if m.role == "tool"]
    assert sorted(sent) == sorted(answered) == sorted(calls)


async def test_blank_and_repeated_ids_across_turns_are_unique_within_the_run() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    provider = ScriptedProvider(
        [
            batch(("ping", {}, ""), ("ping", {}, "")),
            call("ping", {}, call_id="call_0"),
            call("ping", {}, call_id="call_0"),
            text("done"),
        ]
    )
    result = await Runner.run(Agent("b", model=provider, tools=[ping]), "go")
    calls, results = _call_ids(result.entries)
    assert len(calls) == 4 and len(set(calls)) == 4 and all(calls)
    assert sorted(results) == sorted(calls)


async def test_a_cancelled_batch_with_duplicate_ids_resumes_exactly_the_unfinished_call() -> None:
    charged: list[str] = []
    alice_started = asyncio.Event()

    @tool
    async def charge(who: str) -> str:
        """Charge someone."""
        if who == "alice":
            alice_started.set()
            await asyncio.Event().wait()  # never finishes in the first run: cancelled
        charged.append(who)
        return f"charged {who}"

    store = InMemoryCheckpointer()
    first = ScriptedProvider(
        [batch(("charge", {"who": "alice"}, "dup"), ("charge", {"who": "bob"}, "dup"))]
    )
    handle = Runner.stream(
        Agent("pay", model=first, tools=[charge]),
        "charge both",
        checkpoint=CheckpointOptions(store, "pay-1"),
    )
    async for event in handle:
        if isinstance(event, ToolCallCompleted):
            await asyncio.wait_for(alice_started.wait(), 5)
            handle.cancel("stop")
    with pytest.raises(RunCancelled):
        await handle.result()
    assert charged == ["bob"]

    # Resumed in a fresh process: only alice's call has no result.
    charged.clear()
    alice_started.set()

    @tool(name="charge")
    async def charge_again(who: str) -> str:
        """Charge someone."""
        charged.append(who)
        return f"charged {who}"

    second = ScriptedProvider([text("both charged")])
    result = await asyncio.wait_for(
        Runner.run(
            Agent("pay", model=second, tools=[charge_again]),
            [],
            checkpoint=CheckpointOptions(store, "pay-1", if_run_exists="resume_only"),
        ),
        5,
    )
    assert charged == ["alice"]
    assert result.output == "both charged"
    calls, results = _call_ids(result.entries)
    assert sorted(results) == sorted(calls) and len(set(calls)) == 2


# -- 20.4: a token budget trip resumes with a fresh budget ---------------------------------


async def test_a_token_budget_trip_resumes_with_a_fresh_allowance() -> None:
    @tool
    def step() -> str:
        """One step."""
        return "ok"

    store = InMemoryCheckpointer()
    spend = Usage(input_tokens=600, output_tokens=100)
    first = ScriptedProvider([call("step", {}, usage=spend), call("step", {}, usage=spend)])
    budget = RunBudget(max_total_tokens=1000)
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            Agent("w", model=first, tools=[step]),
            "go",
            budget=budget,
            checkpoint=CheckpointOptions(store, "job"),
        )
    snapshot = await store.load("job")
    assert snapshot is not None and snapshot.head.status == "interrupted"

    # A fresh budget allows 1000 new tokens: one more 700-token reply fits.
    second = ScriptedProvider([text("done", usage=spend)])
    result = await Runner.run(
        Agent("w", model=second, tools=[step]),
        [],
        budget=budget.fresh(),
        checkpoint=CheckpointOptions(store, "job", if_run_exists="resume_only"),
    )
    assert result.output == "done"
    assert result.usage.total_tokens == 2100  # the run's usage still counts everything

    # ... and the fresh allowance is enforced, not ignored.
    store2 = InMemoryCheckpointer()
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            Agent("w", model=ScriptedProvider([call("step", {}, usage=spend)] * 2), tools=[step]),
            "go",
            budget=RunBudget(max_total_tokens=1000),
            checkpoint=CheckpointOptions(store2, "job"),
        )
    third = ScriptedProvider([call("step", {}, usage=spend), call("step", {}, usage=spend)])
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            Agent("w", model=third, tools=[step]),
            [],
            budget=budget.fresh(),
            checkpoint=CheckpointOptions(store2, "job", if_run_exists="resume_only"),
        )
    assert len(third.calls) == 2  # 700 fits the fresh budget, 1400 does not


# -- 20.6: result() while another task iterates --------------------------------------------


async def test_result_can_be_awaited_while_another_task_forwards_the_events() -> None:
    gate = asyncio.Event()

    @tool
    async def wait_gate() -> str:
        """Waits."""
        await gate.wait()
        return "open"

    provider = ScriptedProvider([call("wait_gate", {}), text("finished")])
    handle = Runner.stream(Agent("w", model=provider, tools=[wait_gate]), "go")
    forwarded: list[Event] = []
    first_event = asyncio.Event()

    async def forward() -> None:
        async for event in handle:
            forwarded.append(event)
            first_event.set()

    forwarder = asyncio.create_task(forward())
    await asyncio.wait_for(first_event.wait(), 5)
    waiter = asyncio.create_task(handle.result())
    await asyncio.sleep(0)  # let the waiter start waiting before the run can finish
    gate.set()
    result = await asyncio.wait_for(waiter, 5)
    await asyncio.wait_for(forwarder, 5)
    assert result.output == "finished"
    assert isinstance(forwarded[-1], RunCompleted) and forwarded[-1].result is result


async def test_result_awaited_by_two_tasks_returns_the_same_result() -> None:
    provider = ScriptedProvider([text("once")])
    handle = Runner.stream(Agent("w", model=provider), "go")
    first, second = await asyncio.wait_for(asyncio.gather(handle.result(), handle.result()), 5)
    assert first is second and first.output == "once"
    assert len(provider.calls) == 1


# -- 20.9: a stream without FinishDelta is a truncation ------------------------------------


class _Truncating:
    """A custom provider whose first stream stops without ``FinishDelta``."""

    name = "custom"
    model = "m"
    supports_json_schema = False

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, entries: Any, **kwargs: Any) -> AsyncIterator[ModelDelta]:
        from lovia.providers.base import FinishDelta

        self.calls += 1
        yield TextDelta("The answer is")
        if self.calls > 1:
            yield TextDelta(" 42.")
            yield FinishDelta("stop")


async def test_a_stream_that_ends_without_a_finish_is_retried_as_a_truncation() -> None:
    from lovia.retry import RetryPolicy

    provider = _Truncating()
    agent = Agent("t", model=provider, retry=RetryPolicy(backoff_base=0, backoff_max=0))
    result = await Runner.run(agent, "go")
    assert provider.calls == 2
    assert result.output == "The answer is 42."


async def test_a_stream_that_always_ends_without_a_finish_fails_typed() -> None:
    from lovia.exceptions import ProviderError

    class Never(_Truncating):
        async def stream(self, entries: Any, **kwargs: Any) -> AsyncIterator[ModelDelta]:
            self.calls += 1
            yield TextDelta("partial")

    agent = Agent("t", model=Never(), retry=None)
    with pytest.raises(ProviderError, match="ended before it finished") as info:
        await Runner.run(agent, "go")
    assert info.value.retryable


# -- 20.10: pause_turn keeps the paused text -----------------------------------------------


async def test_a_paused_turn_contributes_its_text_to_the_output() -> None:
    provider = ScriptedProvider(
        [AssistantTurn(content="The capital is", finish_reason="pause_turn"), text(" Canberra.")]
    )
    result = await Runner.run(Agent("a", model=provider), "capital of Australia?")
    assert result.output == "The capital is Canberra."
    assert result.turns == 2


# -- 20.12: a policy returning something other than a ContextResult -----------------------


class _BareListPolicy:
    async def compact(self, req: CompactionRequest) -> Any:
        return list(req.entries)


async def test_a_policy_returning_a_bare_list_is_a_user_error_naming_the_contract() -> None:
    agent = Agent("p", model=ScriptedProvider([text("x")]))
    with pytest.raises(UserError, match="ContextResult") as info:
        await Runner.run(agent, "go", context_policy=_BareListPolicy())
    assert "compact" in str(info.value)
    assert info.value.hint
