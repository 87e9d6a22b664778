"""Hostile and broken replies (issue 4, "Bad input"): each becomes a typed error with a hint,
or is skipped where the vendor says to ignore it, and a half-received turn never lands in
the transcript."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from lovia import Agent, NoopContextPolicy, Runner, tool
from lovia.exceptions import ProviderError
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import Provider
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.stores.memory import InMemorySession
from lovia.transcript import AssistantTextEntry, InputEntry, ToolResultEntry

from .prov_helpers import Turn, assemble, body_of, replay_client, sse

LOCAL = "http://127.0.0.1:9/v1"
HI = [InputEntry("user", "hi")]

Make = Callable[[httpx.AsyncClient], Provider]


def openai(client: httpx.AsyncClient) -> Provider:
    return OpenAIChatProvider("m", base_url=LOCAL, client=client)


def anthropic(client: httpx.AsyncClient) -> Provider:
    return AnthropicProvider("claude-x", base_url="http://127.0.0.1:9", client=client)


def responses(client: httpx.AsyncClient) -> Provider:
    return OpenAIResponsesProvider("m", base_url=LOCAL, client=client)


async def stream(make: Make, client: httpx.AsyncClient) -> Turn:
    try:
        return assemble([d async for d in make(client).stream(HI)])
    finally:
        await client.aclose()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


@pytest.mark.parametrize(
    ("make", "payload"),
    [
        pytest.param(openai, {"choices": {"0": {}}}, id="openai-choices-object"),
        pytest.param(openai, {"choices": [{"delta": "text"}]}, id="openai-delta-string"),
        pytest.param(openai, {"choices": [None]}, id="openai-null-choice"),
        pytest.param(openai, {"choices": [], "usage": [1]}, id="openai-usage-list"),
        pytest.param(
            anthropic,
            {"type": "content_block_start", "index": 0, "content_block": "text"},
            id="anthropic-block-string",
        ),
        pytest.param(
            anthropic, {"type": "message_start", "message": "hello"}, id="anthropic-message-string"
        ),
        pytest.param(
            responses, {"type": "response.output_item.added", "item": "x"}, id="responses-item"
        ),
    ],
)
async def test_valid_json_of_the_wrong_shape_is_a_typed_final_error(
    make: Make, payload: dict[str, Any]
) -> None:
    with pytest.raises(ProviderError) as info:
        await stream(make, replay_client(sse(payload)))
    assert not info.value.retryable and "unexpected shape" in str(info.value)
    assert "streaming format" in (info.value.hint or "")


@pytest.mark.parametrize("make", [openai, anthropic, responses])
async def test_a_json_error_under_a_wrong_content_type_is_reported(make: Make) -> None:
    body = b'{"error": {"message": "quota exhausted for this key", "type": "billing"}}'
    with pytest.raises(ProviderError) as info:
        await stream(make, replay_client(body, content_type="text/plain"))
    assert "quota exhausted for this key" in str(info.value) and info.value.hint
    assert not info.value.retryable


@pytest.mark.parametrize("make", [openai, anthropic, responses])
async def test_markup_that_is_not_an_html_page_is_still_refused(make: Make) -> None:
    body = b'<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>'
    with pytest.raises(ProviderError) as info:
        await stream(make, replay_client(body, content_type="application/octet-stream"))
    assert "AccessDenied" in str(info.value) and not info.value.retryable
    assert "proxy" in (info.value.hint or "")


class Endless(httpx.AsyncByteStream):
    """An error body that would never end: counts how much of it the adapter pulled."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.sent < 10_000:  # a safety stop far above the adapter's cap
            self.sent += 1
            yield b"x" * 4096


async def test_an_error_body_is_read_only_up_to_a_cap() -> None:
    body = Endless()
    transport = httpx.MockTransport(lambda request: httpx.Response(502, stream=body))
    with pytest.raises(ProviderError) as info:
        await stream(openai, httpx.AsyncClient(transport=transport))
    assert info.value.status_code == 502 and info.value.retryable
    assert body.sent <= 17 and len(str(info.value)) < 2000  # 64 KiB, quoted in 500 chars


