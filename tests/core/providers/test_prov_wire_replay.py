"""Replay every captured wire transcript through the adapters and cross-check the result
with the official SDKs' own stream accumulators (the oracles)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.sse import SSEParser
from lovia.transcript import InputEntry

from .prov_helpers import WIRE, Turn, assemble, replay_client

OPENAI_FILES = sorted(p for p in WIRE.glob("*openai*.sse"))
ANTHROPIC_FILES = sorted(p for p in WIRE.glob("*anthropic*.sse"))


def _events(path: Path) -> list[tuple[str | None, str]]:
    parser = SSEParser()
    events = parser.feed(path.read_bytes()) + parser.close()
    return [(e.event, e.data) for e in events]


async def _replay(provider_cls: Any, path: Path) -> Turn:
    client = replay_client(path.read_bytes())
    provider = provider_cls("m", base_url="http://127.0.0.1:9", client=client)
    deltas = [d async for d in provider.stream([InputEntry("user", "hi")])]
    await client.aclose()
    return assemble(deltas)


def test_every_fixture_is_covered() -> None:
    assert len(OPENAI_FILES) + len(ANTHROPIC_FILES) == len(list(WIRE.glob("*.sse"))) >= 10


@pytest.mark.parametrize("path", OPENAI_FILES, ids=lambda p: p.stem)
async def test_openai_chat_matches_the_sdk_accumulator(path: Path) -> None:
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state: ChatCompletionStreamState = ChatCompletionStreamState()
    reasoning = ""
    for _, data in _events(path):
        chunk = ChatCompletionChunk.model_validate(json.loads(data))
        state.handle_chunk(chunk)
        for choice in chunk.choices:
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
    oracle = state.current_completion_snapshot
    ours = await _replay(OpenAIChatProvider, path)

    message = oracle.choices[0].message
    assert ours.text == (message.content or "")
    assert ours.reasoning == reasoning
    oracle_calls = message.tool_calls or []
    assert len(ours.calls) == len(oracle_calls)
    for (_, mine), theirs in zip(sorted(ours.calls.items()), oracle_calls, strict=False):
        assert mine["arguments"] == theirs.function.arguments
        # llama.cpp repeats id and name in every chunk; the SDK concatenates them, we keep one
        assert _repeats(theirs.id or "", mine["id"]) and _repeats(
            theirs.function.name, mine["name"]
        )
    assert ours.finish == oracle.choices[0].finish_reason
    if oracle.usage is not None:
        assert ours.usage is not None
        assert ours.usage.input_tokens == oracle.usage.prompt_tokens
        assert ours.usage.output_tokens == oracle.usage.completion_tokens
    for call in ours.calls.values():  # byte-exact arguments that still parse
        json.loads(call["arguments"])


def _repeats(text: str, unit: str) -> bool:
    return bool(unit) and text == unit * (len(text) // len(unit))


_STOP = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


@pytest.mark.parametrize("path", ANTHROPIC_FILES, ids=lambda p: p.stem)
async def test_anthropic_matches_the_sdk_accumulator(path: Path) -> None:
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    snapshot: Any = None
    json_bufs: dict[int, bytes] = {}
    for name, data in _events(path):
        if name == "ping":  # the SDK drops pings before accumulating, too
            continue
        snapshot = accumulate_event(
            event=adapter.validate_python(json.loads(data)),
            current_snapshot=snapshot,
            json_bufs=json_bufs,
        )
    ours = await _replay(AnthropicProvider, path)

    text = "".join(b.text for b in snapshot.content if b.type == "text")
    thinking = [b for b in snapshot.content if b.type == "thinking"]
    tools = [b for b in snapshot.content if b.type == "tool_use"]
    assert ours.text == text
    assert ours.reasoning == "".join(b.thinking for b in thinking)
    assert [(e.content, e.metadata.get("signature")) for e in ours.reasoning_entries] == [
        (b.thinking, b.signature) for b in thinking
    ]
    assert [
        (c["id"], c["name"], json.loads(c["arguments"])) for _, c in sorted(ours.calls.items())
    ] == [(b.id, b.name, b.input) for b in tools]
    assert ours.finish == _STOP[snapshot.stop_reason]
    assert ours.usage is not None and ours.usage.output_tokens == snapshot.usage.output_tokens


async def test_llamacpp_duplicate_function_call_fields_do_not_double_the_arguments() -> None:
    ours = await _replay(OpenAIChatProvider, WIRE / "llamacpppy-openai-tools.sse")
    (call,) = ours.calls.values()
    assert call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"city": "Paris"}
