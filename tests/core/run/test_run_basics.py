"""Agent + Runner basics through the public API with ScriptedProvider."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.exceptions import MaxTurnsExceeded, UserError
from lovia.messages import AssistantTurn, Message, Usage, system, user
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
)


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _agent(provider: ScriptedProvider, **kw: Any) -> Agent[Any]:
    return Agent("calc", instructions="Be terse.", model=provider, tools=[add], **kw)


async def test_plain_text_run_returns_the_reply() -> None:
    provider = ScriptedProvider([text("hello")])
    result = await Runner.run(_agent(provider), "hi")
    assert result.output == "hello"
    assert result.turns == 1


async def test_tool_round_trip_records_call_result_and_answer() -> None:
    provider = ScriptedProvider([call("add", {"a": 2, "b": 3}, call_id="c1"), text("5")])
    result = await Runner.run(_agent(provider), "2+3?")
    assert result.entries == [
        InputEntry("user", "2+3?"),
        ToolCallEntry("c1", "add", '{"a": 2, "b": 3}'),
        ToolResultEntry("c1", "5", raw=5),
        AssistantTextEntry("5"),
    ]
    assert result.turns == 2


async def test_provider_is_sent_system_prompt_history_and_tool_result() -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}, call_id="c1"), text("2")])
    await Runner.run(_agent(provider), "1+1?")
    second = provider.calls[1]
    assert [m.role for m in second] == ["system", "user", "assistant", "tool"]
    assert second[0].content == "Be terse."
    assert second[3] == Message("tool", "2", tool_call_id="c1")


async def test_entries_are_the_runs_own_delta_without_system_head() -> None:
    provider = ScriptedProvider([text("ok")])
    result = await Runner.run(_agent(provider), [system("extra rules"), user("hi")])
    assert result.entries == [
        InputEntry("system", "extra rules"),
        InputEntry("user", "hi"),
        AssistantTextEntry("ok"),
    ]
    assert [m.role for m in provider.calls[0]] == ["system", "system", "user"]


async def test_messages_are_the_chat_view_of_entries() -> None:
    provider = ScriptedProvider([text("ok", reasoning="think")])
    result = await Runner.run(_agent(provider), "hi")
    assert result.messages == [
        Message("user", "hi"),
        Message("assistant", "ok", reasoning="think"),
    ]
    assert isinstance(result.entries[1], ReasoningEntry)


async def test_usage_accumulates_and_last_input_tokens_is_the_final_call() -> None:
    provider = ScriptedProvider(
        [
            call("add", {"a": 1, "b": 2}, usage=Usage(input_tokens=10, output_tokens=3)),
            text("3", usage=Usage(input_tokens=20, output_tokens=4)),
        ]
    )
    result = await Runner.run(_agent(provider), "go")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 7)
    assert result.usage.requests == 2
    assert result.last_input_tokens == 20
    assert result.finish_reason == "stop"


def test_usage_updated_takes_a_later_report_field_by_field() -> None:
    # A call's first report (Anthropic's message_start) has the input and cache counts, the
    # last one (message_delta) the output: together they are one call's usage, not a sum.
    first = Usage(input_tokens=100, cache_read_tokens=80, requests=1)
    merged = first.updated(Usage(output_tokens=7))
    assert merged.to_dict() == {
        "input_tokens": 100,
        "output_tokens": 7,
        "cache_read_tokens": 80,
        "cache_write_tokens": 0,
        "requests": 1,
    }
    assert merged is not first and first.output_tokens == 0


def test_run_sync_wraps_asyncio_run() -> None:
    provider = ScriptedProvider([text("sync")])
    assert Runner.run_sync(_agent(provider), "hi").output == "sync"


async def test_run_sync_inside_a_running_loop_raises_with_hint() -> None:
    with pytest.raises(UserError) as info:
        Runner.run_sync(_agent(ScriptedProvider([])), "hi")
    assert "await Runner.run" in (info.value.hint or "")


async def test_running_without_a_model_raises_user_error() -> None:
    with pytest.raises(UserError, match="has no model"):
        await Runner.run(Agent("nomodel"), "hi")


def test_a_list_of_models_is_rejected_with_a_migration_hint() -> None:
    with pytest.raises(UserError) as info:
        Agent("a", model=["openai:gpt-4o", "openai:gpt-4o-mini"])  # type: ignore[arg-type]
    assert "RetryPolicy" in (info.value.hint or "")


def test_session_without_session_id_raises_user_error() -> None:
    from lovia.stores.memory import InMemorySession

    with pytest.raises(UserError, match="session_id"):
        Runner.stream(_agent(ScriptedProvider([])), "hi", session=InMemorySession())


def test_checkpoint_rejects_anything_but_checkpoint_options_eagerly() -> None:
    with pytest.raises(UserError, match="takes a CheckpointOptions"):
        bad: Any = object()  # wrong on purpose: the runtime check is what is under test
        Runner.stream(_agent(ScriptedProvider([])), "hi", checkpoint=bad)


async def test_max_turns_exceeded_when_the_model_keeps_calling_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}) for _ in range(3)])
    with caplog.at_level(logging.WARNING, logger="lovia"), pytest.raises(MaxTurnsExceeded) as info:
        await Runner.run(_agent(provider), "loop", max_turns=2)
    assert info.value.hint
    assert len(provider.calls) == 2
    logged = [r for r in caplog.records if "max_turns" in r.getMessage()]
    assert len(logged) == 1  # logged once, by the loop


async def test_empty_reply_completes_with_empty_string_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider([text("")])
    with (
        caplog.at_level(logging.WARNING, logger="lovia.runtime"),
        pytest.warns(UserWarning, match="empty reply"),
    ):
        result = await Runner.run(_agent(provider), "hi")
    assert result.output == ""
    assert any("empty_reply" in r.getMessage() for r in caplog.records)


async def test_instance_shortcuts_match_the_runner() -> None:
    agent = _agent(ScriptedProvider([text("a")]))
    assert (await agent.run("hi")).output == "a"
    handle = agent.clone(model=ScriptedProvider([text("b")])).stream("hi")
    assert (await handle).output == "b"


async def test_run_context_is_injected_into_tools_with_deps_and_turn() -> None:
    seen: list[tuple[Any, int, str | None]] = []

    @tool
    async def probe(ctx: RunContext[dict[str, int]]) -> str:
        """Probe."""
        seen.append((ctx.deps, ctx.turn, ctx.agent.name))
        return "ok"

    provider = ScriptedProvider([call("probe", {}), text("done")])
    await Runner.run(Agent("p", model=provider, tools=[probe]), "go", context={"k": 1})
    assert seen == [({"k": 1}, 1, "p")]


async def test_run_context_entries_is_the_live_transcript() -> None:
    captured: list[RunContext[Any]] = []

    @tool
    async def grab(ctx: RunContext[Any]) -> str:
        """Grab."""
        captured.append(ctx)
        return "ok"

    provider = ScriptedProvider([call("grab", {}), text("done")])
    await Runner.run(Agent("g", model=provider, tools=[grab]), "go")
    assert captured[0].entries[-1] == AssistantTextEntry("done")


# -- instructions ---------------------------------------------------------------------


async def test_callable_instructions_render_on_every_turn() -> None:
    def instructions(ctx: RunContext[Any]) -> str:
        return f"turn {ctx.turn}"

    provider = ScriptedProvider([call("add", {"a": 1, "b": 1}), text("2")])
    await Runner.run(Agent("i", instructions=instructions, model=provider, tools=[add]), "go")
    assert [calls[0].content for calls in provider.calls] == ["turn 1", "turn 2"]


async def test_fragments_render_in_order_after_base_and_skip_empty() -> None:
    agent = Agent("f", instructions="Base.", model=ScriptedProvider([text("x")]))

    @agent.instruction
    async def first(ctx: RunContext[Any]) -> str:
        return "First."

    @agent.instruction
    def empty(ctx: RunContext[Any]) -> str:
        return ""

    @agent.instruction
    def second(ctx: RunContext[Any]) -> str:
        return "Second."

    provider = ScriptedProvider([text("x")])
    await Runner.run(agent.clone(model=provider), "go", extra_instructions="Extra.")
    assert provider.calls[0][0].content == "Base.\n\nFirst.\n\nSecond.\n\nExtra."


async def test_clone_carries_fragments_registered_before_but_not_after() -> None:
    agent = Agent("c", instructions="Base.")
    agent.instruction(lambda ctx: "Early.")
    early_clone = agent.clone()
    agent.instruction(lambda ctx: "Late.")
    provider = ScriptedProvider([text("x")])
    await Runner.run(early_clone.clone(model=provider), "go")
    assert provider.calls[0][0].content == "Base.\n\nEarly."


async def test_with_instructions_returns_a_clone_and_leaves_the_original() -> None:
    base = Agent("w", instructions="Base.")
    extended = base.with_instructions(lambda ctx: "More.")
    p1, p2 = ScriptedProvider([text("x")]), ScriptedProvider([text("x")])
    await Runner.run(base.clone(model=p1), "go")
    await Runner.run(extended.clone(model=p2), "go")
    assert p1.calls[0][0].content == "Base."
    assert p2.calls[0][0].content == "Base.\n\nMore."


async def test_system_prompt_is_exposed_on_the_context() -> None:
    prompts: list[str] = []

    @tool
    async def look(ctx: RunContext[Any]) -> str:
        """Look."""
        prompts.append(ctx.system_prompt)
        return "ok"

    provider = ScriptedProvider([call("look", {}), text("x")])
    agent = Agent("s", instructions="Base.", model=provider, tools=[look])
    await Runner.run(agent, "go", extra_instructions="Extra.")
    assert prompts == ["Base.\n\nExtra."]


async def test_an_agent_without_instructions_sends_no_system_message() -> None:
    provider = ScriptedProvider([text("x")])
    await Runner.run(Agent("bare", model=provider), "hi")
    assert [m.role for m in provider.calls[0]] == ["user"]


def test_agent_collection_fields_are_tuples() -> None:
    agent = Agent("t", tools=[add])
    assert isinstance(agent.tools, tuple)
    assert agent.clone().tools is agent.tools


def test_run_result_repr_is_compact() -> None:
    async def go() -> str:
        result = await Runner.run(_agent(ScriptedProvider([text("x" * 500)])), "hi")
        return repr(result)

    shown = asyncio.run(go())
    assert len(shown) < 200
    assert shown.startswith("RunResult(output='xxx")


async def test_scripted_provider_ran_out_raises_assertion() -> None:
    with pytest.raises(AssertionError, match="ran out of canned responses"):
        await Runner.run(_agent(ScriptedProvider([])), "hi")


async def test_scripted_provider_reports_unused_steps() -> None:
    provider = ScriptedProvider([text("a"), text("b")])
    await Runner.run(_agent(provider), "hi")
    assert len(provider.unused_steps) == 1
    with pytest.raises(AssertionError, match="1 unused step"):
        provider.assert_consumed()


async def test_a_paused_turn_is_continued_not_taken_as_the_answer() -> None:
    provider = ScriptedProvider(
        [AssistantTurn(content="Searching", finish_reason="pause_turn"), text(" and done.")]
    )
    result = await Runner.run(Agent(name="a", model=provider), "go")
    assert result.output == "Searching and done."  # the paused text is part of the answer
    assert result.turns == 2
    assert len(provider.calls) == 2


@pytest.mark.parametrize("field", ["tools", "handoffs", "plugins", "input_guardrails"])
def test_a_single_item_where_a_list_is_expected_raises_with_a_hint(field: str) -> None:
    item: Any = add if field == "tools" else Agent("other")
    with pytest.raises(UserError, match=f"{field}= takes a list") as info:
        Agent("a", **{field: item})
    assert info.value.hint == f"wrap a single item in a list: {field}=[item]"


async def test_max_turns_below_one_is_a_user_error_before_any_call() -> None:
    provider = ScriptedProvider([text("x")])
    with pytest.raises(UserError, match="max_turns") as info:
        await Runner.run(Agent("a", model=provider), "hi", max_turns=0)
    assert info.value.hint is not None
    assert len(provider.calls) == 0


def test_a_misspelt_run_option_names_the_valid_ones() -> None:
    agent = Agent(name="a", model=ScriptedProvider([text("x")]))
    with pytest.raises(UserError) as info:
        Runner.run_sync(agent, "hi", contxt=1)  # type: ignore[call-arg]  # deliberately wrong
    assert "contxt" in str(info.value)
    assert "context" in (info.value.hint or "")
