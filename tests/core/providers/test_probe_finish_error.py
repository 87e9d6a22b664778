"""A Chat Completions stream that finishes with ``finish_reason: "error"`` (OpenRouter,
LiteLLM and other gateways when the upstream provider fails mid-reply, sometimes without an
``error`` object): the partial text must never become the answer."""

from __future__ import annotations

import pytest
from lovia import Agent, NoopContextPolicy, Runner
from lovia.exceptions import ProviderError
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.retry import RetryPolicy

from .prov_wire_server import Reply, sse_lines, wire_server

PROCESSING = ": OPENROUTER PROCESSING"
PARTIAL = (
    'data: {"id":"gen-1","provider":"Lepton","model":"meta-llama/llama-3.1-8b-instruct",'
    '"object":"chat.completion.chunk","created":1764600000,"choices":[{"index":0,"delta":'
    '{"role":"assistant","content":"The answer is"},"finish_reason":null,'
    '"native_finish_reason":null,"logprobs":null}]}'
)
ERROR_FINISH = (
    'data: {"id":"gen-1","provider":"Lepton","model":"meta-llama/llama-3.1-8b-instruct",'
    '"object":"chat.completion.chunk","created":1764600000,"choices":[{"index":0,"delta":'
    '{"role":"assistant","content":""},"finish_reason":"error","native_finish_reason":"error",'
    '"logprobs":null}]}'
)
GOOD = sse_lines(
    'data: {"choices":[{"index":0,"delta":{"content":"42."},"finish_reason":null}]}',
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    "data: [DONE]",
)
BROKEN = sse_lines(PROCESSING, PROCESSING, PARTIAL, ERROR_FINISH, "data: [DONE]")


class NoSleep:
    async def __call__(self, seconds: float) -> None:
        return None


def agent(url: str, attempts: int) -> Agent[None]:
    provider = OpenAIChatProvider("meta-llama/llama-3.1-8b-instruct", base_url=url + "/v1")
    return Agent(
        name="a",
        model=provider,
        context_policy=NoopContextPolicy(),
        retry=RetryPolicy(max_attempts=attempts, sleep=NoSleep()),
    )


async def test_an_error_finish_is_a_retryable_error_not_the_answer() -> None:
    async with wire_server(Reply(BROKEN)) as srv:
        with pytest.raises(ProviderError) as caught:
            await Runner.run(agent(srv.url, 1), "what is the answer?")
    assert caught.value.retryable
    assert 'finish_reason "error"' in caught.value.message
    assert caught.value.hint and "partial turn is discarded" in caught.value.hint


async def test_an_error_finish_is_retried_and_the_retry_answers() -> None:
    async with wire_server(Reply(BROKEN), Reply(GOOD)) as srv:
        result = await Runner.run(agent(srv.url, 2), "what is the answer?")
    assert result.output == "42."
    assert len(srv.bodies) == 2
