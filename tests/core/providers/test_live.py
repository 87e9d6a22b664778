"""Live provider checks against the endpoint ``LOVIA_LIVE_MODEL`` names (opt-in).

Run with ``LOVIA_LIVE_TESTS=1 uv run pytest -m live_provider``; docs/live-tests.md lists
what each test checks and costs. The assertions hold for any competent model (a tool was
called with valid arguments, the output parses), never for exact wording; what an endpoint
cannot do is a skip that says so, never a pass.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from lovia import Agent, Runner, tool
from lovia.events import (
    MessageCompleted,
    ReasoningDelta,
    RunCompleted,
    TextDelta,
)
from lovia.exceptions import ProviderError
from lovia.messages import Usage
from lovia.providers.base import ModelSettings
from lovia.tools.base import Tool
from lovia.transcript import ReasoningEntry, ToolCallEntry, ToolResultEntry
from pydantic import BaseModel

from tests.live_support import (
    LiveEndpoint,
    claimed_window,
    declared,
    lift_network_guard,  # noqa: F401 - fixture: the endpoint may be remote
    live_fixture,  # noqa: F401 - fixture `live`
    skip_if_rejected,
    step,
)

pytestmark = pytest.mark.live_provider

WRONG_KEY = "sk-lovia-live-tests-wrong-key"


def weather_tool(calls: list[str]) -> Tool:
    """``get_weather(city)``; each call's validated ``city`` is appended to ``calls``."""

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city.

        Args:
            city: The city name, e.g. "Paris".
        """
        calls.append(city)
        return f"21C and sunny in {city}"

    return get_weather


def weather_agent(live: LiveEndpoint, calls: list[str]) -> Agent[None]:
    return Agent(
        "live",
        instructions="Answer weather questions with the get_weather tool.",
        model=live.provider(),
        tools=[weather_tool(calls)],
    )


class CityFact(BaseModel):
    city: str
    country: str


EXTRACT = "Extract the city and country: the Eiffel Tower is in Paris, France."


async def test_plain_answer(live: LiveEndpoint) -> None:
    agent: Agent[None] = Agent("live", instructions="Be brief.", model=live.provider())
    with step(live, "plain answer"):
        result = await Runner.run(agent, "Reply with one short sentence saying hello.")
        assert isinstance(result.output, str) and result.output.strip()
        assert result.finish_reason == "stop"
        assert result.turns == 1, result.entries


async def test_streamed_answer_arrives_in_deltas_before_the_end(live: LiveEndpoint) -> None:
    agent: Agent[None] = Agent("live", instructions="Be brief.", model=live.provider())
    with step(live, "streamed answer"):
        handle = Runner.stream(agent, "Count from one to twenty in words, separated by spaces.")
        kinds: list[str] = []
        deltas: list[str] = []
        async for event in handle:
            kinds.append(type(event).__name__)
            if isinstance(event, TextDelta):
                deltas.append(event.delta)
        result = await handle.result()
        assert len(deltas) >= 2, f"the answer came in {len(deltas)} delta(s): {kinds}"
        assert kinds.index(TextDelta.__name__) < kinds.index(MessageCompleted.__name__)
        assert kinds[-1] == RunCompleted.__name__
        assert "".join(deltas) == result.output and result.output.strip()


async def test_one_tool_call_with_valid_arguments(live: LiveEndpoint) -> None:
    calls: list[str] = []
    agent = weather_agent(live, calls)
    with step(live, "one tool call"):
        result = await Runner.run(agent, "What is the weather in Paris? Use the get_weather tool.")
        assert calls, "the model never called get_weather"
        assert all("paris" in city.lower() for city in calls), calls
        results = [e for e in result.entries if isinstance(e, ToolResultEntry)]
        assert results and not any(e.is_error for e in results)
        assert isinstance(result.output, str) and result.output.strip()


async def test_several_tool_calls_in_one_turn(live: LiveEndpoint) -> None:
    calls: list[str] = []
    agent = weather_agent(live, calls)
    with step(live, "parallel tool calls"):
        result = await Runner.run(
            agent,
            "Use the get_weather tool to get the weather in Paris and in Tokyo. Call it for "
            "both cities at once, in parallel, in a single turn.",
        )
        cities = {city.lower() for city in calls}
        assert any("paris" in c for c in cities) and any("tokyo" in c for c in cities), calls
        first_turn: list[ToolCallEntry] = []
        for entry in result.entries:
            if isinstance(entry, ToolResultEntry):
                break
            if isinstance(entry, ToolCallEntry):
                first_turn.append(entry)
        assert len(first_turn) >= 2, f"one call per turn, not in parallel: {result.entries}"
        assert all(isinstance(json.loads(c.arguments)["city"], str) for c in first_turn)


def _structured_agent(
    live: LiveEndpoint, bodies: list[dict[str, Any]], **options: Any
) -> Agent[None]:
    provider = live.provider(client=live.recording_client(bodies), **options)
    return Agent(
        "live",
        instructions="Extract facts from the user's text.",
        model=provider,
        output_type=CityFact,
    )


async def test_structured_output_native(live: LiveEndpoint) -> None:
    if live.anthropic:
        pytest.skip("the Anthropic adapter has no native structured output (prompt fallback)")
    bodies: list[dict[str, Any]] = []
    agent = _structured_agent(live, bodies, supports_json_schema=True)
    with step(live, "native structured output"):
        try:
            result = await Runner.run(agent, EXTRACT)
        except ProviderError as exc:
            skip_if_rejected(exc, "response_format", "native structured output")
            raise
        assert isinstance(result.output, CityFact)
        assert result.output.city.strip() and result.output.country.strip()
        assert bodies and all(b["response_format"]["type"] == "json_schema" for b in bodies)


async def test_structured_output_prompt_fallback(live: LiveEndpoint) -> None:
    bodies: list[dict[str, Any]] = []
    options: dict[str, Any] = {} if live.anthropic else {"supports_json_schema": False}
    agent = _structured_agent(live, bodies, **options)
    with step(live, "structured output, prompt fallback"):
        result = await Runner.run(agent, EXTRACT)
        assert isinstance(result.output, CityFact)
        assert result.output.city.strip() and result.output.country.strip()
        assert bodies and not any("response_format" in b for b in bodies)
        assert "# Output format" in json.dumps(bodies[0])


async def test_reasoning_when_the_model_has_it(live: LiveEndpoint) -> None:
    settings = ModelSettings(
        provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
        if live.anthropic
        else {}
    )
    agent: Agent[None] = Agent("live", model=live.provider(), settings=settings)
    with step(live, "reasoning"):
        handle = Runner.stream(agent, "Think step by step: what is 17 times 23?")
        reasoning = [e.delta async for e in handle if isinstance(e, ReasoningDelta)]
        try:
            result = await handle.result()
        except ProviderError as exc:
            if not declared("LOVIA_LIVE_REASONING"):
                skip_if_rejected(exc, "thinking", "extended thinking")
            raise
        entries = [e for e in result.entries if isinstance(e, ReasoningEntry)]
        if not reasoning and not entries and not declared("LOVIA_LIVE_REASONING"):
            pytest.skip(
                f"the endpoint returned no reasoning for {live.spec} (the model has none, or "
                "the endpoint does not expose it); set LOVIA_LIVE_REASONING=1 to require it"
            )
        assert "".join(reasoning).strip(), "no reasoning streamed"
        assert entries and all(e.content.strip() for e in entries)
        assert isinstance(result.output, str) and result.output.strip()


LONG_PREFIX = "\n".join(
    f"Rule {i}: when asked about topic {i}, answer politely, briefly and only with facts "
    f"you are sure of; never invent figures, names or dates about topic {i}."
    for i in range(1, 80)
)
"""A stable ~2.5k-token system prompt: long enough for prompt caching where the endpoint has it."""


def _assert_sane(usage: Usage) -> None:
    assert usage.requests == 1, usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0, usage
    assert usage.cache_read_tokens >= 0 and usage.cache_write_tokens >= 0, usage
    # The cache fields subdivide the prompt: they can never exceed it.
    assert usage.cache_read_tokens + usage.cache_write_tokens <= usage.input_tokens, usage


async def test_usage_and_cache_counts_are_sane(live: LiveEndpoint) -> None:
    options: dict[str, Any] = {"cache_system": True} if live.anthropic else {}
    agent: Agent[None] = Agent("live", instructions=LONG_PREFIX, model=live.provider(**options))
    with step(live, "usage and cache counts"):
        first = await Runner.run(agent, "Reply with the single word: ok.")
        second = await Runner.run(agent, "Reply with the single word: ok.")
        _assert_sane(first.usage)
        _assert_sane(second.usage)
        assert first.last_input_tokens == first.usage.input_tokens
        # Roughly the same prompt twice: the counts must agree within reason.
        assert 0.5 <= second.usage.input_tokens / first.usage.input_tokens <= 2.0


async def test_a_wrong_key_raises_the_typed_auth_error(live: LiveEndpoint) -> None:
    agent: Agent[None] = Agent("live", model=live.provider(api_key=WRONG_KEY))
    with step(live, "wrong API key"):
        try:
            await Runner.run(agent, "Reply with the single word: ok.")
        except ProviderError as exc:
            assert exc.status_code in (401, 403), exc
            assert not exc.retryable
            assert exc.hint and "key" in exc.hint.lower()
            return
        pytest.skip("the endpoint accepted a wrong API key: it checks no keys")


async def test_window_discovery(live: LiveEndpoint) -> None:
    provider = live.provider()
    with step(live, "context-window discovery"):
        window = await claimed_window(provider)
        if window is None:
            pytest.skip(
                f"the endpoint's /models states no context window for {provider.model!r} and "
                "lovia's table has none for this host: the endpoint lacks window discovery"
            )
        assert isinstance(window, int) and 1_000 <= window <= 20_000_000, window
