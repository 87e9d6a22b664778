"""AnthropicProvider: system, pairing, documents, thinking round trips, caching, streams."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from lovia.exceptions import ProviderError, UserError
from lovia.parts import FilePart, ImagePart, TextPart
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import ModelSettings
from lovia.transcript import (
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .prov_helpers import assemble, replay_client, sse
from .test_prov_requests import PDF, PNG, weather_tool

GW = "http://127.0.0.1:9"
THINK = ModelSettings(
    provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 2048}}}
)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def gateway(**kw: Any) -> AnthropicProvider:
    return AnthropicProvider("claude-x", base_url=GW, **kw)


def test_system_is_extracted_and_tool_results_pair_with_is_error() -> None:
    view: list[TranscriptEntry] = [
        InputEntry("system", "one"),
        InputEntry("system", "two"),
        InputEntry("user", "q"),
        ToolCallEntry("t1", "f", '{"a": 1}'),
        ToolCallEntry("t2", "f", "[1, 2]"),
        ToolResultEntry("t1", "ok"),
        ToolResultEntry("t2", "failed", is_error=True),
        InputEntry("system", "late note"),
    ]
    body = gateway().build_request(view, settings=ModelSettings(max_tokens=9))
    assert body["system"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert body["max_tokens"] == 9
    user, calls, results = body["messages"]
    assert user == {"role": "user", "content": "q"}
    assert [b["input"] for b in calls["content"]] == [{"a": 1}, {"value": [1, 2]}]
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "failed", "is_error": True},
        {"type": "text", "text": "late note"},
    ]


def test_unparsable_tool_arguments_are_wrapped_not_lost() -> None:
    body = gateway().build_request(
        [InputEntry("user", "q"), ToolCallEntry("t", "f", "{broken"), ToolResultEntry("t", "x")]
    )
    assert body["messages"][1]["content"][0]["input"] == {"raw": "{broken"}


def test_default_max_tokens_and_cache_breakpoints() -> None:
    body = gateway(cache_system=True, default_max_tokens=123).build_request(
        [InputEntry("system", "a"), InputEntry("system", "b"), InputEntry("user", "q")],
        tools=[weather_tool(), weather_tool()],
    )
    assert body["max_tokens"] == 123
    assert [("cache_control" in b) for b in body["system"]] == [False, True]
    assert [("cache_control" in t) for t in body["tools"]] == [False, True]
    assert body["tools"][0]["input_schema"] == weather_tool().parameters


def test_images_and_documents() -> None:
    text_doc = FilePart.from_bytes("héllo".encode(), "text/markdown", filename="n.md")
    parts = (
        TextPart("look"),
        ImagePart(data=PNG, mime_type="image/png"),
        ImagePart(url="https://x/i.png"),
        FilePart(data=PDF, mime_type="application/pdf", filename="a.pdf"),
        FilePart.from_url("https://x/doc.pdf"),
        text_doc,
    )
    (message,) = gateway().build_request([InputEntry("user", parts)])["messages"]
    kinds = [(b["type"], b.get("source", {}).get("type")) for b in message["content"]]
    assert kinds == [
        ("text", None),
        ("image", "base64"),
        ("image", "url"),
        ("document", "base64"),
        ("document", "url"),
        ("document", "text"),
    ]
    assert (
        message["content"][5]["source"]["data"] == "héllo"
        and message["content"][5]["title"] == "n.md"
    )


@pytest.mark.parametrize(
    "part",
    [
        FilePart(data=base64.b64encode(b"PK\x03\x04").decode(), mime_type="application/zip"),
        FilePart(data=base64.b64encode(b"\xff\xfe\xfa").decode(), mime_type="text/plain"),
        FilePart.from_url("https://x/page.html", mime_type="text/html"),
    ],
    ids=["zip", "bad-utf8", "html-url"],
)
def test_unsupported_documents_are_user_errors(part: FilePart) -> None:
    with pytest.raises(UserError) as info:
        gateway().build_request([InputEntry("user", (part,))])
    assert info.value.hint


def test_tool_result_images_become_blocks_or_the_projection() -> None:
    result = ToolResultEntry(
        "t", "[image/png]", parts=(TextPart("shot"), ImagePart(data=PNG, mime_type="image/png"))
    )
    view: list[TranscriptEntry] = [
        InputEntry("user", "q"),
        ToolCallEntry("t", "shot", "{}"),
        result,
    ]
    block = gateway().build_request(view)["messages"][2]["content"][0]
    assert [b["type"] for b in block["content"]] == ["text", "image"]
    blind = gateway(supports_vision=False).build_request(view)["messages"][2]["content"][0]
    assert blind["content"] == "[image/png]"


THINKING_VIEW: list[TranscriptEntry] = [
    InputEntry("user", "q"),
    ReasoningEntry("signed", provider="anthropic", metadata={"signature": "sig"}),
    ReasoningEntry("", provider="anthropic", metadata={"redacted": "opaque"}),
    ReasoningEntry("unsigned", provider="anthropic"),
    ReasoningEntry("other vendor", provider="openai"),
    ToolCallEntry("t", "f", "{}"),
    ToolResultEntry("t", "r"),
    ReasoningEntry("orphan", provider="anthropic", metadata={"signature": "s2"}),
    InputEntry("user", "next"),
]


def test_thinking_round_trips_and_orphans_are_dropped() -> None:
    messages = gateway().build_request(THINKING_VIEW, settings=THINK)["messages"]
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "t", "name": "f", "input": {}},
    ]
    assert "orphan" not in json.dumps(messages)


def test_the_official_host_strips_thinking_unless_enabled() -> None:
    official = AnthropicProvider("claude-sonnet-4-5", api_key="k")
    plain = official.build_request(THINKING_VIEW)["messages"][1]["content"]
    assert [b["type"] for b in plain] == ["tool_use"]
    enabled = official.build_request(THINKING_VIEW, settings=THINK)["messages"][1]["content"]
    assert [b["type"] for b in enabled] == ["thinking", "redacted_thinking", "tool_use"]


async def test_key_headers_and_version() -> None:
    seen: list[Any] = []
    body = sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
        {"type": "message_stop"},
        done=False,
    )
    client = replay_client(body, seen=seen)
    p = AnthropicProvider(
        "c",
        api_key="key",
        base_url=GW,
        client=client,
        default_headers={"X-Api-Key": "other", "anthropic-beta": "b1"},
    )
    [d async for d in p.stream([InputEntry("user", "q")])]
    await client.aclose()
    headers = seen[0].headers
    assert (
        headers["x-api-key"] == "key"
        and headers["anthropic-version"] == "2023-06-01"
        and headers["anthropic-beta"] == "b1"
    )
    assert str(seen[0].url) == GW + "/v1/messages"
    with pytest.raises(UserError):
        AnthropicProvider("c")


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


async def stream_of(*events: dict[str, Any]) -> Any:
    client = replay_client(sse(*events, done=False, events=[e["type"] for e in events]))
    try:
        return assemble([d async for d in gateway(client=client).stream([InputEntry("user", "q")])])
    finally:
        await client.aclose()


async def test_redacted_thinking_pause_turn_and_cache_usage() -> None:
    turn = await stream_of(
        ev(
            "message_start",
            message={
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 90,
                    "cache_creation_input_tokens": 5,
                    "output_tokens": 1,
                }
            },
        ),
        ev(
            "content_block_start",
            index=0,
            content_block={"type": "redacted_thinking", "data": "opaque"},
        ),
        ev("content_block_stop", index=0),
        ev("ping"),
        ev("some_future_event", detail=1),
        ev("message_delta", delta={"stop_reason": "pause_turn"}, usage={"output_tokens": 4}),
        ev("message_stop"),
    )
    (entry,) = turn.reasoning_entries
    assert entry.metadata == {"redacted": "opaque"} and entry.provider == "anthropic"
    assert turn.finish == "pause_turn"
    assert (
        turn.usage.input_tokens,
        turn.usage.cache_read_tokens,
        turn.usage.cache_write_tokens,
        turn.usage.output_tokens,
    ) == (105, 90, 5, 4)


async def test_gateway_style_complete_blocks() -> None:
    turn = await stream_of(
        ev("message_start", message={"usage": {"input_tokens": 3}}),
        ev("content_block_start", index=0, content_block={"type": "text", "text": "whole text"}),
        ev("content_block_stop", index=0),
        ev(
            "content_block_start",
            index=1,
            content_block={"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
        ),
        ev("content_block_stop", index=1),
        ev(
            "content_block_start",
            index=2,
            content_block={"type": "tool_use", "id": "t2", "name": "g", "input": {}},
        ),
        ev("content_block_stop", index=2),
        ev("message_delta", delta={"stop_reason": "tool_use"}),
        ev("message_stop"),
    )
    assert turn.text == "whole text"
    assert turn.calls == {
        0: {"id": "t1", "name": "f", "arguments": '{"a": 1}'},
        1: {"id": "t2", "name": "g", "arguments": "{}"},
    }
    assert turn.finish == "tool_calls"


async def test_an_error_event_mid_stream_is_classified() -> None:
    with pytest.raises(ProviderError) as info:
        await stream_of(
            ev("message_start", message={}),
            ev("error", error={"type": "overloaded_error", "message": "Overloaded"}),
        )
    assert info.value.retryable


async def test_a_stream_without_message_stop_is_a_truncation() -> None:
    with pytest.raises(ProviderError) as info:
        await stream_of(
            ev("message_start", message={}),
            ev("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        )
    assert info.value.retryable and "ended before" in str(info.value)


def test_provider_options_read_claude_then_anthropic_and_none_removes() -> None:
    settings = ModelSettings(
        max_tokens=10,
        provider_options={
            "claude": {"top_k": 5, "metadata": {"user_id": "u"}, "max_tokens": 20},
            "anthropic": {"top_k": 7, "stream": None},
            "openai": {"seed": 1},
        },
    )
    body = gateway().build_request([InputEntry("user", "q")], settings=settings)
    assert (body["top_k"], body["metadata"], body["max_tokens"]) == (7, {"user_id": "u"}, 20)
    assert "stream" not in body and "seed" not in body


def test_official_dialect_overrides_the_host() -> None:
    view = THINKING_VIEW
    settings = ModelSettings(temperature=0.5)
    strict_gateway = gateway(official_dialect=True).build_request(view, settings=settings)
    assert "temperature" not in strict_gateway
    assert [b["type"] for b in strict_gateway["messages"][1]["content"]] == ["tool_use"]
    loose_official = AnthropicProvider("c", api_key="k", official_dialect=False).build_request(
        view, settings=settings
    )
    assert loose_official["temperature"] == 0.5
    assert [b["type"] for b in loose_official["messages"][1]["content"]] == [
        "thinking",
        "redacted_thinking",
        "tool_use",
    ]


def test_parallel_tool_calls_off_disables_parallel_tool_use() -> None:
    p = gateway()
    off = p.build_request(
        [InputEntry("user", "q")],
        tools=[weather_tool()],
        settings=ModelSettings(parallel_tool_calls=False),
    )
    assert off["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    on = p.build_request(
        [InputEntry("user", "q")], tools=[weather_tool()], settings=ModelSettings()
    )
    assert "tool_choice" not in on


async def test_an_owned_client_uses_the_providers_timeout_and_trust_env() -> None:
    p = gateway(timeout=12.5, trust_env=True)
    client = p._http()
    try:
        assert client.timeout.read == 12.5 and client.trust_env is True
    finally:
        await p.aclose()
    assert client.is_closed


async def test_a_reply_cut_by_the_context_window_finishes_as_length() -> None:
    turn = await stream_of(
        ev("message_start", message={"usage": {"input_tokens": 3}}),
        ev("message_delta", delta={"stop_reason": "model_context_window_exceeded"}),
        ev("message_stop"),
    )
    assert turn.finish == "length"
