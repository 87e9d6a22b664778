"""Compaction through lovia.Runner with the public ScriptedProvider."""

from __future__ import annotations

import copy

import pytest
from lovia import Agent, Runner, tool
from lovia.context import ClearToolResults, Compaction, InMemoryResultStore, OffloadToolResults
from lovia.events import ContextCompacted
from lovia.exceptions import ContextOverflowError
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry

from .ctx_support import assert_pairs_valid, transcript


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return f"page {n}\n" + "x" * 3_000


def _policy(**kw: object) -> Compaction:
    return Compaction(
        reserve_output_tokens=0,
        stages=[OffloadToolResults(), ClearToolResults()],
        **kw,  # type: ignore[arg-type]
    )


async def test_long_tool_run_compacts_the_view_but_not_the_transcript() -> None:
    provider = ScriptedProvider(
        [call("fetch", {"n": i}, call_id=f"c{i}") for i in range(12)] + [text("done")]
    )
    agent: Agent[None] = Agent(
        name="reader",
        instructions="Read pages.",
        model=provider,
        tools=[fetch],
        context_policy=_policy(context_window=8_000, store=InMemoryResultStore()),
    )
    handle = Runner.stream(agent, "read twelve pages")
    events = [e async for e in handle]
    result = await handle.result()
    assert result.output == "done"
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert compacted and compacted[0].notice.tokens_after < compacted[0].notice.tokens_before
    assert all("recall_tool_result" in names for names in provider.tools)
    last_view = provider.views[-1]
    assert_pairs_valid(last_view)
    markers = [e for e in last_view if isinstance(e, ToolResultEntry) and e.output.startswith("[")]
    assert markers
    full = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert len(full) == 12 and all(e.output.endswith("x" * 3_000) for e in full)


async def test_reactive_overflow_retries_once_with_a_smaller_view() -> None:
    provider = ScriptedProvider(
        [ContextOverflowError("prompt too long", reported_window=6_000), text("ok")]
    )
    agent: Agent[None] = Agent(
        name="a", instructions="sys", model=provider, context_policy=_policy()
    )
    history = transcript(30, 2_000)[1:]
    result = await Runner.run(agent, [*history, *transcript(0)[1:]])
    assert result.output == "ok"
    first, retry = provider.views
    assert len(retry) == len(first)
    assert sum(len(str(e)) for e in retry) < sum(len(str(e)) for e in first) // 2


async def test_overflow_that_cannot_shrink_surfaces_the_error() -> None:
    provider = ScriptedProvider([ContextOverflowError("prompt too long", reported_window=1_000)])
    agent: Agent[None] = Agent(
        name="a", instructions="sys", model=provider, context_policy=_policy()
    )
    with pytest.raises(ContextOverflowError):
        await Runner.run(agent, "z" * 50_000)
    assert len(provider.views) == 1


async def test_decisions_carry_into_the_next_run_of_a_session() -> None:
    from lovia.stores.memory import InMemorySession

    session = InMemorySession()
    first = ScriptedProvider(
        [call("fetch", {"n": i}, call_id=f"c{i}") for i in range(12)] + [text("done")]
    )
    agent: Agent[None] = Agent(
        name="reader",
        instructions="Read pages.",
        model=first,
        tools=[fetch],
        context_policy=_policy(context_window=8_000),
    )
    await Runner.run(agent, "read", session=session, session_id="s1")
    cleared_before = {
        e.call_id
        for e in first.views[-1]
        if isinstance(e, ToolResultEntry) and "cleared" in e.output
    }
    assert cleared_before
    # A new policy instance with a roomier window, under which a fresh policy would decide
    # nothing (the whole history fits): markers can only come from the segment's meta.
    second = ScriptedProvider([text("again")])
    again = agent.clone(model=second, context_policy=_policy(context_window=16_000))
    handle = Runner.stream(again, "anything else?", session=session, session_id="s1")
    assert not [e async for e in handle if isinstance(e, ContextCompacted)]
    await handle.result()
    view = second.views[0]
    cleared_after = {
        e.call_id for e in view if isinstance(e, ToolResultEntry) and "cleared" in e.output
    }
    assert cleared_before <= cleared_after
    assert_pairs_valid(view)


async def test_compaction_never_mutates_the_session() -> None:
    from lovia.stores.memory import InMemorySession

    session = InMemorySession()
    provider = ScriptedProvider(
        [call("fetch", {"n": i}, call_id=f"c{i}") for i in range(12)] + [text("done")]
    )
    agent: Agent[None] = Agent(
        name="reader",
        instructions="Read pages.",
        model=provider,
        tools=[fetch],
        context_policy=_policy(context_window=8_000),
    )
    await Runner.run(agent, "read", session=session, session_id="s1")
    assert any("cleared" in str(e) for e in provider.views[-1])  # the view was compacted
    stored = [e for e in await session.load("s1") if isinstance(e, ToolResultEntry)]
    assert len(stored) == 12 and all(e.output.endswith("x" * 3_000) for e in stored)
    before = copy.deepcopy(await session.segments("s1"))
    await Runner.run(
        agent.clone(model=ScriptedProvider([text("again")])),
        "more?",
        session=session,
        session_id="s1",
    )
    after = await session.segments("s1")
    assert [s.entries for s in after[:1]] == [s.entries for s in before]


