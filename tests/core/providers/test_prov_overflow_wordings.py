"""Real vendors' overflow wordings (issue 20.7), replayed byte for byte by a local server.

Each becomes a ``ContextOverflowError`` carrying the window it states; when the prompt fits
and only prompt + ``max_tokens`` does not, the adapter re-sends that request once with a
``max_tokens`` that fits instead of failing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from lovia import Agent, ModelSettings, NoopContextPolicy, Runner
from lovia.exceptions import ContextOverflowError
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.errors import error_from_response
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.retry import RetryPolicy

from .prov_wire_server import Reply, sse_lines, wire_server

ANTHROPIC_OK = sse_lines(
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
    '"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":'
    '{"input_tokens":12,"output_tokens":1}}}',
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}',
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    '{"type":"text_delta","text":"Fits now."}}',
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    '"usage":{"output_tokens":3}}',
    'event: message_stop\ndata: {"type":"message_stop"}',
)
OPENAI_OK = sse_lines(
    'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    '{"role":"assistant","content":"Fits now."},"finish_reason":null}]}',
    'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
    '"finish_reason":"stop"}]}',
    "data: [DONE]",
)


def anthropic_limit(input_tokens: int, max_tokens: int, window: int) -> Reply:
    message = (
        f"input length and `max_tokens` exceed context limit: {input_tokens} + {max_tokens} > "
        f"{window}, decrease input length or `max_tokens` and try again"
    )
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
        "request_id": "req_011CT",
    }
    return Reply(json.dumps(body).encode(), status=400, content_type="application/json")


def json_400(body: Any) -> Reply:
    return Reply(json.dumps(body).encode(), status=400, content_type="application/json")


XAI = {
    "code": "Client specified an invalid argument",
    "error": "This model's maximum prompt length is 131072 but the request contains 145321 tokens.",
}
LM_STUDIO = {
    "error": "Trying to keep the first 6269 tokens when context the overflows. However, the "
    "model is loaded with context length of only 4096 tokens, which is not enough. Try to "
    "load the model with a larger context length, or provide a shorter input"
}
FIREWORKS = {
    "error": {
        "object": "error",
        "type": "invalid_request_error",
        "message": "The prompt is too long: 204800, model maximum context length: 163840",
    }
}


@pytest.mark.parametrize(
    ("body", "window"),
    [
        (json.loads(anthropic_limit(199_759, 16_384, 200_000).body), 200_000),
        (XAI, 131_072),
        (LM_STUDIO, 4_096),
        (FIREWORKS, 163_840),
    ],
    ids=["anthropic-input-plus-max-tokens", "xai", "lm-studio", "fireworks"],
)
def test_each_wording_is_an_overflow_with_its_window(body: Any, window: int) -> None:
    e = error_from_response(400, json.dumps(body), vendor="openai", model="m")
    assert isinstance(e, ContextOverflowError)
    assert e.reported_window == window and not e.retryable


def agent(provider: Any, **kw: Any) -> Agent[Any]:
    return Agent(
        name="a",
        model=provider,
        context_policy=NoopContextPolicy(),
        retry=RetryPolicy(max_attempts=1),
        **kw,
    )


async def test_anthropic_lowers_max_tokens_when_only_the_reply_budget_overflows() -> None:
    async with wire_server(anthropic_limit(190_000, 16_384, 200_000), Reply(ANTHROPIC_OK)) as srv:
        provider = AnthropicProvider("claude-sonnet-4-5", base_url=srv.url, api_key="k")
        try:
            result = await Runner.run(agent(provider), "hi")
        finally:
            await provider.aclose()
    assert result.output == "Fits now."
    assert [b["max_tokens"] for b in srv.bodies] == [16_384, 10_000]
    assert srv.bodies[0]["messages"] == srv.bodies[1]["messages"]


async def test_a_reply_budget_too_small_to_be_useful_goes_to_the_context_policy() -> None:
    async with wire_server(anthropic_limit(199_759, 16_384, 200_000)) as srv:
        provider = AnthropicProvider("claude-sonnet-4-5", base_url=srv.url, api_key="k")
        try:
            with pytest.raises(ContextOverflowError) as info:
                await Runner.run(agent(provider), "hi")
        finally:
            await provider.aclose()
    assert info.value.reported_window == 200_000
    assert len(srv.bodies) == 1  # 241 tokens of room: compaction is the better recovery


async def test_openai_wording_with_messages_and_completion_lowers_max_tokens() -> None:
    body = {
        "object": "error",
        "message": "This model's maximum context length is 8192 tokens. However, you requested "
        "9000 tokens (4000 in the messages, 5000 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    async with wire_server(json_400(body), Reply(OPENAI_OK)) as srv:
        provider = OpenAIChatProvider("qwen", base_url=srv.url + "/v1")
        try:
            result = await Runner.run(
                agent(provider, settings=ModelSettings(max_tokens=5000)), "hi"
            )
        finally:
            await provider.aclose()
    assert result.output == "Fits now."
    assert [b["max_tokens"] for b in srv.bodies] == [5000, 4192]


async def test_xai_overflow_reaches_the_caller_with_its_window() -> None:
    async with wire_server(json_400(XAI)) as srv:
        provider = OpenAIChatProvider("grok-3", base_url=srv.url + "/v1")
        try:
            with pytest.raises(ContextOverflowError) as info:
                await Runner.run(agent(provider), "hi")
        finally:
            await provider.aclose()
    assert info.value.reported_window == 131_072 and len(srv.bodies) == 1


@pytest.mark.parametrize(
    ("message", "room"),
    [
        ("input length and `max_tokens` exceed context limit: 190000 + 16384 > 200000", 10_000),
        ("input length and `max_tokens` exceed context limit: 199759 + 16384 > 200000", None),
        ("input length and `max_tokens` exceed context limit: 200387 + 8192 > 200000", None),
        (
            "This model's maximum context length is 32768 tokens. However, you requested 40000 "
            "tokens (20000 in the messages, 20000 in the completion).",
            12_768,
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 16000. This model's maximum "
            "context length is 32768 tokens and your request has 30000 input tokens "
            "(16000 > 32768 - 30000).",
            2_768,
        ),
        ("input length and `max_tokens` exceed context limit: 3900 + 500 > 4096", None),
        ("input length and `max_tokens` exceed context limit: 3750 + 500 > 4096", 346),
        ("prompt is too long: 210345 tokens > 200000 maximum", None),
    ],
)
def test_reply_room_needs_a_prompt_that_fits_and_a_useful_budget(
    message: str, room: int | None
) -> None:
    from lovia.providers.errors import reply_room

    assert reply_room(message) == room
