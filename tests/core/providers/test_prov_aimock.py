"""Reasoning and thinking against aimock, the mock whose reasoning and signed thinking
streams are SDK-valid: what streams out must go back in, signatures intact."""

from __future__ import annotations

import json
from typing import Any

import httpx
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import ModelSettings
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .conftest import Server
from .prov_helpers import assemble
from .prov_sdk_types import assert_valid
from .test_prov_requests import weather_tool

THINKING = ModelSettings(
    provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
)


def recording_client(sent: list[dict[str, Any]]) -> httpx.AsyncClient:
    """A real client that also keeps every request body it sends (aimock's journal stores
    a normalised form, not the bytes on the wire)."""

    async def keep(request: httpx.Request) -> None:
        sent.append(json.loads(request.content))

    return httpx.AsyncClient(event_hooks={"request": [keep]})


async def test_openai_reasoning_content_streams_as_reasoning(aimock: Server) -> None:
    provider = OpenAIChatProvider("o3-mini", base_url=aimock.url + "/v1")
    turn = assemble([d async for d in provider.stream([InputEntry("user", "think about it")])])
    await provider.aclose()
    assert turn.reasoning == "Let me think step by step about this."
    assert turn.text == "The answer is 42." and turn.finish == "stop"
    assert turn.order.index("ReasoningDelta") < turn.order.index("TextDelta")


async def test_openai_reasoning_is_replayed_with_the_tool_call(aimock: Server) -> None:
    sent: list[dict[str, Any]] = []
    client = recording_client(sent)
    provider = OpenAIChatProvider("o3-mini", base_url=aimock.url + "/v1", client=client)
    first = assemble(
        [
            d
            async for d in provider.stream(
                [InputEntry("user", "weather please")], tools=[weather_tool()]
            )
        ]
    )
    (call,) = first.calls.values()
    view: list[TranscriptEntry] = [
        InputEntry("user", "weather please"),
        ReasoningEntry(first.reasoning, provider="openai"),
        ToolCallEntry(call["id"], call["name"], call["arguments"]),
        ToolResultEntry(call["id"], "sunny"),
    ]
    second = assemble([d async for d in provider.stream(view, tools=[weather_tool()])])
    await client.aclose()
    assert first.reasoning == "I should call the weather tool." and first.finish == "tool_calls"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    assert second.text == "It is sunny in Paris."
    assistant = next(m for m in sent[1]["messages"] if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "I should call the weather tool."
    assert assistant["tool_calls"][0]["function"]["arguments"] == call["arguments"]


async def test_anthropic_thinking_round_trips_with_its_signature(aimock: Server) -> None:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    sent: list[dict[str, Any]] = []
    client = recording_client(sent)
    provider = AnthropicProvider("claude-sonnet-4-5", base_url=aimock.url, client=client)
    first = assemble(
        [
            d
            async for d in provider.stream(
                [InputEntry("user", "think about it")], settings=THINKING
            )
        ]
    )
    (thinking,) = first.reasoning_entries
    assert thinking.content == "Let me think step by step about this." == first.reasoning
    assert thinking.provider == "anthropic" and thinking.metadata == {
        "signature": "aimock-placeholder-signature"
    }
    assert first.text == "The answer is 42." and first.finish == "stop"

    view: list[TranscriptEntry] = [
        InputEntry("user", "think about it"),
        thinking,
        AssistantTextEntry(first.text),
        InputEntry("user", "hello"),
    ]
    second = assemble([d async for d in provider.stream(view, settings=THINKING)])
    await client.aclose()
    assert second.text == "Hello from aimock!"
    body = sent[1]
    assert_valid(MessageCreateParamsStreaming, body)
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Let me think step by step about this.",
        "signature": "aimock-placeholder-signature",
    }


async def test_responses_reasoning_item_and_tool_call(aimock: Server) -> None:
    provider = OpenAIResponsesProvider("o3-mini", base_url=aimock.url + "/v1")
    turn = assemble(
        [
            d
            async for d in provider.stream(
                [InputEntry("user", "weather please")], tools=[weather_tool()]
            )
        ]
    )
    await provider.aclose()
    assert turn.reasoning == "I should call the weather tool."
    (entry,) = turn.reasoning_entries
    assert entry.provider == "openai-responses" and entry.id and entry.content == turn.reasoning
    (call,) = turn.calls.values()
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris"}
    assert turn.finish == "tool_calls"
