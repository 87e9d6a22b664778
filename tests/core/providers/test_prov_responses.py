"""OpenAIResponsesProvider: input items, reasoning round trip, streamed events."""

from __future__ import annotations

from typing import Any

import pytest
from lovia.exceptions import ProviderError
from lovia.providers.base import ModelSettings
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .prov_helpers import assemble, replay_client, sse
from .test_prov_requests import RESPONSE_FORMAT, weather_tool

LOCAL = "http://127.0.0.1:9/v1"


def test_items_and_structured_output() -> None:
    view: list[TranscriptEntry] = [
        InputEntry("system", "sys"),
        InputEntry("user", "q"),
        ReasoningEntry(
            "sum",
            id="rs_1",
            provider="openai-responses",
            metadata={"encrypted_content": "ENC", "item_id": "rs_1"},
        ),
        ReasoningEntry("foreign", provider="openai"),
        ToolCallEntry("c1", "get_weather", '{"city": "P"}'),
        ToolResultEntry("c1", "sunny"),
        AssistantTextEntry("done"),
    ]
    body = OpenAIResponsesProvider("m", base_url=LOCAL).build_request(
        view,
        tools=[weather_tool()],
        response_format=RESPONSE_FORMAT,
        settings=ModelSettings(max_tokens=50),
    )
    assert body["input"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "sum"}],
            "encrypted_content": "ENC",
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": '{"city": "P"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"role": "assistant", "content": "done"},
    ]
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "out",
            "schema": {"type": "object"},
            "strict": True,
        }
    }
    assert body["max_output_tokens"] == 50 and body["store"] is False
    assert body["tools"][0]["name"] == "get_weather"


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


async def run(*events: dict[str, Any]) -> Any:
    client = replay_client(sse(*events, done=False, events=[e["type"] for e in events]))
    try:
        return assemble(
            [
                d
                async for d in OpenAIResponsesProvider("m", base_url=LOCAL, client=client).stream(
                    [InputEntry("user", "q")]
                )
            ]
        )
    finally:
        await client.aclose()


async def test_stream_reasoning_item_text_calls_and_usage() -> None:
    turn = await run(
        ev("response.created", response={}),
        ev("response.reasoning_summary_text.delta", item_id="rs", delta="thinking"),
        ev(
            "response.output_item.done",
            output_index=0,
            item={
                "type": "reasoning",
                "id": "rs",
                "summary": [{"type": "summary_text", "text": "thinking"}],
                "encrypted_content": "E",
            },
        ),
        ev("response.output_text.delta", delta="Hi"),
        ev(
            "response.output_item.added",
            output_index=2,
            item={
                "type": "function_call",
                "id": "fc",
                "call_id": "c",
                "name": "f",
                "arguments": "",
            },
        ),
        ev("response.function_call_arguments.delta", item_id="fc", delta='{"a"'),
        ev("response.function_call_arguments.delta", item_id="fc", delta=":1}"),
        ev(
            "response.output_item.done",
            output_index=2,
            item={
                "type": "function_call",
                "id": "fc",
                "call_id": "c",
                "name": "f",
                "arguments": '{"a":1}',
            },
        ),
        ev(
            "response.output_item.added",
            output_index=3,
            item={"type": "function_call", "id": "fc2", "call_id": "c2", "name": "g"},
        ),
        ev(
            "response.output_item.done",
            output_index=3,
            item={
                "type": "function_call",
                "id": "fc2",
                "call_id": "c2",
                "name": "g",
                "arguments": "{}",
            },
        ),
        ev(
            "response.completed",
            response={
                "status": "completed",
                "usage": {
                    "input_tokens": 20,
                    "output_tokens": 5,
                    "input_tokens_details": {"cached_tokens": 8},
                },
            },
        ),
    )
    assert turn.reasoning == "thinking" and turn.text == "Hi"
    (entry,) = turn.reasoning_entries
    assert entry.metadata == {"item_id": "rs", "encrypted_content": "E"} and entry.id == "rs"
    assert turn.calls == {
        0: {"id": "c", "name": "f", "arguments": '{"a":1}'},
        1: {"id": "c2", "name": "g", "arguments": "{}"},
    }
    assert turn.finish == "tool_calls" and turn.usage.cache_read_tokens == 8


async def test_incomplete_failed_and_truncated() -> None:
    short = await run(
        ev("response.output_text.delta", delta="x"),
        ev(
            "response.incomplete",
            response={
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
            },
        ),
    )
    assert short.finish == "length"
    with pytest.raises(ProviderError) as info:
        await run(
            ev("response.failed", response={"error": {"code": "server_error", "message": "boom"}})
        )
    assert info.value.retryable and "boom" in str(info.value)
    with pytest.raises(ProviderError) as cut:
        await run(ev("response.output_text.delta", delta="x"))
    assert cut.value.retryable
