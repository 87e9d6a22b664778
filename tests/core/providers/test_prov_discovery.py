"""Context-window discovery from /models payloads and the bundled host tables."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.base import (
    ContextWindowDiscovery,
    ContextWindowProvider,
    VisionCapable,
    supports_vision,
)
from lovia.providers.discovery import discover_window, table_window, window_from_models_payload
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.openai_responses import OpenAIResponsesProvider

from .prov_http_server import json_server


@pytest.mark.parametrize(
    ("payload", "model", "window"),
    [
        ({"data": [{"id": "Qwen/Qwen2.5-7B", "max_model_len": 32768}]}, "Qwen/Qwen2.5-7B", 32768),
        (
            {"data": [{"id": "llama-3.1-8b-instant", "context_window": 131072}]},
            "llama-3.1-8b-instant",
            131072,
        ),
        (
            {"data": [{"id": "claude-sonnet-4-5", "max_input_tokens": 200000}]},
            "claude-sonnet-4-5",
            200000,
        ),
        ([{"id": "meta-llama/Llama-3-70b", "context_length": 8192}], "Llama-3-70b", 8192),
        (
            {
                "data": [
                    {
                        "id": "anthropic/claude-3.5-sonnet:beta",
                        "top_provider": {"context_length": 200000},
                    }
                ]
            },
            "claude-3.5-sonnet",
            200000,
        ),
        ({"data": [{"id": "a", "max_model_len": 1}, {"id": "b"}]}, "b", None),
        ({"data": [{"id": "other", "max_model_len": 4096}]}, "mine", None),
        ({"object": "model", "id": "m", "max_model_len": 2048}, "m", 2048),
        ("garbage", "m", None),
    ],
)
def test_payload_shapes(payload: object, model: str, window: int | None) -> None:
    assert window_from_models_payload(payload, model) == window


def test_tables_are_keyed_by_host_and_the_longest_prefix_wins() -> None:
    assert table_window("api.openai.com", "gpt-4o-mini") == 128_000
    assert table_window("eu.api.openai.com", "gpt-4.1-mini") == 1_047_576
    assert table_window("api.openai.com", "gpt-4") == 8_192
    assert table_window("api.anthropic.com", "claude-sonnet-4-5") == 200_000
    assert table_window("127.0.0.1", "gpt-4o") is None  # a foreign host gets nothing
    assert OpenAIChatProvider("gpt-4o", api_key="k").context_window() == 128_000


async def test_probe_is_memoised_including_misses_and_outlives_the_provider() -> None:
    routes = {"/v1/models": (200, {"data": [{"id": "m", "max_model_len": 4096}]})}
    async with json_server(routes) as server:
        first = OpenAIChatProvider("m", base_url=server.url + "/v1")
        assert await first.discover_context_window() == 4096
        second = OpenAIChatProvider("m", base_url=server.url + "/v1")
        assert await second.discover_context_window() == 4096
        missing = OpenAIChatProvider("absent", base_url=server.url + "/v1")
        assert await missing.discover_context_window() is None
        assert await missing.discover_context_window() is None
        assert server.hits == ["/v1/models", "/v1/models"]


async def test_the_responses_adapter_shares_the_chat_adapters_memo() -> None:
    routes = {"/v1/models": (200, {"data": [{"id": "m", "max_model_len": 4096}]})}
    async with json_server(routes) as server:
        chat = OpenAIChatProvider("m", base_url=server.url + "/v1")
        responses = OpenAIResponsesProvider("m", base_url=server.url + "/v1/")
        assert await chat.discover_context_window() == 4096
        assert await responses.discover_context_window() == 4096
        assert server.hits == ["/v1/models"]  # one endpoint, one model: one probe
    official = OpenAIResponsesProvider("gpt-5", api_key="k")
    assert await official.discover_context_window() is None


async def test_concurrent_probes_share_one_request() -> None:
    routes = {"/v1/models": (200, {"data": [{"id": "m", "context_length": 9000}]})}
    async with json_server(routes, hold=True) as server:
        providers = [OpenAIChatProvider("m", base_url=server.url + "/v1") for _ in range(5)]
        tasks = [asyncio.ensure_future(p.discover_context_window()) for p in providers]
        await server.arrived.wait()
        server.release.set()
        assert await asyncio.gather(*tasks) == [9000] * 5
        assert server.hits == ["/v1/models"]


async def test_failures_fail_open_and_redirects_are_followed() -> None:
    routes = {
        "/broken/models": (500, {"error": "x"}),
        "/old/models": (307, "/new/models"),
        "/new/models": (200, {"data": [{"id": "m", "max_model_len": 1234}]}),
    }
    async with json_server(routes) as server:
        assert await discover_window(server.url + "/broken", "m", {}) is None
        assert await discover_window(server.url + "/old", "m", {}) == 1234
    assert await discover_window("http://127.0.0.1:1", "m", {}) is None  # nothing listens there


async def test_the_official_openai_api_is_never_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A local server stands in as the proxy for every host, so any probe is seen (a failed
    # probe would otherwise look exactly like "not asked": both answer None).
    routes: dict[str, tuple[int, Any]] = {
        "http://models.example.test/v1/models": (200, {"data": []})
    }
    async with json_server(routes) as proxy:
        monkeypatch.setenv("LOVIA_PROVIDER_TRUST_ENV", "1")
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        for base_url in (None, "https://eu.api.openai.com/v1"):
            official = OpenAIChatProvider("gpt-4o", api_key="k", base_url=base_url)
            assert await official.discover_context_window() is None
        assert proxy.hits == []
        other = OpenAIChatProvider("gpt-4o", base_url="http://models.example.test/v1")
        assert await other.discover_context_window() is None
        assert proxy.hits == ["http://models.example.test/v1/models"]  # the probe is visible


async def test_anthropic_reads_max_input_tokens() -> None:
    routes = {"/v1/models": (200, {"data": [{"id": "claude-x", "max_input_tokens": 150000}]})}
    async with json_server(routes) as server:
        assert (
            await AnthropicProvider("claude-x", base_url=server.url).discover_context_window()
            == 150000
        )


def test_optional_protocols() -> None:
    p = OpenAIChatProvider("m", base_url="http://127.0.0.1:9/v1")
    assert (
        isinstance(p, ContextWindowProvider)
        and isinstance(p, ContextWindowDiscovery)
        and isinstance(p, VisionCapable)
    )
    assert (
        supports_vision(p) is False
        and supports_vision(OpenAIChatProvider("m", api_key="k")) is True
    )
    assert supports_vision(AnthropicProvider("c", base_url="http://127.0.0.1:9")) is True
