"""Request bodies: equal to the captured ones, and valid against the official SDK types."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from lovia.parts import FilePart, ImagePart, TextPart
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import ModelSettings
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.tools.base import Tool
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .prov_helpers import WIRE
from .prov_sdk_types import assert_valid, unknown_keys

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()
LOCAL = "http://127.0.0.1:9/v1"


async def _noop(args: dict[str, Any], ctx: Any) -> Any:
    return None


def weather_tool() -> Tool:
    return Tool(
        name="get_weather",
        description="Get weather",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        invoke=_noop,
    )


def rich_view(provider: str) -> list[TranscriptEntry]:
    """Every kind of entry, including parts, parallel calls, an error and image results."""
    return [
        InputEntry("system", "You are terse."),
        InputEntry(
            "user",
            (
                TextPart("Look:"),
                ImagePart(data=PNG, mime_type="image/png"),
                FilePart(data=PDF, mime_type="application/pdf", filename="a.pdf"),
            ),
        ),
        ReasoningEntry(
            "thinking hard",
            provider=provider,
            metadata={"signature": "sig-1", "encrypted_content": "enc", "item_id": "rs_1"},
            id="rs_1",
        ),
        AssistantTextEntry("Checking."),
        ToolCallEntry("call_1", "get_weather", '{"city":  "Paris"}'),
        ToolCallEntry("call_2", "get_weather", '{"city":"Rome"}'),
        ToolResultEntry(
            "call_1", "sunny", parts=(TextPart("sunny"), ImagePart(data=PNG, mime_type="image/png"))
        ),
        ToolResultEntry("call_2", "boom", is_error=True),
        AssistantTextEntry("Paris is sunny."),
        InputEntry("user", "thanks"),
    ]


def _strictly_valid(tp: Any, body: dict[str, Any]) -> None:
    assert_valid(tp, json.loads(json.dumps(body)))


def _openai_adapter() -> Any:
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    return CompletionCreateParamsStreaming


def _anthropic_adapter() -> Any:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    return MessageCreateParamsStreaming


def _responses_adapter() -> Any:
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    return ResponseCreateParamsStreaming


REQUESTS = sorted(WIRE.glob("*.request.json"))


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: p.stem)
def test_lovia_builds_the_captured_request_byte_for_byte(path: Path) -> None:
    captured = json.loads(path.read_text())
    tools = [weather_tool()] if "tools" in captured else []
    question = captured["messages"][0]["content"]
    options = {"tool_choice": captured["tool_choice"]} if "tool_choice" in captured else {}
    if "anthropic" in path.name:
        settings = ModelSettings(
            max_tokens=captured["max_tokens"], provider_options={"anthropic": options}
        )
        body = AnthropicProvider(captured["model"], base_url="http://127.0.0.1:9").build_request(
            [InputEntry("user", question)], tools=tools, settings=settings
        )
    else:
        settings = ModelSettings(
            temperature=captured["temperature"],
            max_tokens=captured["max_tokens"],
            provider_options={"openai": options},
        )
        body = OpenAIChatProvider(captured["model"], base_url=LOCAL).build_request(
            [InputEntry("user", question)], tools=tools, settings=settings
        )
    assert body == captured


RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True},
}
FULL_SETTINGS = ModelSettings(
    temperature=0.2, top_p=0.9, max_tokens=100, stop=("END",), parallel_tool_calls=False
)


@pytest.mark.parametrize("official", [True, False], ids=["official", "compatible"])
def test_openai_chat_bodies_validate_against_the_sdk_types(official: bool) -> None:
    base = None if official else LOCAL
    provider = OpenAIChatProvider(
        "gpt-4o", api_key="k", base_url=base, supports_vision=True, replay_reasoning=False
    )
    body = provider.build_request(
        rich_view("openai"),
        tools=[weather_tool()],
        response_format=RESPONSE_FORMAT,
        settings=FULL_SETTINGS,
    )
    _strictly_valid(_openai_adapter(), body)
    assert ("max_completion_tokens" in body) is official and ("max_tokens" in body) is not official
    assert ("response_format" in body) is official


def test_openai_chat_replayed_reasoning_is_the_only_extension_key() -> None:
    provider = OpenAIChatProvider(
        "deepseek-chat", base_url="https://api.deepseek.com/v1", api_key="k"
    )
    body = provider.build_request(rich_view("openai"), tools=[weather_tool()])
    carriers = [m for m in body["messages"] if "reasoning_content" in m]
    assert [m["reasoning_content"] for m in carriers] == ["thinking hard"]
    for m in carriers:
        del m["reasoning_content"]  # a DeepSeek/compatible extension the SDK types do not list
    _strictly_valid(_openai_adapter(), body)


@pytest.mark.parametrize("cache_system", [False, True])
def test_anthropic_bodies_validate_against_the_sdk_types(cache_system: bool) -> None:
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k", cache_system=cache_system)
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        max_tokens=100,
        stop=("END",),
        parallel_tool_calls=False,
        provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}}},
    )
    body = provider.build_request(rich_view("anthropic"), tools=[weather_tool()], settings=settings)
    _strictly_valid(_anthropic_adapter(), body)
    assert "temperature" not in body and "top_p" not in body
    gateway = AnthropicProvider("claude-x", base_url="http://127.0.0.1:9").build_request(
        rich_view("anthropic"), settings=settings
    )
    assert (gateway["temperature"], gateway["top_p"]) == (0.2, 0.9)


def test_responses_bodies_validate_against_the_sdk_types() -> None:
    provider = OpenAIResponsesProvider("o3-mini", api_key="k", supports_vision=True)
    settings = ModelSettings(
        temperature=0.2,
        top_p=0.9,
        max_tokens=100,
        parallel_tool_calls=False,
        provider_options={"openai": {"reasoning": {"effort": "low"}}},
    )
    body = provider.build_request(
        rich_view("openai-responses"),
        tools=[weather_tool()],
        response_format=RESPONSE_FORMAT,
        settings=settings,
    )
    _strictly_valid(_responses_adapter(), body)
    assert body["include"] == ["reasoning.encrypted_content"]
    assert {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thinking hard"}],
        "encrypted_content": "enc",
    } in body["input"]


def test_the_strict_check_catches_an_unknown_key() -> None:
    body = {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": "x", "bogus": 1}],
    }
    assert unknown_keys(body, _openai_adapter()) == ["$.messages[0].bogus"]