async def test_a_cleared_result_comes_back_byte_exact_without_re_running_the_tool() -> None:
    ran: list[int] = []

    @tool
    def page(n: int) -> str:
        """Fetch page n."""
        ran.append(n)
        return f"page {n}\r\n漢字 ✓\n" + "y" * 3_000

    provider = ScriptedProvider(
        [call("page", {"n": i}, call_id=f"p{i}") for i in range(12)]
        + [call("recall_tool_result", {"ref": "p0"}, call_id="r0"), text("done")]
    )
    agent: Agent[None] = Agent(
        name="reader",
        instructions="Read pages.",
        model=provider,
        tools=[page],
        context_policy=_policy(context_window=8_000),
    )
    result = await Runner.run(agent, "read twelve pages, then page 0 again")
    assert any(
        isinstance(e, ToolResultEntry) and e.call_id == "p0" and e.output.startswith("[")
        for e in provider.views[-2]
    )
    recalled = next(
        e for e in result.entries if isinstance(e, ToolResultEntry) and e.call_id == "r0"
    )
    assert recalled.output == "page 0\r\n漢字 ✓\n" + "y" * 3_000
    assert ran == list(range(12))  # recall read the record; page 0 never ran twice


async def test_a_second_overflow_surfaces_instead_of_retrying_again() -> None:
    provider = ScriptedProvider(
        [
            ContextOverflowError("prompt too long", reported_window=6_000),
            ContextOverflowError("prompt too long", reported_window=6_000),
            text("never"),
        ]
    )
    agent: Agent[None] = Agent(
        name="a", instructions="sys", model=provider, context_policy=_policy()
    )
    history = transcript(30, 2_000)[1:]
    with pytest.raises(ContextOverflowError):
        await Runner.run(agent, [*history, *transcript(0)[1:]])
    assert len(provider.views) == 2


async def test_decisions_survive_a_checkpoint_resume() -> None:
    from lovia.budget import RunBudget
    from lovia.checkpointer import CheckpointOptions
    from lovia.exceptions import BudgetExceeded
    from lovia.stores import InMemoryCheckpointer

    store = InMemoryCheckpointer()
    first = ScriptedProvider(
        [call("fetch", {"n": i}, call_id=f"c{i}") for i in range(12)] + [text("never")]
    )
    agent: Agent[None] = Agent(
        name="reader",
        instructions="Read pages.",
        model=first,
        tools=[fetch],
        context_policy=_policy(context_window=8_000),
    )
    # The budget must trip (the run stops mid-way, checkpointed); anything else is a bug.
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            agent,
            "read",
            budget=RunBudget(max_tool_calls=10),
            checkpoint=CheckpointOptions(store, "r"),
        )
    assert len(first.views) == 11  # ten tool calls ran, the eleventh was refused
    cleared = {
        e.call_id
        for e in first.views[-1]
        if isinstance(e, ToolResultEntry) and "cleared" in e.output
    }
    assert cleared
    # A new policy instance with a roomier window (a fresh policy would decide nothing):
    # markers in the resumed view can only come from the checkpoint.
    second = ScriptedProvider([text("done")])
    handle = Runner.stream(
        agent.clone(model=second, context_policy=_policy(context_window=16_000)),
        [],
        checkpoint=CheckpointOptions(store, "r", if_run_exists="resume_only"),
    )
    assert not [e async for e in handle if isinstance(e, ContextCompacted)]
    await handle.result()
    resumed = {
        e.call_id
        for e in second.views[0]
        if isinstance(e, ToolResultEntry) and "cleared" in e.output
    }
    assert cleared <= resumed
    assert_pairs_valid(second.views[0])


async def test_a_custom_policys_detail_lines_reach_the_notice() -> None:
    from lovia.context import CompactionRequest, ContextResult

    class Trimming:
        async def compact(self, req: CompactionRequest) -> ContextResult:
            view = [req.entries[0], req.entries[-1]]
            return ContextResult(
                entries=view,
                changed=True,
                compacted=True,
                reason="threshold",
                tokens_before=900,
                tokens_after=100,
                detail=("dropped the middle", "kept the last message"),
            )

    provider = ScriptedProvider([text("ok")])
    agent: Agent[None] = Agent(
        name="a", instructions="sys", model=provider, context_policy=Trimming()
    )
    handle = Runner.stream(agent, [*transcript(3)[1:], *transcript(0)[1:]])
    notices = [e.notice async for e in handle if isinstance(e, ContextCompacted)]
    await handle.result()
    assert [n.detail for n in notices] == [("dropped the middle", "kept the last message")]
    assert (notices[0].tokens_before, notices[0].tokens_after) == (900, 100)
    assert len(provider.views[0]) == 2


async def test_a_shared_policy_drops_each_runs_view_state_when_the_run_ends() -> None:
    policy = _policy(context_window=8_000)
    agent: Agent[None] = Agent(name="reader", tools=[fetch], context_policy=policy)
    for i in range(3):
        provider = ScriptedProvider([call("fetch", {"n": i}), text("done")])
        result = await Runner.run(agent.clone(model=provider), "read a page")
        assert result.output == "done"
    # Nothing public exposes the retained views; the per-run cache is what would hold them
    # (full tool outputs included) after the runs ended.
    assert policy._tracks == {}
