"""End to end: Runner.run / Runner.stream with the real adapters against llmock and aimock
(text, a tool round trip, structured output, reasoning/thinking, usage, faults)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest
from lovia import Agent, NoopContextPolicy, Runner, tool
from lovia.events import OutputDiscarded, RunCompleted, TextDelta
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import ModelSettings, Provider
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.retry import RetryPolicy
from lovia.transcript import AssistantTextEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry
from pydantic import BaseModel

from .conftest import Server
from .test_prov_llmock import journal, replayed_arguments, scenario


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"21C in {city}"


def make_agent(**kw: Any) -> Agent[Any]:
    # No compaction: its recall tool would be offered, and llmock calls offered tools.
    return Agent(name="a", context_policy=NoopContextPolicy(), **kw)


class Forecast(BaseModel):
    city: str
    celsius: int


class FakeSleep:
    """Records requested waits instead of sleeping (RetryPolicy(sleep=...))."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


_opened: list[Any] = []


@pytest.fixture(autouse=True)
async def _close_providers() -> AsyncIterator[None]:
    # Runner never closes a provider instance the caller passed in: the test owns them.
    yield
    while _opened:
        await _opened.pop().aclose()


def llmock_provider(kind: str, server: Server, **kw: Any) -> Provider:
    provider: Any
    if kind == "openai":
        provider = OpenAIChatProvider("gpt-4o-mini", base_url=server.url + "/v1", api_key="k", **kw)
    elif kind == "responses":
        provider = OpenAIResponsesProvider(
            "gpt-4o-mini", base_url=server.url + "/v1", api_key="k", **kw
        )
    else:
        provider = AnthropicProvider(
            "claude-x", base_url=server.url + "/anthropic", api_key="k", **kw
        )
    _opened.append(provider)
    return cast(Provider, provider)


KINDS = ["openai", "anthropic", "responses"]


@pytest.mark.parametrize("kind", KINDS)
async def test_run_text_with_usage(llmock: Server, kind: str) -> None:
    agent = make_agent(instructions="Be brief.", model=llmock_provider(kind, llmock))
    result = await Runner.run(agent, "hi")
    assert isinstance(result.output, str) and result.output
    assert result.usage.output_tokens > 0 and result.turns == 1, result.entries


@pytest.mark.parametrize("kind", KINDS)
async def test_run_tool_round_trip(llmock: Server, kind: str) -> None:
    agent = make_agent(
        instructions="Use tools.", model=llmock_provider(kind, llmock), tools=[get_weather]
    )
    result = await Runner.run(agent, "What is the weather in Paris?")
    calls = [e for e in result.entries if isinstance(e, ToolCallEntry)]
    results = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert [c.name for c in calls] == ["get_weather"] and results[0].output.startswith("21C in ")
    assert results[0].call_id == calls[0].call_id and result.output
    bodies = [r["body"] for r in journal(llmock)]
    assert len(bodies) == 2
    replayed = replayed_arguments(bodies[1], calls[0].call_id)
    if kind == "anthropic":  # an object on this wire
        assert json.loads(replayed) == json.loads(calls[0].arguments)
    else:  # byte for byte
        assert replayed == calls[0].arguments


@pytest.mark.parametrize("kind", KINDS)
async def test_stream_text_deltas_and_completion(llmock: Server, kind: str) -> None:
    agent = make_agent(model=llmock_provider(kind, llmock))
    handle = Runner.stream(agent, "hi")
    text = ""
    completed = 0
    async for event in handle:
        if isinstance(event, TextDelta):
            text += event.delta
        completed += isinstance(event, RunCompleted)
    result = await handle
    assert completed == 1 and text == result.output


async def test_structured_output_native_openai(llmock: Server) -> None:
    provider = llmock_provider("openai", llmock, supports_json_schema=True)
    result = await Runner.run(
        make_agent(model=provider, output_type=Forecast), "Forecast for Paris"
    )
    assert isinstance(result.output, Forecast)
    assert "response_format" in journal(llmock)[0]["body"]


async def test_structured_output_prompt_fallback_anthropic(llmock: Server) -> None:
    scenario(llmock, {"type": "reply", "text": '{"city": "Paris", "celsius": 21}'})
    result = await Runner.run(
        make_agent(model=llmock_provider("anthropic", llmock), output_type=Forecast),
        "Forecast for Paris",
    )
    assert result.output == Forecast(city="Paris", celsius=21)
    body = journal(llmock)[0]["body"]
    assert "response_format" not in body and "Paris" not in json.dumps(body.get("tools", []))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_429_is_retried_after_retry_after(llmock: Server, kind: str) -> None:
    scenario(llmock, {"type": "fail", "status": 429, "retry_after": 2})
    sleep = FakeSleep()
    agent = make_agent(model=llmock_provider(kind, llmock), retry=RetryPolicy(sleep=sleep))
    result = await Runner.run(agent, "hi")
    assert result.output and sleep.waits == [2.0]
    assert [r["status"] for r in journal(llmock)] == [429, 200]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fault", ["truncate", "disconnect", "malformed"])
