"""Compaction through lovia.Runner with the public ScriptedProvider."""

from __future__ import annotations

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
    # A new policy instance: the decisions can only come from the session segment's meta.
    second = ScriptedProvider([text("again")])
    again = agent.clone(model=second, context_policy=_policy(context_window=8_000))
    await Runner.run(again, "anything else?", session=session, session_id="s1")
    view = second.views[0]
    cleared_after = {
        e.call_id for e in view if isinstance(e, ToolResultEntry) and "cleared" in e.output
    }
    assert cleared_before <= cleared_after
    assert_pairs_valid(view)