async def test_named_keep_alive_events_are_skipped_by_the_chat_adapter() -> None:
    body = (
        b"event: ping\ndata: ping\n\n"
        + sse(chunk({"content": "ok"}), done=False)
        + b"event: keepalive\ndata:\n\n"
        + sse(chunk(finish="stop"))
    )
    turn = await stream(openai, replay_client(body))
    assert (turn.text, turn.finish) == ("ok", "stop")


async def test_chat_deltas_of_the_wrong_type_are_ignored_and_object_arguments_become_json() -> None:
    body = sse(
        chunk({"content": 5, "reasoning_content": ["x"]}),
        chunk({"content": "text"}),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "f", "arguments": {"a": "é"}}}
                ]
            }
        ),
        chunk(finish="tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": "9", "completion_tokens": -1}},
    )
    turn = await stream(openai, replay_client(body))
    assert (turn.text, turn.reasoning) == ("text", "")
    assert turn.calls == {0: {"id": "c", "name": "f", "arguments": '{"a": "é"}'}}
    assert turn.usage is not None
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (0, 0)


async def test_anthropic_null_fields_and_junk_usage_are_ignored() -> None:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": "x", "output_tokens": 1}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": None},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": None}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    turn = await stream(anthropic, replay_client(sse(*events, done=False)))
    assert turn.text == "ok" and turn.order.count("TextDelta") == 1
    assert turn.usage is not None and (turn.usage.input_tokens, turn.usage.output_tokens) == (0, 1)


async def test_responses_null_deltas_are_ignored() -> None:
    events = [
        {"type": "response.output_text.delta", "delta": None},
        {"type": "response.output_text.delta", "delta": "ok"},
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    turn = await stream(responses, replay_client(sse(*events, done=False)))
    assert (turn.text, turn.finish, turn.order.count("TextDelta")) == ("ok", "stop", 1)


# -- a tool call whose arguments are not JSON, through the run loop ---------------------


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def scripted_client(bodies: list[bytes], sent: list[dict[str, Any]]) -> httpx.AsyncClient:
    """Answers the n-th request with ``bodies[n]`` (a real httpx client, canned wire bytes)."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(body_of(request))
        data = bodies[len(sent) - 1]
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def anthropic_call(arguments: str) -> bytes:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": arguments},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    return sse(*events, done=False)


def anthropic_text(text: str) -> bytes:
    events = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    return sse(*events, done=False)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_invalid_tool_argument_json_becomes_a_tool_error_and_the_run_goes_on(
    kind: str,
) -> None:
    broken = '{"key": "a",'
    sent: list[dict[str, Any]] = []
    if kind == "openai":
        bodies = [
            sse(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "t1",
                                "function": {"name": "lookup", "arguments": broken},
                            }
                        ]
                    },
                    "tool_calls",
                )
            ),
            sse(chunk({"content": "sorry"}, "stop")),
        ]
    else:
        bodies = [anthropic_call(broken), anthropic_text("sorry")]
    client = scripted_client(bodies, sent)
    provider = openai(client) if kind == "openai" else anthropic(client)
    agent = Agent(name="a", model=provider, tools=[lookup], context_policy=NoopContextPolicy())
    try:
        result = await Runner.run(agent, "look up a")
    finally:
        await client.aclose()
    (res,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert res.is_error and res.call_id == "t1" and "not valid JSON" in res.output
    assert result.output == "sorry"
    # the run loop keeps the replayed call wire-safe; the error result is paired with it
    replayed = json.dumps(sent[1])
    if kind == "openai":
        (tool_msg,) = [m for m in sent[1]["messages"] if m["role"] == "tool"]
        assert tool_msg["tool_call_id"] == "t1"
    else:
        assert '"tool_use_id": "t1"' in replayed and '"is_error": true' in replayed


async def test_a_turn_cut_by_a_bad_chunk_never_lands_in_the_session() -> None:
    body = sse(chunk({"content": "Hel"}), {"choices": [None]}, done=False)
    client = replay_client(body)
    agent = Agent(name="a", model=openai(client), context_policy=NoopContextPolicy())
    session = InMemorySession()
    try:
        with pytest.raises(ProviderError) as info:
            await Runner.run(agent, "hi", session=session, session_id="s")
    finally:
        await client.aclose()
    assert "unexpected shape" in str(info.value)
    stored = await session.load("s")
    assert not [e for e in stored if isinstance(e, AssistantTextEntry)]
