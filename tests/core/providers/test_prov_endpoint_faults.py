"""What a user meets in the first hour against real endpoints (issues 10.2, 10.3, 10.6, 20.11).

Every server here is a real socket on 127.0.0.1 (``prov_wire_server``); the hung one accepts
the connection, reads the request and never answers.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from lovia import Agent, NoopContextPolicy, Runner, tool
from lovia.exceptions import ProviderError
from lovia.http_config import ProviderTimeouts
from lovia.providers import provider_from_string
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.retry import RetryPolicy

from .prov_wire_server import Reply, sse_lines, wire_server
from .test_prov_overflow_wordings import ANTHROPIC_OK


class NoSleep:
    async def __call__(self, seconds: float) -> None:
        return None


# -- 10.2: a hung endpoint --------------------------------------------------------------


async def test_a_hung_endpoint_fails_fast_says_what_timed_out_and_logs_each_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    timeouts = ProviderTimeouts(read=30.0, connect=1.0, first_byte=0.3, probe=0.2)
    async with wire_server(silent=True) as srv:
        provider = OpenAIChatProvider("qwen", base_url=srv.url + "/v1", timeout=timeouts)
        agent = Agent(
            name="a",
            model=provider,
            context_policy=NoopContextPolicy(),
            retry=RetryPolicy(max_attempts=3, sleep=NoSleep()),
        )
        started = time.monotonic()
        try:
            with caplog.at_level(logging.WARNING), pytest.raises(ProviderError) as info:
                await Runner.run(agent, "hi")
        finally:
            await provider.aclose()
        elapsed = time.monotonic() - started
    assert elapsed < 5.0 and len(srv.bodies) == 3
    message = str(info.value)
    assert info.value.retryable
    assert "3 attempts" in message and "no response within 0.3 s" in message
    assert "ReadTimeout: \n" not in message and "raise timeout" not in message
    assert "retried" not in (info.value.hint or "")  # the final error promises no retry
    retries = [r for r in caplog.records if r.levelno == logging.WARNING and "retry" in r.message]
    assert len(retries) == 2, [r.message for r in caplog.records]


async def test_a_reply_that_stalls_names_the_read_timeout_not_an_empty_read_timeout() -> None:
    partial = sse_lines('data: {"choices":[{"index":0,"delta":{"content":"The answer"}}]}')
    timeouts = ProviderTimeouts(read=0.3, connect=1.0, first_byte=0.3)
    async with wire_server(Reply(partial, stall=True)) as srv:
        provider = OpenAIChatProvider("qwen", base_url=srv.url + "/v1", timeout=timeouts)
        agent = Agent(
            name="a",
            model=provider,
            context_policy=NoopContextPolicy(),
            retry=RetryPolicy(max_attempts=1),
        )
        try:
            with pytest.raises(ProviderError) as info:
                await Runner.run(agent, "hi")
        finally:
            await provider.aclose()
    message = str(info.value)
    assert info.value.retryable and "sent nothing for 0.3 s while replying" in message
    assert "ReadTimeout: \n" not in message and "gave up" not in message  # one attempt


async def test_the_window_probe_of_a_hung_endpoint_gives_up_on_its_own_short_timeout() -> None:
    # The probe's 0.2 s, not the 30 s first-byte limit, ends the wait; the bound leaves room
    # for a loaded machine (the first call also loads httpx and the CA store).
    timeouts = ProviderTimeouts(read=60.0, first_byte=30.0, probe=0.2)
    async with wire_server(silent=True) as srv:
        provider = OpenAIChatProvider("qwen", base_url=srv.url + "/v1", timeout=timeouts)
        started = time.monotonic()
        window = await provider.discover_context_window()
        elapsed = time.monotonic() - started
        await provider.aclose()
    assert window is None and srv.paths == ["/v1/models"]
    assert elapsed < 10.0


def test_timeouts_come_from_the_environment_and_stay_under_the_read_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lovia.http_config import resolve_timeouts

    for name in ("TIMEOUT", "CONNECT_TIMEOUT", "FIRST_BYTE_TIMEOUT", "PROBE_TIMEOUT"):
        monkeypatch.delenv(f"LOVIA_PROVIDER_{name}", raising=False)
    default = resolve_timeouts()
    assert default.connect < default.first_byte < default.read and default.probe < 5.0
    monkeypatch.setenv("LOVIA_PROVIDER_FIRST_BYTE_TIMEOUT", "7")
    monkeypatch.setenv("LOVIA_PROVIDER_CONNECT_TIMEOUT", "2")
    monkeypatch.setenv("LOVIA_PROVIDER_PROBE_TIMEOUT", "0.5")
    assert resolve_timeouts() == ProviderTimeouts(
        read=default.read, connect=2.0, first_byte=7.0, probe=0.5
    )
    assert resolve_timeouts(5.0).first_byte == 5.0  # a read timeout below it caps it


# -- 10.3: Anthropic base_url with /v1 --------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_anthropic_accepts_the_host_root_and_the_v1_form(
    suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with wire_server(Reply(ANTHROPIC_OK)) as srv:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url + suffix)
        provider = AnthropicProvider("claude-sonnet-4-5", api_key="k")
        agent = Agent(name="a", model=provider, context_policy=NoopContextPolicy())
        try:
            result = await Runner.run(agent, "hi")
            await provider.discover_context_window()
        finally:
            await provider.aclose()
    assert result.output == "Fits now." and srv.paths == ["/v1/messages", "/v1/models"]


async def test_a_really_wrong_anthropic_base_url_keeps_the_404_hint() -> None:
    async with wire_server(Reply(b"{}", status=404, content_type="application/json")) as srv:
        provider = AnthropicProvider("claude-sonnet-4-5", base_url=srv.url + "/api", api_key="k")
        agent = Agent(name="a", model=provider, context_policy=NoopContextPolicy())
        try:
            with pytest.raises(ProviderError) as info:
                await Runner.run(agent, "hi")
        finally:
            await provider.aclose()
    assert srv.paths == ["/api/v1/messages"]
    assert "host root" in (info.value.hint or "") and "/v1" in (info.value.hint or "")


# -- 10.6: configuration mistakes are warnings ------------------------------------------


def test_a_bare_claude_model_name_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.warns(UserWarning, match="anthropic:claude-3-haiku"):
        provider = provider_from_string("claude-3-haiku")
    assert isinstance(provider, OpenAIChatProvider)


def test_an_invalid_timeout_variable_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    from lovia.http_config import DEFAULT_TIMEOUT, resolve_timeout

    monkeypatch.setenv("LOVIA_PROVIDER_TIMEOUT", "five")
    with pytest.warns(UserWarning, match="LOVIA_PROVIDER_TIMEOUT"):
        assert resolve_timeout() == DEFAULT_TIMEOUT


# -- 20.11: DeepSeek thinking mode with tools --------------------------------------------

_DS = '"id":"d1","object":"chat.completion.chunk","created":1764600000,"model":"deepseek-chat"'
DEEPSEEK_TOOL_CALL = sse_lines(
    "data: {" + _DS + ',"choices":[{"index":0,"delta":{"role":"assistant","content":null,'
    '"reasoning_content":""},"logprobs":null,"finish_reason":null}]}',
    "data: {" + _DS + ',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    '"id":"call_00_Vx1","type":"function","function":{"name":"get_weather","arguments":""}}]},'
    '"logprobs":null,"finish_reason":null}]}',
    "data: {" + _DS + ',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
    '{"arguments":"{\\"city\\":\\"Paris\\"}"}}]},"logprobs":null,"finish_reason":null}]}',
    "data: {" + _DS + ',"choices":[{"index":0,"delta":{"content":null},"logprobs":null,'
    '"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":90,"completion_tokens":20,'
    '"total_tokens":110}}',
    "data: [DONE]",
)
DEEPSEEK_TEXT = sse_lines(
    "data: {" + _DS + ',"choices":[{"index":0,"delta":{"content":"21C in Paris."},'
    '"logprobs":null,"finish_reason":null}]}',
    "data: {" + _DS + ',"choices":[{"index":0,"delta":{"content":""},"logprobs":null,'
    '"finish_reason":"stop"}]}',
    "data: [DONE]",
)


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"21C in {city}"


@pytest.mark.parametrize("replay", [None, False])
async def test_a_tool_call_turn_without_reasoning_replays_an_empty_reasoning_content(
    replay: bool | None,
) -> None:
    async with wire_server(Reply(DEEPSEEK_TOOL_CALL), Reply(DEEPSEEK_TEXT)) as srv:
        kwargs: dict[str, Any] = {} if replay is None else {"replay_reasoning": replay}
        provider = OpenAIChatProvider("deepseek-chat", base_url=srv.url, **kwargs)
        agent = Agent(
            name="a", model=provider, tools=[get_weather], context_policy=NoopContextPolicy()
        )
        try:
            result = await Runner.run(agent, "weather in Paris?")
        finally:
            await provider.aclose()
    assert result.output == "21C in Paris."
    calls = [m for m in srv.bodies[1]["messages"] if m.get("tool_calls")]
    assert len(calls) == 1
    if replay is None:  # a compatible host replays reasoning: the field must be there
        assert calls[0]["reasoning_content"] == ""
    else:
        assert "reasoning_content" not in calls[0]


# -- 11.3: the shared constructor still refuses a typo -----------------------------------


@pytest.mark.parametrize("cls", [OpenAIChatProvider, AnthropicProvider])
def test_an_unknown_keyword_is_refused_with_the_close_match(cls: Any) -> None:
    from lovia.exceptions import UserError

    with pytest.raises(UserError, match="api_kye") as info:
        cls("m", base_url="http://127.0.0.1:9", api_kye="k")
    assert "'api_key'" in (info.value.hint or "")
