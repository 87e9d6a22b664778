"""Structured output (native vs prompt fallback, repair) and guardrails in the run loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.exceptions import (
    GuardrailTripped,
    MaxTurnsExceeded,
    OutputValidationError,
    UserError,
)
from lovia.messages import Message
from lovia.stores.memory import InMemorySession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry


@dataclass
class City:
    name: str
    population: int


GOOD = '{"name": "Oslo", "population": 700000}'


async def test_typed_output_is_parsed_and_validated() -> None:
    provider = ScriptedProvider([text(GOOD)])
    result = await Runner.run(Agent("o", model=provider, output_type=City), "go")
    assert result.output == City("Oslo", 700000)


async def test_non_native_provider_gets_an_output_format_block_and_no_tool() -> None:
    provider = ScriptedProvider([text(GOOD)])
    await Runner.run(Agent("o", instructions="Base.", model=provider, output_type=City), "go")
    system = provider.calls[0][0]
    assert isinstance(system.content, str)
    assert system.content.startswith("Base.\n\n# Output format")
    assert provider.response_formats == [None]
    assert not any("final" in name for name in provider.tools[0])


async def test_native_provider_gets_a_response_format_and_a_plain_prompt() -> None:
    provider = ScriptedProvider([text(GOOD)], supports_json_schema=True)
    await Runner.run(Agent("o", instructions="Base.", model=provider, output_type=City), "go")
    assert provider.calls[0][0] == Message("system", "Base.")
    fmt = provider.response_formats[0]
    assert fmt is not None and fmt["type"] == "json_schema"


async def test_lenient_parsing_accepts_fenced_json() -> None:
    provider = ScriptedProvider([text(f"Here you go:\n```json\n{GOOD}\n```")])
    result = await Runner.run(Agent("o", model=provider, output_type=City), "go")
    assert result.output.name == "Oslo"


async def test_invalid_output_gets_one_repair_turn() -> None:
    provider = ScriptedProvider([text("not json at all"), text(GOOD)])
    result = await Runner.run(Agent("o", model=provider, output_type=City), "go")
    assert result.output == City("Oslo", 700000)
    assert result.turns == 2
    repair = result.entries[2]
    assert isinstance(repair, InputEntry) and repair.role == "user"
    assert provider.calls[1][-1].role == "user"


async def test_a_second_invalid_output_raises() -> None:
    provider = ScriptedProvider([text("bad"), text("still bad")])
    with pytest.raises(OutputValidationError) as info:
        await Runner.run(Agent("o", model=provider, output_type=City), "go")
    assert info.value.output_type_name


async def test_output_repair_false_raises_at_once() -> None:
    provider = ScriptedProvider([text("bad"), text(GOOD)])
    with pytest.raises(OutputValidationError):
        await Runner.run(Agent("o", model=provider, output_type=City, output_repair=False), "go")
    assert len(provider.calls) == 1


async def test_repair_turns_count_toward_max_turns() -> None:
    provider = ScriptedProvider([text("bad"), text(GOOD)])
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(Agent("o", model=provider, output_type=City), "go", max_turns=1)


async def test_empty_typed_reply_goes_through_repair() -> None:
    provider = ScriptedProvider([text(""), text(GOOD)])
    result = await Runner.run(Agent("o", model=provider, output_type=City), "go")
    assert result.output.population == 700000


async def test_custom_repair_strategy_returning_none_stops() -> None:
    class Never:
        def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
            return None

    provider = ScriptedProvider([text("bad"), text(GOOD)])
    with pytest.raises(OutputValidationError):
        await Runner.run(Agent("o", model=provider, output_type=City, output_repair=Never()), "go")


async def test_run_level_output_type_str_forces_text() -> None:
    provider = ScriptedProvider([text("plain words")])
    result = await Runner.run(Agent("o", model=provider, output_type=City), "go", output_type=str)
    assert result.output == "plain words"


async def test_run_level_output_type_overrides_the_agents() -> None:
    provider = ScriptedProvider([text("42")])
    result = await Runner.run(Agent("o", model=provider), "go", output_type=int)
    assert result.output == 42


# -- guardrails -------------------------------------------------------------------------


async def test_input_guardrail_sees_the_initial_chat_view_and_can_trip() -> None:
    seen: list[list[Message]] = []

    def check(messages: list[Message], ctx: RunContext[Any]) -> str | None:
        seen.append(messages)
        return "no secrets" if "password" in str(messages[-1].content) else None

    provider = ScriptedProvider([text("never")])
    agent = Agent("g", instructions="Sys.", model=provider, input_guardrails=[check])
    with pytest.raises(GuardrailTripped, match="no secrets"):
        await Runner.run(agent, "my password is hunter2")
    assert [m.role for m in seen[0]] == ["system", "user"]
    assert len(provider.calls) == 0


async def test_passing_input_guardrail_lets_the_run_proceed() -> None:
    provider = ScriptedProvider([text("ok")])
    agent = Agent("g", model=provider, input_guardrails=[lambda m, ctx: None])
    assert (await Runner.run(agent, "hi")).output == "ok"


async def test_output_guardrail_runs_on_the_validated_output() -> None:
    seen: list[Any] = []

    async def check(output: Any, ctx: RunContext[Any]) -> bool:
        seen.append(output)
        return bool(output.population > 1_000_000)

    provider = ScriptedProvider([text(GOOD)])
    agent = Agent("g", model=provider, output_type=City, output_guardrails=[check])
    result = await Runner.run(agent, "go")
    assert seen == [City("Oslo", 700000)]
    assert result.output.name == "Oslo"


async def test_output_guardrail_trip_ends_the_run() -> None:
    provider = ScriptedProvider([text("rude words")])
    agent = Agent("g", model=provider, output_guardrails=[lambda out, ctx: True])
    with pytest.raises(GuardrailTripped):
        await Runner.run(agent, "go")


async def test_input_guardrails_run_once_on_system_history_and_input() -> None:
    session = InMemorySession()
    first = Agent("g", instructions="Sys.", model=ScriptedProvider([text("earlier")]))
    await Runner.run(first, "before", session=session, session_id="s")
    seen: list[list[Message]] = []
    turns: list[int] = []

    def check(messages: list[Message], ctx: RunContext[Any]) -> None:
        seen.append(messages)
        turns.append(ctx.turn)

    @tool
    async def noop() -> str:
        """Does nothing."""
        return "ok"

    provider = ScriptedProvider([call("noop", {}), text("later")])
    agent = first.clone(model=provider, tools=[noop], input_guardrails=[check])
    await Runner.run(agent, "now", session=session, session_id="s")
    assert seen == [
        [
            Message("system", "Sys."),
            Message("user", "before"),
            Message("assistant", "earlier"),
            Message("user", "now"),
        ]
    ]
    assert turns == [0]  # before the first turn


def test_a_bad_output_repair_fails_when_the_agent_is_built() -> None:
    with pytest.raises(UserError) as info:
        Agent(name="a", output_repair="yes")  # type: ignore[arg-type]  # deliberately wrong
    assert "build_prompt" in (info.value.hint or "")
