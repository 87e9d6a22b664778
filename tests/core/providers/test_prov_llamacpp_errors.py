"""llama.cpp's stream errors (issue 20.8), replayed byte for byte by a local server.

Its server reports a failure inside a 200 stream as an ``error: {...}`` SSE field followed
by ``data: [DONE]``; other servers send ``event: error`` with the error object as data.
Each must become the right typed error, never a partial or empty success.
"""

from __future__ import annotations

from typing import Any

import pytest
from lovia import Agent, NoopContextPolicy, Runner
from lovia.exceptions import ContextOverflowError, ProviderError
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.retry import RetryPolicy

from .prov_wire_server import Reply, sse_lines, wire_server

PARTIAL = (
    'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant",'
    '"content":null}}],"created":1764600000,"id":"chatcmpl-x","model":"qwen","object":'
    '"chat.completion.chunk"}',
    'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"The answer is"}}],'
    '"created":1764600000,"id":"chatcmpl-x","model":"qwen","object":"chat.completion.chunk"}',
)
SERVER_ERROR = 'error: {"code":500,"message":"failed to decode the batch","type":"server_error"}'
CONTEXT_ERROR = (
    'error: {"code":400,"message":"the request exceeds the available context size, try '
    'increasing it","type":"exceed_context_size_error","n_prompt_tokens":5120,"n_ctx":4096}'
)
GOOD = sse_lines(
    'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"42."}}],'
    '"object":"chat.completion.chunk"}',
    'data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],'
    '"object":"chat.completion.chunk"}',
    "data: [DONE]",
)


class NoSleep:
    async def __call__(self, seconds: float) -> None:
        return None


async def run(*replies: Reply, attempts: int = 1) -> tuple[Any, int]:
    async with wire_server(*replies) as srv:
        provider = OpenAIChatProvider("qwen", base_url=srv.url + "/v1")
        agent = Agent(
            name="a",
            model=provider,
            context_policy=NoopContextPolicy(),
            retry=RetryPolicy(max_attempts=attempts, sleep=NoSleep()),
        )
        try:
            result = await Runner.run(agent, "what is the answer?")
        finally:
            await provider.aclose()
    return result, len(srv.bodies)


async def test_an_error_field_then_done_is_a_retryable_error_not_a_stop() -> None:
    with pytest.raises(ProviderError) as info:
        await run(Reply(sse_lines(SERVER_ERROR, "data: [DONE]")))
    assert info.value.retryable and "failed to decode the batch" in str(info.value)
    assert not isinstance(info.value, ContextOverflowError)


async def test_a_mid_stream_error_after_partial_text_is_retried_not_the_output() -> None:
    result, calls = await run(
        Reply(sse_lines(*PARTIAL, SERVER_ERROR, "data: [DONE]")), Reply(GOOD), attempts=2
    )
    assert result.output == "42." and calls == 2
    with pytest.raises(ProviderError) as info:
        await run(Reply(sse_lines(*PARTIAL, SERVER_ERROR, "data: [DONE]")))
    assert info.value.retryable


async def test_a_context_size_error_as_the_first_frame_is_an_overflow() -> None:
    with pytest.raises(ContextOverflowError) as info:
        await run(Reply(sse_lines(CONTEXT_ERROR, "data: [DONE]")))
    assert info.value.reported_window == 4096


@pytest.mark.parametrize(
    ("data", "retryable"),
    [
        ('{"code":503,"message":"Loading model","type":"unavailable_error"}', True),
        ('{"message":"grammar parse error","type":"invalid_request_error"}', False),
    ],
)
async def test_an_error_event_without_an_error_key_is_still_an_error(
    data: str, retryable: bool
) -> None:
    body = sse_lines(*PARTIAL[:1], f"event: error\ndata: {data}", "data: [DONE]")
    with pytest.raises(ProviderError) as info:
        await run(Reply(body))
    assert info.value.retryable is retryable
