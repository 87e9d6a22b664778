"""Errors inside a 200 stream that state no HTTP status: a service that is unavailable,
out of capacity or disconnected from its upstream is transient, so it is retried
("a 5xx, overload or rate limit" is retryable, docs/providers.md)."""

from __future__ import annotations

import pytest
from lovia import Agent, NoopContextPolicy, Runner
from lovia.exceptions import ProviderError
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.retry import RetryPolicy

from .prov_wire_server import Reply, sse_lines, wire_server

PARTIAL = 'data: {"choices":[{"index":0,"delta":{"content":"The answer"},"finish_reason":null}]}'
GOOD = sse_lines(
    'data: {"choices":[{"index":0,"delta":{"content":"42."},"finish_reason":null}]}',
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    "data: [DONE]",
)


class NoSleep:
    async def __call__(self, seconds: float) -> None:
        return None


def _agent(provider: OpenAIChatProvider) -> Agent[None]:
    return Agent(
        name="a",
        model=provider,
        context_policy=NoopContextPolicy(),
        retry=RetryPolicy(max_attempts=2, sleep=NoSleep()),
    )


@pytest.mark.parametrize(
    "error",
    [
        # Together, Fireworks and others
        'data: {"error":{"message":"Service unavailable","type":"service_unavailable"}}',
        # Mistral
        'data: {"object":"error","message":"Service tier capacity exceeded for this model.",'
        '"type":"service_tier_capacity_exceeded","param":null,"code":"3505"}',
        # an Envoy-fronted gateway relaying its upstream failure
        'data: {"error":{"message":"upstream connect error or disconnect/reset before headers. '
        'reset reason: connection termination"}}',
    ],
)
async def test_a_transient_stream_error_is_retried(error: str) -> None:
    async with wire_server(Reply(sse_lines(PARTIAL, error)), Reply(GOOD)) as srv:
        provider = OpenAIChatProvider("m", base_url=srv.url + "/v1")
        agent = _agent(provider)
        try:
            result = await Runner.run(agent, "what is the answer?")
        finally:
            await provider.aclose()
    assert result.output == "42."
    assert len(srv.bodies) == 2


async def test_an_invalid_request_in_the_stream_is_still_final() -> None:
    error = 'data: {"error":{"message":"Invalid tool schema","type":"invalid_request_error"}}'
    async with wire_server(Reply(sse_lines(PARTIAL, error)), Reply(GOOD)) as srv:
        provider = OpenAIChatProvider("m", base_url=srv.url + "/v1")
        agent = _agent(provider)
        try:
            with pytest.raises(ProviderError) as caught:
                await Runner.run(agent, "what is the answer?")
        finally:
            await provider.aclose()
    assert not caught.value.retryable and len(srv.bodies) == 1