async def test_broken_stream_is_discarded_and_restreamed(
    llmock: Server, kind: str, fault: str
) -> None:
    scenario(llmock, {"type": "stream_fault", "kind": fault, "after_chunks": 3})
    agent = make_agent(model=llmock_provider(kind, llmock), retry=RetryPolicy(sleep=FakeSleep()))
    handle = Runner.stream(agent, "hi")
    events = [e async for e in handle]
    result = await handle
    texts = [e for e in result.entries if isinstance(e, AssistantTextEntry)]
    assert len(texts) == 1 and texts[0].content == result.output  # no half turn in the transcript
    assert len(journal(llmock)) == 2
    streamed = "".join(e.delta for e in events if isinstance(e, TextDelta))
    if any(isinstance(e, OutputDiscarded) for e in events):
        assert streamed.endswith(result.output)
    else:
        assert streamed == result.output


async def test_anthropic_thinking_lands_in_the_transcript_with_its_signature(
    aimock: Server,
) -> None:
    provider = AnthropicProvider("claude-sonnet-4-5", base_url=aimock.url)
    settings = ModelSettings(
        provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
    )
    result = await Runner.run(make_agent(model=provider, settings=settings), "think about it")
    await provider.aclose()
    (reasoning,) = [e for e in result.entries if isinstance(e, ReasoningEntry)]
    assert reasoning.content == "Let me think step by step about this."
    assert (
        reasoning.provider == "anthropic"
        and reasoning.metadata["signature"] == "aimock-placeholder-signature"
    )
    assert result.output == "The answer is 42."


async def test_openai_reasoning_with_a_tool_round_trip(aimock: Server) -> None:
    sent: list[dict[str, Any]] = []

    async def keep(request: httpx.Request) -> None:
        sent.append(json.loads(request.content))

    client = httpx.AsyncClient(event_hooks={"request": [keep]})
    provider = OpenAIChatProvider("o3-mini", base_url=aimock.url + "/v1", client=client)
    result = await Runner.run(make_agent(model=provider, tools=[get_weather]), "weather please")
    await client.aclose()
    reasoning = [e for e in result.entries if isinstance(e, ReasoningEntry)]
    assert reasoning and reasoning[0].content == "I should call the weather tool."
    assert result.output == "It is sunny in Paris."
    replayed = [m for m in sent[1]["messages"] if m["role"] == "assistant"]
    assert replayed[0].get("reasoning_content") == "I should call the weather tool."


@pytest.mark.parametrize(
    ("spec", "env"),
    [("openai:gpt-4o-mini", "OPENAI_BASE_URL"), ("claude:claude-x", "ANTHROPIC_BASE_URL")],
)
async def test_a_model_string_builds_the_provider_from_the_environment(
    llmock: Server, monkeypatch: pytest.MonkeyPatch, spec: str, env: str
) -> None:
    monkeypatch.setenv(env, llmock.url + ("/v1" if env.startswith("OPENAI") else "/anthropic"))
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    result = await Runner.run(make_agent(model=spec), "hi")
    assert result.output
    (request,) = journal(llmock)
    assert request["model"] == spec.split(":", 1)[1]


async def test_llmock_verdict_is_clean_for_real_retries(llmock: Server) -> None:
    """llmock grades the client from its own timing: Retry-After honoured, no truncated stream
    accepted, no retry of a final error."""
    scenario(
        llmock,
        {"type": "fail", "status": 429, "retry_after": 0.2},
        {"type": "stream_fault", "kind": "truncate", "after_chunks": 2},
    )
    agent = make_agent(
        model=llmock_provider("openai", llmock), retry=RetryPolicy(backoff_base=0.05)
    )
    result = await Runner.run(agent, "hi")
    assert result.output
    verdict = httpx.get(llmock.url + "/_llmock/verdict", timeout=10).json()
    assert [r["status"] for r in journal(llmock)] == [429, 200, 200]
    assert verdict["passed"] is True and verdict["errors"] == 0 and verdict["warnings"] == 0, (
        verdict
    )
    assert verdict["faults_injected"] == 2
