"""Handoffs and agents as tools (catalogue section 1 Multi-agent; section 12 item 3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.budget import RunBudget
from lovia.events import HandoffOccurred, RunCompleted, ToolCallCompleted, ToolCallFailed, TurnEnded
from lovia.exceptions import ProviderError, UserError
from lovia.handoff import Handoff
from lovia.hooks import AgentHooks
from lovia.messages import Message, Usage
from lovia.plugin import PluginInstance
from lovia.steering import Mailbox
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import InputEntry, ToolResultEntry


def _pair() -> tuple[Agent[Any], Agent[Any], ScriptedProvider]:
    provider = ScriptedProvider([])
    billing = Agent("billing", instructions="You handle billing.", model=provider)
    triage = Agent("triage", instructions="Route.", model=provider, handoffs=[billing])
    return triage, billing, provider


async def test_handoff_swaps_the_agent_and_keeps_the_body() -> None:
    provider = ScriptedProvider([call("transfer_to_billing", {"reason": "money"}), text("paid")])
    billing = Agent("billing", instructions="You handle billing.", model=provider)
    triage = Agent("triage", instructions="Route.", model=provider, handoffs=[billing])
    result = await Runner.run(triage, "refund please")
    assert result.final_agent is billing
    second = provider.calls[1]
    assert second[0] == Message("system", "You handle billing.")
    assert second[1] == Message("user", "refund please")
    assert second[2].tool_calls[0].name == "transfer_to_billing"
    assert second[3].content == "Transferred to billing."


async def test_handoff_event_comes_after_the_turns_other_results() -> None:
    @tool
    async def note() -> str:
        """Note."""
        return "noted"

    provider = ScriptedProvider(
        [batch(("transfer_to_billing", {}, "h"), ("note", {}, "n")), text("ok")]
    )
    billing = Agent("billing", model=provider)
    triage = Agent("triage", model=provider, tools=[note], handoffs=[billing])
    events = [e async for e in Runner.stream(triage, "go")]
    names = [
        type(e).__name__
        for e in events
        if isinstance(e, (ToolCallCompleted, HandoffOccurred, TurnEnded))
    ]
    assert names[:4] == ["ToolCallCompleted", "ToolCallCompleted", "HandoffOccurred", "TurnEnded"]


async def test_first_handoff_wins_and_the_seconds_on_handoff_never_fires() -> None:
    fired: list[str] = []
    provider = ScriptedProvider(
        [
            batch(("transfer_to_billing", {}, "h1"), ("transfer_to_support", {}, "h2")),
            text("ok"),
        ]
    )
    billing = Agent("billing", model=provider)
    support = Agent("support", model=provider)
    triage = Agent(
        "triage",
        model=provider,
        handoffs=[
            Handoff(billing, on_handoff=lambda args, ctx: fired.append("billing")),
            Handoff(support, on_handoff=lambda args, ctx: fired.append("support")),
        ],
    )
    result = await Runner.run(triage, "go")
    assert fired == ["billing"]
    assert result.final_agent is billing
    second = next(e for e in result.entries if isinstance(e, ToolResultEntry) and e.call_id == "h2")
    assert second.is_error and "first handoff" in second.output


async def test_handoff_reaches_both_agents_hooks() -> None:
    seen: list[str] = []
    source_hooks, target_hooks = AgentHooks(), AgentHooks()
    source_hooks.on(HandoffOccurred)(lambda e, ctx: seen.append("source"))
    target_hooks.on(HandoffOccurred)(lambda e, ctx: seen.append("target"))
    provider = ScriptedProvider([call("transfer_to_b", {}), text("ok")])
    b = Agent("b", model=provider, hooks=target_hooks)
    a = Agent("a", model=provider, hooks=source_hooks, handoffs=[b])
    await Runner.run(a, "go")
    assert seen == ["source", "target"]


async def test_extra_instructions_are_reapplied_to_the_target() -> None:
    provider = ScriptedProvider([call("transfer_to_b", {}), text("ok")])
    b = Agent("b", instructions="B.", model=provider)
    a = Agent("a", instructions="A.", model=provider, handoffs=[b])
    await Runner.run(a, "go", extra_instructions="Be kind.")
    assert provider.calls[1][0].content == "B.\n\nBe kind."


async def test_handoff_from_a_system_less_agent_adds_the_targets_head() -> None:
    provider = ScriptedProvider([call("transfer_to_b", {}), text("ok")])
    b = Agent("b", instructions="B.", model=provider)
    a = Agent("a", model=provider, handoffs=[b])
    result = await Runner.run(a, "go")
    assert [m.role for m in provider.calls[0]] == ["user"]
    assert [m.role for m in provider.calls[1]] == ["system", "user", "assistant", "tool"]
    assert provider.calls[1][0] == Message("system", "B.")
    assert result.entries[0] == InputEntry("user", "go")


async def test_custom_handoff_name_and_description_reach_the_provider() -> None:
    provider = ScriptedProvider([text("ok")])
    b = Agent("b", model=provider)
    a = Agent("a", model=provider, handoffs=[Handoff(b, name="escalate", description="Escalate.")])
    await Runner.run(a, "go")
    assert "escalate" in provider.tools[0]
    assert not any(name.startswith("transfer_to_") for name in provider.tools[0])


async def test_plugins_are_reused_when_a_handoff_comes_back() -> None:
    setups: list[str] = []

    class Counting:
        def __init__(self, name: str) -> None:
            self.name = name

        async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
            setups.append(self.name)
            return PluginInstance()

    provider = ScriptedProvider(
        [
            call("transfer_to_b", {}),
            call("transfer_to_a", {}),
            call("transfer_to_b", {}),
            text("ok"),
        ]
    )
    a = Agent("a", model=provider, plugins=[Counting("a")])
    b = Agent("b", model=provider, plugins=[Counting("b")], handoffs=[a])
    a.handoffs = (b,)  # a cycle needs one in-place edit (test-only)
    result = await Runner.run(a, "go")
    assert result.final_agent is b
    assert setups == ["a", "b"]


async def test_handoff_to_a_system_less_agent_drops_the_head_and_keeps_user_systems() -> None:
    from lovia.messages import system, user

    provider = ScriptedProvider([call("transfer_to_b", {}), text("ok")])
    b = Agent("b", model=provider)
    a = Agent("a", instructions="A.", model=provider, handoffs=[b])
    await Runner.run(a, [system("user rules"), user("go")])
    assert [m.role for m in provider.calls[0]] == ["system", "system", "user"]
    assert provider.calls[1][0] == Message("system", "user rules")
    assert [m.role for m in provider.calls[1]] == ["system", "user", "assistant", "tool"]


async def test_run_level_output_type_binds_every_agent_reached() -> None:
    provider = ScriptedProvider([call("transfer_to_b", {}), text("7")])
    b = Agent("b", model=provider)
    a = Agent("a", model=provider, handoffs=[b])
    result = await Runner.run(a, "go", output_type=int)
    assert result.output == 7


# -- agent as tool --------------------------------------------------------------------


async def test_agent_as_tool_runs_a_child_that_sees_only_the_input() -> None:
    child_provider = ScriptedProvider([text("child answer", usage=Usage(input_tokens=7))])
    child = Agent("Research Bot", instructions="Research.", model=child_provider)
    parent_provider = ScriptedProvider(
        [call("ask_research_bot", {"input": "find x"}), text("done", usage=Usage(input_tokens=3))]
    )
    parent = Agent("parent", model=parent_provider, tools=[child.as_tool()])
    result = await Runner.run(parent, "go")
    assert child_provider.calls[0] == [Message("system", "Research."), Message("user", "find x")]
    assert result.entries[2] == ToolResultEntry(
        "call_ask_research_bot", "child answer", raw="child answer"
    )
    assert result.usage.input_tokens == 10


async def test_agent_as_tool_hides_execution_policy_from_the_model() -> None:
    child = Agent("c", model=ScriptedProvider([]))
    schema = child.as_tool(max_turns=3, budget=RunBudget(max_tool_calls=1)).parameters
    assert set(schema["properties"]) == {"input"}


async def test_child_usage_folds_into_the_parent_even_on_failure() -> None:
    child_provider = ScriptedProvider(
        [
            call("missing", {}, usage=Usage(input_tokens=5)),
            ProviderError("boom", status_code=400),
        ]
    )
    child = Agent("c", model=child_provider, retry=None)
    parent_provider = ScriptedProvider([call("ask_c", {"input": "x"}), text("ok")])
    result = await Runner.run(Agent("p", model=parent_provider, tools=[child.as_tool()]), "go")
    assert result.usage.input_tokens == 5
    failed = result.entries[2]
    assert isinstance(failed, ToolResultEntry) and failed.is_error


async def test_child_budget_exceeded_is_a_tool_error_not_the_end_of_the_parent() -> None:
    child_provider = ScriptedProvider([call("missing", {}), call("missing", {}), text("never")])
    child = Agent("c", model=child_provider)
    parent_provider = ScriptedProvider([call("ask_c", {"input": "x"}), text("recovered")])
    tool_ = child.as_tool(budget=RunBudget(max_tool_calls=1))
    result = await Runner.run(Agent("p", model=parent_provider, tools=[tool_]), "go")
    assert result.output == "recovered"
    failed = result.entries[2]
    assert isinstance(failed, ToolResultEntry) and failed.is_error
    assert "budget" in failed.output


async def test_child_gets_its_own_mailbox_and_inherits_deps_and_token() -> None:
    seen: list[tuple[Any, Any, Any]] = []
    parent_box = Mailbox()

    @tool
    async def inspect_ctx(ctx: RunContext[Any]) -> str:
        """Inspect."""
        seen.append((ctx.deps, ctx.cancel_token, ctx.mailbox))
        return "ok"

    child_provider = ScriptedProvider([call("inspect_ctx", {}), text("child")])
    child = Agent("c", model=child_provider, tools=[inspect_ctx])

    @tool
    async def parent_probe(ctx: RunContext[Any]) -> str:
        """Probe."""
        seen.append((ctx.deps, ctx.cancel_token, ctx.mailbox))
        return "ok"

    parent_provider = ScriptedProvider(
        [call("parent_probe", {}), call("ask_c", {"input": "x"}), text("ok")]
    )
    parent = Agent("p", model=parent_provider, tools=[parent_probe, child.as_tool()])
    await Runner.run(parent, "go", context="deps", mailbox=parent_box)
    (p_deps, p_token, p_box), (c_deps, c_token, c_box) = seen
    assert c_deps == p_deps == "deps"
    assert c_token is p_token
    assert c_box is not p_box


async def test_cancelling_the_parent_token_cancels_the_child() -> None:
    from lovia.exceptions import RunCancelled

    entered = asyncio.Event()

    @tool
    async def hang(ctx: RunContext[Any]) -> str:
        """Hang."""
        entered.set()
        await asyncio.Event().wait()
        return "never"

    child = Agent("c", model=ScriptedProvider([call("hang", {}), text("never")]), tools=[hang])
    parent_provider = ScriptedProvider([call("ask_c", {"input": "x"}), text("never")])
    handle = Runner.stream(Agent("p", model=parent_provider, tools=[child.as_tool()]), "go")

    async def cancel_when_entered() -> None:
        await entered.wait()
        handle.cancel("stop")

    canceller = asyncio.ensure_future(cancel_when_entered())
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(handle.result(), 5)
    await canceller


# -- tool-name slugs (through the public names they produce) ----------------------------


def _transfer(name: str) -> str:
    return Handoff(Agent(name)).tool_name


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Billing Agent", "transfer_to_billing_agent"), ("a-b_c", "transfer_to_a-b_c")],
)
def test_slug_of_plain_ascii_names(name: str, expected: str) -> None:
    assert _transfer(name) == expected


def test_slug_of_non_ascii_names_is_a_stable_digest() -> None:
    first = _transfer("助手")
    assert first == _transfer("助手")
    assert first.isascii() and first.startswith("transfer_to_agent_")
    assert first != _transfer("客服")


def test_slug_is_at_most_64_chars_with_a_digest_when_truncated() -> None:
    slug = _transfer("x" * 100)
    assert len(slug) <= 64
    assert slug != _transfer("x" * 99)


def test_agent_as_tool_is_named_ask_slug() -> None:
    assert Agent("Research Bot").as_tool().name == "ask_research_bot"


async def test_string_model_targets_get_their_own_provider_closed_at_run_end() -> None:
    from lovia.providers.registry import register_provider

    built: list[str] = []
    closed: list[str] = []

    class Owned(ScriptedProvider):
        async def aclose(self) -> None:
            closed.append(self.model)

    def factory(model: str, **kw: Any) -> Owned:
        built.append(model)
        script = [call("transfer_to_b", {})] if model == "a" else [text("from b")]
        return Owned(script, model=model)

    register_provider("lovia-test-handoff", factory)
    b = Agent("b", model="lovia-test-handoff:b")
    a = Agent("a", model="lovia-test-handoff:a", handoffs=[b])
    result = await Runner.run(a, "go")
    assert result.output == "from b"
    assert built == ["a", "b"]
    assert closed == ["b", "a"]


async def test_two_handoffs_with_one_tool_name_are_a_user_error() -> None:
    provider = ScriptedProvider([text("never")])
    first, second = Agent("Billing", model=provider), Agent("billing", model=provider)
    entry = Agent("triage", model=provider, handoffs=[first, second])
    with pytest.raises(UserError, match="transfer_to_billing") as info:
        await Runner.run(entry, "hi")
    assert info.value.hint is not None and "Handoff(" in info.value.hint
    assert len(provider.calls) == 0
    renamed = entry.clone(handoffs=[first, Handoff(second, name="transfer_to_billing_2")])
    assert (await Runner.run(renamed, "hi")).output == "never"


async def test_async_on_handoff_gets_the_models_reason_and_the_live_context() -> None:
    seen: list[tuple[Any, str]] = []

    async def record(args: dict[str, Any], ctx: RunContext[Any]) -> None:
        seen.append((args.get("reason"), ctx.agent.name))

    provider = ScriptedProvider([call("transfer_to_billing", {"reason": "money"}), text("ok")])
    billing = Agent("billing", model=provider)
    triage = Agent("triage", model=provider, handoffs=[Handoff(billing, on_handoff=record)])
    result = await Runner.run(triage, "go")
    assert seen == [("money", "triage")]
    assert result.final_agent is billing


async def test_a_raising_on_handoff_is_an_error_result_and_no_swap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(args: dict[str, Any], ctx: RunContext[Any]) -> None:
        raise RuntimeError("billing is closed")

    provider = ScriptedProvider([call("transfer_to_billing", {}, call_id="h"), text("stayed")])
    billing = Agent("billing", model=provider)
    triage = Agent("triage", model=provider, handoffs=[Handoff(billing, on_handoff=refuse)])
    with caplog.at_level("WARNING", logger="lovia.runtime"):
        events = [e async for e in Runner.stream(triage, "go")]
    result = _completed(events)
    assert result.final_agent is triage and result.output == "stayed"
    assert not any(isinstance(e, HandoffOccurred) for e in events)
    failed = [e for e in events if isinstance(e, ToolCallFailed)]
    assert [str(e.error) for e in failed] == ["billing is closed"]
    outcome = next(e for e in result.entries if isinstance(e, ToolResultEntry))
    assert outcome.is_error and "billing is closed" in outcome.output
    assert any("handoff" in r.message and r.exc_info for r in caplog.records)


def _completed(events: list[Any]) -> Any:
    last = events[-1]
    assert isinstance(last, RunCompleted)
    return last.result


async def test_handoff_hooks_see_the_targets_prompt_on_the_context() -> None:
    seen: list[str] = []
    hooks = AgentHooks()
    hooks.on(HandoffOccurred)(lambda e, ctx: seen.append(ctx.system_prompt))
    provider = ScriptedProvider([call("transfer_to_b", {}), text("ok")])
    b = Agent("b", instructions="I am B.", model=provider, hooks=hooks)
    a = Agent("a", instructions="I am A.", model=provider, handoffs=[b])
    await Runner.run(a, "go")
    assert seen == ["I am B."]


async def test_each_agent_as_tool_call_gets_a_fresh_copy_of_the_budget() -> None:
    @tool
    async def lookup() -> str:
        """Looks something up."""
        return "found"

    child_provider = ScriptedProvider(
        [call("lookup", {}), text("one"), call("lookup", {}), text("two")]
    )
    child = Agent("helper", model=child_provider, tools=[lookup])
    provider = ScriptedProvider(
        [
            call("ask_helper", {"input": "first"}, call_id="q1"),
            call("ask_helper", {"input": "second"}, call_id="q2"),
            text("done"),
        ]
    )
    ask = child.as_tool(budget=RunBudget(max_tool_calls=1))
    result = await Runner.run(Agent("boss", model=provider, tools=[ask]), "go")
    outputs = [e.output for e in result.entries if isinstance(e, ToolResultEntry)]
    assert outputs == ["one", "two"]  # a shared budget would trip on the second call
