"""OpenAIChatProvider: dialects, replay rules, images, options, headers, bad input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from lovia.events import TextDelta
from lovia.exceptions import ProviderError, UserError
from lovia.parts import FilePart, ImagePart, TextPart
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import ModelSettings
from lovia.providers.openai_chat import OpenAIChatProvider, openai_tool_schema
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .prov_helpers import assemble, replay_client, sse
from .test_prov_requests import PNG, RESPONSE_FORMAT, weather_tool

LOCAL = "http://127.0.0.1:9/v1"
HI = [InputEntry("user", "hi")]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "LOVIA_PROVIDER_TIMEOUT",
        "LOVIA_PROVIDER_TRUST_ENV",
    ):
        monkeypatch.delenv(var, raising=False)


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra}


@pytest.mark.parametrize(
    ("base_url", "official"),
    [
        (None, True),
        ("https://eu.api.openai.com/v1", True),
        ("https://api.deepseek.com/v1", False),
        (LOCAL, False),
    ],
)
def test_dialect_follows_the_host(base_url: str | None, official: bool) -> None:
    p = OpenAIChatProvider("m", api_key="k", base_url=base_url)
    body = p.build_request(
        HI, response_format=RESPONSE_FORMAT, settings=ModelSettings(max_tokens=5)
    )
    assert (
        p.official_dialect is official
        and p.supports_json_schema is official
        and p.supports_vision is official
    )
    assert body.get("max_completion_tokens" if official else "max_tokens") == 5
    assert ("response_format" in body) is official


def test_overrides_beat_the_host() -> None:
    p = OpenAIChatProvider(
        "m", base_url=LOCAL, official_dialect=True, supports_json_schema=True, supports_vision=True
    )
    body = p.build_request(
        HI, response_format=RESPONSE_FORMAT, settings=ModelSettings(max_tokens=5)
    )
    assert body["max_completion_tokens"] == 5 and body["response_format"] == RESPONSE_FORMAT
    q = OpenAIChatProvider("m", api_key="k", official_dialect=False, supports_json_schema=False)
    assert "max_tokens" in q.build_request(HI, settings=ModelSettings(max_tokens=5))


def test_a_key_is_needed_only_on_the_official_host(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError) as info:
        OpenAIChatProvider("gpt-4o")
    assert "OPENAI_API_KEY" in (info.value.hint or "")
    OpenAIChatProvider("m", base_url=LOCAL)  # compatible server: fine without a key
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    OpenAIChatProvider("gpt-4o")


async def test_extra_headers_never_override_an_explicit_key() -> None:
    seen: list[httpx.Request] = []
    client = replay_client(sse(chunk({"content": "x"}, "stop")), seen=seen)
    p = OpenAIChatProvider(
        "m",
        api_key="real",
        base_url=LOCAL,
        client=client,
        default_headers={"AUTHORIZATION": "Bearer other", "X-Team": "a"},
    )
    [d async for d in p.stream(HI)]
    assert seen[0].headers["authorization"] == "Bearer real" and seen[0].headers["x-team"] == "a"
    gateway = OpenAIChatProvider(
        "m", base_url=LOCAL, client=client, default_headers={"Authorization": "Bearer gw"}
    )
    [d async for d in gateway.stream(HI)]
    assert seen[1].headers["authorization"] == "Bearer gw"
    assert seen[0].url == httpx.URL(LOCAL + "/chat/completions")
    await client.aclose()


async def test_extra_headers_beat_a_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "ambient")
    seen: list[httpx.Request] = []
    client = replay_client(sse(chunk({"content": "x"}, "stop")), seen=seen)
    headers = {"Authorization": "Bearer gw"}
    for key in (None, "mine"):
        p = OpenAIChatProvider(
            "m", api_key=key, base_url=LOCAL, client=client, default_headers=headers
        )
        [d async for d in p.stream(HI)]
    await client.aclose()
    assert [r.headers.get_list("authorization") for r in seen] == [["Bearer gw"], ["Bearer mine"]]


def test_provider_options_merge_in_order_and_none_removes() -> None:
    settings = ModelSettings(
        temperature=0.5,
        provider_options={
            "openai": {"reasoning_effort": "low", "seed": 1},
            "openai-chat": {"seed": 2, "temperature": None, "stream_options": None},
            "anthropic": {"ignored": True},
        },
    )
    body = OpenAIChatProvider("m", base_url=LOCAL).build_request(HI, settings=settings)
    assert body["reasoning_effort"] == "low" and body["seed"] == 2
    assert "temperature" not in body and "stream_options" not in body and "ignored" not in body


def test_reasoning_replay_rules() -> None:
    view: list[TranscriptEntry] = [
        InputEntry("user", "q"),
        ReasoningEntry("mine", provider="openai"),
        AssistantTextEntry("a"),
        ReasoningEntry("foreign", provider="anthropic", metadata={"signature": "s"}),
        ToolCallEntry("c1", "f", "{}"),
        ToolResultEntry("c1", "r"),
        ReasoningEntry("orphan", provider="openai"),
        InputEntry("user", "next"),
    ]

    def replayed(p: OpenAIChatProvider) -> list[str | None]:
        return [
            m.get("reasoning_content")
            for m in p.build_request(view)["messages"]
            if m["role"] == "assistant"
        ]

    # a tool-call turn carries reasoning_content even when empty (DeepSeek requires it)
    assert replayed(OpenAIChatProvider("m", base_url="https://api.deepseek.com")) == ["mine", ""]
    assert replayed(OpenAIChatProvider("m", base_url=LOCAL)) == ["mine", ""]
    assert replayed(OpenAIChatProvider("m", api_key="k")) == [None, None]
    assert replayed(OpenAIChatProvider("m", base_url=LOCAL, replay_reasoning=False)) == [None, None]
    messages = OpenAIChatProvider("m", base_url=LOCAL).build_request(view)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant", "tool", "user"]
    assert all("orphan" not in json.dumps(m) for m in messages)


def test_tool_calls_pass_byte_for_byte_and_images_ride_one_user_message() -> None:
    odd = '{"b":1,  "a":"\\u00e9"}'
    view: list[TranscriptEntry] = [
        InputEntry("user", "q"),
        ToolCallEntry("c1", "shot", odd),
        ToolCallEntry("c2", "shot", "{}"),
        ToolResultEntry("c1", "[image]", parts=(ImagePart(data=PNG, mime_type="image/png"),)),
        ToolResultEntry("c2", "[image]", parts=(TextPart("t"), ImagePart(url="https://x/y.png"))),
        AssistantTextEntry("seen"),
    ]
    messages = OpenAIChatProvider("m", api_key="k").build_request(view)["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    assert (
        messages[1]["tool_calls"][0]["function"]["arguments"] == odd
        and messages[1]["content"] is None
    )
    images = [p for p in messages[4]["content"] if p["type"] == "image_url"]
    assert [i["image_url"]["url"] for i in images] == [
        f"data:image/png;base64,{PNG}",
        "https://x/y.png",
    ]
    blind = OpenAIChatProvider("m", base_url=LOCAL).build_request(view)["messages"]
    assert [m["role"] for m in blind] == ["user", "assistant", "tool", "tool", "assistant"]


def test_user_parts_degrade_without_vision() -> None:
    parts = (
        TextPart("see"),
        ImagePart(data=PNG, mime_type="image/png"),
        FilePart.from_bytes(b"notes", "text/plain", filename="n.txt"),
    )
    content = OpenAIChatProvider("m", base_url=LOCAL).build_request([InputEntry("user", parts)])[
        "messages"
    ][0]["content"]
    assert content[0] == {"type": "text", "text": "see"}
    assert content[1]["type"] == "text" and "image/png" in content[1]["text"]
    assert content[2] == {"type": "text", "text": "notes"}


async def test_stream_deltas_usage_and_cached_tokens() -> None:
    body = sse(
        chunk({"role": "assistant", "reasoning": "r1"}),
        chunk({"reasoning_content": "r2"}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk(
            {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}]}
        ),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x"'}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}),
        chunk(finish="function_call"),
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 60},
            },
        },
    )
    client = replay_client(body)
    turn = assemble(
        [d async for d in OpenAIChatProvider("m", base_url=LOCAL, client=client).stream(HI)]
    )
    await client.aclose()
    assert turn.reasoning == "r1r2" and turn.text == "Hello"
    assert turn.calls == {
        0: {"id": "a", "name": "f", "arguments": '{"x":1}'},
        1: {"id": "b", "name": "g", "arguments": "{}"},
    }
    assert turn.finish == "tool_calls"
    assert turn.usage is not None
    assert (turn.usage.input_tokens, turn.usage.output_tokens, turn.usage.cache_read_tokens) == (
        100,
        7,
        60,
    )


async def test_parallel_calls_that_share_index_0_stay_separate() -> None:
    def call(call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
        fn: dict[str, Any] = {"arguments": arguments}
        if name:
            fn["name"] = name
        tc: dict[str, Any] = {"index": 0, "function": fn}
        if call_id:
            tc["id"] = call_id
        return chunk({"tool_calls": [tc]})

    body = sse(  # Ollama numbers every parallel call 0; llama.cpp repeats id and name
        call("a", "f", '{"x"'),
        call(None, None, ":1}"),
        call("b", "g", '{"y":2}'),
        call("c", "f", "{"),
        call("c", "f", "}"),
        chunk(finish="tool_calls"),
    )
    client = replay_client(body)
    turn = assemble(
        [d async for d in OpenAIChatProvider("m", base_url=LOCAL, client=client).stream(HI)]
    )
    await client.aclose()
    assert turn.calls == {
        0: {"id": "a", "name": "f", "arguments": '{"x":1}'},
        1: {"id": "b", "name": "g", "arguments": '{"y":2}'},
        2: {"id": "c", "name": "f", "arguments": "{}"},
    }


async def test_a_missing_call_id_gets_one() -> None:
    client = replay_client(
        sse(
            chunk({"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}),
            chunk(finish="tool_calls"),
        )
    )
    turn = assemble(
        [d async for d in OpenAIChatProvider("m", base_url=LOCAL, client=client).stream(HI)]
    )
    await client.aclose()
    assert turn.calls[0]["id"].startswith("call_") and turn.calls[0]["name"] == "f"


async def test_finish_without_done_is_complete_but_neither_is_a_truncation() -> None:
    client = replay_client(sse(chunk({"content": "x"}, "stop"), done=False))
    turn = assemble(
        [d async for d in OpenAIChatProvider("m", base_url=LOCAL, client=client).stream(HI)]
    )
    assert turn.finish == "stop"
    cut = replay_client(sse(chunk({"content": "x"}), done=False))
    with pytest.raises(ProviderError) as info:
        [d async for d in OpenAIChatProvider("m", base_url=LOCAL, client=cut).stream(HI)]
    assert info.value.retryable and "ended before it finished" in str(info.value)
    await client.aclose()
    await cut.aclose()


@pytest.mark.parametrize(
    ("payload", "ctype", "retryable", "needle"),
    [
        (b"", "text/event-stream", True, "empty stream"),
        (b"<!DOCTYPE html><html><body>login</body></html>", "text/html", False, "HTML"),
        (b"<!DOCTYPE html><html>oops</html>", "text/event-stream", False, "HTML"),
        (b"\n  <html><body>proxy login</body></html>", "text/plain", False, "HTML"),
        (b'{"id": "x", "choices": []}', "application/json", False, "instead of an event stream"),
        (
            b'{"error": {"message": "model overloaded", "type": "server_error"}}',
            "application/json",
            True,
            "overloaded",
        ),
        (b"data: {not json\n\n", "text/event-stream", True, "malformed"),
        (
            b'data: {"error": {"message": "bad tool schema"}}\n\n',
            "text/event-stream",
            False,
            "bad tool schema",
        ),
        (b"data: [1, 2]\n\n", "text/event-stream", False, "unexpected chunk"),
        (
            b'data: {"object": "error", "message": "max_model_len is 2048", "code": 400}\n\n',
            "text/event-stream",
            False,
            "max_model_len is 2048",
        ),
    ],
)
async def test_bad_replies_are_typed_errors_with_hints(
    payload: bytes, ctype: str, retryable: bool, needle: str
) -> None:
    client = replay_client(payload, content_type=ctype)
    with pytest.raises(ProviderError) as info:
        [d async for d in OpenAIChatProvider("m", base_url=LOCAL, client=client).stream(HI)]
    await client.aclose()
    assert info.value.retryable is retryable and needle in str(info.value) and info.value.hint


async def test_aclose_closes_only_an_owned_client() -> None:
    mine = replay_client(sse(chunk({"content": "x"}, "stop")))
    p = OpenAIChatProvider("m", base_url=LOCAL, client=mine)
    await p.aclose()
    assert not mine.is_closed
    await mine.aclose()
    owned = OpenAIChatProvider("m", base_url=LOCAL)
    client = owned._http()
    await owned.aclose()
    assert client.is_closed
    await owned.aclose()  # idempotent


def test_tools_use_the_tool_schema_and_parallel_flag_needs_tools() -> None:
    p = OpenAIChatProvider("m", base_url=LOCAL)
    with_tools = p.build_request(
        HI, tools=[weather_tool()], settings=ModelSettings(parallel_tool_calls=False, stop=("x",))
    )
    assert (
        with_tools["tools"] == [openai_tool_schema(weather_tool())]
        and with_tools["parallel_tool_calls"] is False
    )
    assert with_tools["stop"] == ["x"]
    assert "parallel_tool_calls" not in p.build_request(
        HI, settings=ModelSettings(parallel_tool_calls=False)
    )


def test_a_lone_stop_string_is_one_sequence() -> None:
    settings = ModelSettings(stop="END")  # type: ignore[arg-type]  # a common user mistake
    assert OpenAIChatProvider("m", base_url=LOCAL).build_request(HI, settings=settings)["stop"] == [
        "END"
    ]
    anthropic = AnthropicProvider("claude-x", base_url="http://127.0.0.1:9")
    assert anthropic.build_request(HI, settings=settings)["stop_sequences"] == ["END"]


class TrackedStream(httpx.AsyncByteStream):
    """A response body that records whether the adapter released it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for line in self.data.splitlines(keepends=True):
            yield line

    async def aclose(self) -> None:
        self.closed = True


async def test_stopping_early_releases_the_response() -> None:
    body = TrackedStream(
        sse(chunk({"content": "a"}), chunk({"content": "b"}), chunk(finish="stop"))
    )
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=body
        )
    )
    async with httpx.AsyncClient(transport=transport) as client:
        stream = OpenAIChatProvider("m", base_url=LOCAL, client=client).stream(HI)
        first = await stream.__anext__()
        assert first == TextDelta("a") and not body.closed
        await stream.aclose()  # type: ignore[attr-defined]
        assert body.closed


async def test_an_owned_client_uses_the_providers_timeout_and_trust_env() -> None:
    p = OpenAIChatProvider("m", base_url=LOCAL, timeout=7.0, trust_env=True)
    client = p._http()
    try:
        assert client.timeout.read == 7.0 and client.trust_env is True
    finally:
        await p.aclose()
    default = OpenAIChatProvider("m", base_url=LOCAL)
    assert default._http().trust_env is False and default._http().timeout.read == 300.0
    await default.aclose()
