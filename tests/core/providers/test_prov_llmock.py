"""The adapters against llmock, a real server speaking the OpenAI and Anthropic wire formats,
with its fault injection (HTTP errors, truncated, dropped and corrupted streams)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from lovia.exceptions import ContextOverflowError, ProviderError
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import ModelDelta, Provider
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

from .conftest import Server
from .prov_helpers import Turn, assemble
from .prov_sdk_types import assert_valid
from .test_prov_requests import weather_tool

Factory = Callable[[Server], Provider]


def openai_chat(server: Server) -> Provider:
    return OpenAIChatProvider("gpt-4o-mini", base_url=server.url + "/v1", api_key="test-key")


def anthropic(server: Server) -> Provider:
    return AnthropicProvider("claude-x", base_url=server.url + "/anthropic", api_key="test-key")


def responses(server: Server) -> Provider:
    return OpenAIResponsesProvider("gpt-4o-mini", base_url=server.url + "/v1", api_key="test-key")


ADAPTERS = [
    pytest.param(openai_chat, id="openai"),
    pytest.param(anthropic, id="anthropic"),
    pytest.param(responses, id="responses"),
]


def scenario(server: Server, *behaviors: dict[str, Any]) -> None:
    httpx.post(
        server.url + "/_llmock/scenario", json={"behaviors": list(behaviors)}, timeout=10
    ).raise_for_status()


def journal(server: Server) -> list[dict[str, Any]]:
    data = httpx.get(server.url + "/_llmock/requests", timeout=10).json()
    requests: list[dict[str, Any]] = data["requests"]
    return requests


async def collect(
    provider: Provider, entries: list[TranscriptEntry], **kwargs: Any
) -> list[ModelDelta]:
    try:
        return [d async for d in provider.stream(entries, **kwargs)]
    finally:
        await provider.aclose()  # type: ignore[attr-defined]


async def run(provider: Provider, entries: list[TranscriptEntry], **kwargs: Any) -> Turn:
    return assemble(await collect(provider, entries, **kwargs))


@pytest.mark.parametrize("make", ADAPTERS)
async def test_text_reply_with_usage(llmock: Server, make: Factory) -> None:
    turn = await run(make(llmock), [InputEntry("system", "Be brief."), InputEntry("user", "hi")])
    assert turn.text and turn.finish == "stop"
    assert turn.usage is not None and turn.usage.output_tokens > 0
    (request,) = journal(llmock)
    assert request["completed"] and request["status"] == 200


@pytest.mark.parametrize("make", ADAPTERS)
async def test_tool_round_trip(llmock: Server, make: Factory) -> None:
    tools = [weather_tool()]
    first = await run(
        make(llmock), [InputEntry("user", "What is the weather in Paris?")], tools=tools
    )
    assert first.finish == "tool_calls"
    (call,) = first.calls.values()
    assert call["name"] == "get_weather" and "city" in json.loads(call["arguments"])
    view: list[TranscriptEntry] = [
        InputEntry("user", "What is the weather in Paris?"),
        ToolCallEntry(call["id"], call["name"], call["arguments"]),
        ToolResultEntry(call["id"], "21C and sunny"),
    ]
    second = await run(make(llmock), view, tools=tools)
    assert second.text and second.finish == "stop" and not second.calls
    replayed = replayed_arguments(journal(llmock)[-1]["body"], call["id"])
    if make is anthropic:  # an object on this wire
        assert json.loads(replayed) == json.loads(call["arguments"])
    else:  # byte for byte
        assert replayed == call["arguments"]


def replayed_arguments(body: dict[str, Any], call_id: str) -> str:
    """The arguments a request body sends back for ``call_id``, as JSON text."""
    if "input" in body:  # Responses
        (item,) = [i for i in body["input"] if i.get("type") == "function_call"]
        assert item["call_id"] == call_id
        return str(item["arguments"])
    blocks = [
        b
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    if blocks:  # Anthropic
        (use,) = blocks
        assert use["id"] == call_id
        return json.dumps(use["input"])
    (tool_call,) = [tc for m in body["messages"] for tc in m.get("tool_calls") or ()]
    assert tool_call["id"] == call_id
    return str(tool_call["function"]["arguments"])  # Chat


async def test_journal_bodies_validate_against_the_sdk_types(llmock: Server) -> None:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    view: list[TranscriptEntry] = [
        InputEntry("system", "s"),
        InputEntry("user", "What is the weather in Paris?"),
    ]
    await run(openai_chat(llmock), view, tools=[weather_tool()])
    await run(anthropic(llmock), view, tools=[weather_tool()])
    chat, messages = (r["body"] for r in journal(llmock))
    assert_valid(CompletionCreateParamsStreaming, chat)
    assert_valid(MessageCreateParamsStreaming, messages)


@pytest.mark.parametrize("make", ADAPTERS)
async def test_429_is_retryable_with_retry_after(llmock: Server, make: Factory) -> None:
    scenario(llmock, {"type": "fail", "status": 429, "retry_after": 2})
    with pytest.raises(ProviderError) as info:
        await run(make(llmock), [InputEntry("user", "hi")])
    err = info.value
    assert (err.status_code, err.retryable, err.retry_after) == (429, True, 2.0)
    assert err.hint and "Retry-After" in err.hint


async def test_anthropic_529_overloaded_is_retryable(llmock: Server) -> None:
    scenario(llmock, {"type": "fail", "status": 529})
    with pytest.raises(ProviderError) as info:
        await run(anthropic(llmock), [InputEntry("user", "hi")])
    assert info.value.status_code == 529 and info.value.retryable
    assert "Service overloaded" in str(info.value)


@pytest.mark.parametrize("make", ADAPTERS)
async def test_400_is_not_retryable(llmock: Server, make: Factory) -> None:
    scenario(llmock, {"type": "fail", "status": 400, "message": "bad field"})
    with pytest.raises(ProviderError) as info:
        await run(make(llmock), [InputEntry("user", "hi")])
    assert not info.value.retryable and not isinstance(info.value, ContextOverflowError)


@pytest.mark.parametrize("make", ADAPTERS)
@pytest.mark.parametrize("kind", ["truncate", "disconnect", "malformed"])
async def test_broken_streams_raise_retryable_errors_and_never_finish(
    llmock: Server, make: Factory, kind: str
) -> None:
    scenario(llmock, {"type": "stream_fault", "kind": kind, "after_chunks": 2})
    deltas: list[ModelDelta] = []
    provider = make(llmock)
    with pytest.raises(ProviderError) as info:
        async for delta in provider.stream([InputEntry("user", "hi")]):
            deltas.append(delta)
    await provider.aclose()  # type: ignore[attr-defined]
    assert info.value.retryable, kind
    assert info.value.hint
    assert all(type(d).__name__ != "FinishDelta" for d in deltas)  # the half turn never completes
    (request,) = journal(llmock)
    assert request["fault"].startswith("stream:" + kind)


async def test_openai_context_overflow_reports_the_window(llmock: Server) -> None:
    scenario(
        llmock,
        {
            "type": "fail",
            "status": 400,
            "code": "context_length_exceeded",
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9001 tokens.",
        },
    )
    with pytest.raises(ContextOverflowError) as info:
        await run(openai_chat(llmock), [InputEntry("user", "hi")])
    assert info.value.reported_window == 8192 and not info.value.retryable


async def test_anthropic_context_overflow_through_a_gateway(llmock: Server) -> None:
    scenario(
        llmock,
        {
            "type": "fail",
            "status": 400,
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    )
    with pytest.raises(ContextOverflowError) as info:
        await run(anthropic(llmock), [InputEntry("user", "hi")])
    assert info.value.reported_window == 200_000
