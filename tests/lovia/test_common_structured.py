"""Scenario: structured output (a pydantic model) through the real Anthropic adapter against
llmock, after a tool call and a repair turn, with usage summed over every model call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from lovia import Agent, Runner, tool
from lovia.checkpointer import CheckpointOptions
from lovia.providers.anthropic import AnthropicProvider
from lovia.stores import SQLiteCheckpointer
from lovia.transcript import InputEntry, ToolResultEntry
from pydantic import BaseModel

from tests.core.providers.conftest import Server


class Forecast(BaseModel):
    city: str
    celsius: int


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"21C in {city}"


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: Any, sink: list[bytes]) -> None:
        self.inner = inner
        self.sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.sink.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """A real HTTP transport that keeps a copy of every Messages API response body."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[list[bytes]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if not request.url.path.endswith("/messages"):
            return response
        sink: list[bytes] = []
        self.bodies.append(sink)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, sink),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def wire_usage(self) -> tuple[int, int]:
        """(input, output) tokens as the server reported them, summed over responses.

        Anthropic's counts are cumulative within one response: the last one reported wins.
        """
        total_in = total_out = 0
        for body in self.bodies:
            seen: dict[str, int] = {}
            for line in b"".join(body).decode().splitlines():
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    usage = (event.get("message") or {}).get("usage") or event.get("usage") or {}
                    seen.update({k: v for k, v in usage.items() if isinstance(v, int)})
            total_in += seen.get("input_tokens", 0)
            total_out += seen.get("output_tokens", 0)
        return total_in, total_out


def script(server: Server, *replies: dict[str, Any]) -> None:
    match = {"path": "*/messages"}  # the window probe (GET /v1/models) must not consume one
    behaviors = [{"type": "reply", "match": match, **reply} for reply in replies]
    httpx.post(
        server.url + "/_llmock/scenario", json={"behaviors": behaviors}, timeout=10
    ).raise_for_status()


async def test_structured_output_after_a_tool_and_a_repair_with_summed_usage(
    llmock: Server, tmp_path: Path
) -> None:
    script(
        llmock,
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": "It is 21C in Paris."},  # not JSON: one repair turn
        {"text": 'Sure: {"city": "Paris", "celsius": 21}'},
    )
    transport = RecordingTransport()
    client = httpx.AsyncClient(transport=transport)
    provider = AnthropicProvider(
        "claude-x", base_url=llmock.url + "/anthropic", api_key="k", client=client
    )
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db", wal=True)
    agent = Agent(name="forecaster", instructions="Forecast.", model=provider, tools=[get_weather])
    try:
        result = await Runner.run(
            agent,
            "Forecast for Paris",
            output_type=Forecast,
            checkpoint=CheckpointOptions(checkpointer, "f-1"),
        )
        assert result.output == Forecast(city="Paris", celsius=21)
        assert result.turns == 3 and result.usage.requests == 3
        (weather,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
        assert weather.output == "21C in Paris"
        repairs = [e for e in result.entries if isinstance(e, InputEntry)][1:]
        assert len(repairs) == 1 and repairs[0].role == "user"

        wire_in, wire_out = transport.wire_usage()
        assert len(transport.bodies) == 3 and wire_in > 0 and wire_out > 0
        assert (result.usage.input_tokens, result.usage.output_tokens) == (wire_in, wire_out)
        assert result.last_input_tokens is not None
        assert result.last_input_tokens < result.usage.input_tokens

        # The contract went to the system prompt (no native JSON schema on this wire).
        request = httpx.get(llmock.url + "/_llmock/requests", timeout=10).json()["requests"]
        first_body = [r for r in request if r["path"].endswith("/messages")][0]["body"]
        assert "response_format" not in first_body and "celsius" in json.dumps(first_body["system"])

        snapshot = await checkpointer.load("f-1")
        assert snapshot is not None and snapshot.head.status == "completed"
        assert snapshot.head.output == {"city": "Paris", "celsius": 21}
        assert snapshot.head.usage.input_tokens == wire_in

        # A replay rebuilds the typed output and folds the stored usage, without a call.
        replay = await Runner.run(
            agent,
            "ignored",
            output_type=Forecast,
            checkpoint=CheckpointOptions(checkpointer, "f-1"),
        )
        assert replay.output == result.output and replay.usage.input_tokens == wire_in
        assert len(transport.bodies) == 3
    finally:
        await provider.aclose()
        await client.aclose()
        await checkpointer.aclose()
