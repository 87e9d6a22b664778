"""Anthropic's ``pause_turn`` end to end over the wire (issue 20.10): the paused text and
the continuation make one answer, and the continuation request replays the paused text."""

from __future__ import annotations

import json

from lovia import Agent, NoopContextPolicy, Runner
from lovia.providers.anthropic import AnthropicProvider

from .prov_wire_server import Reply, sse_lines, wire_server


def _stream(text: str, stop_reason: str) -> bytes:
    def event(name: str, **data: object) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}"

    return sse_lines(
        event(
            "message_start",
            message={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 1},
            },
        ),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        event("content_block_delta", index=0, delta={"type": "text_delta", "text": text}),
        event("content_block_stop", index=0),
        event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": 4},
        ),
        event("message_stop"),
    )


async def test_a_paused_turn_and_its_continuation_are_one_answer() -> None:
    replies = (
        Reply(_stream("The capital is", "pause_turn")),
        Reply(_stream(" Canberra.", "end_turn")),
    )
    async with wire_server(*replies) as srv:
        provider = AnthropicProvider("claude-x", base_url=srv.url, api_key="k")
        agent = Agent("geo", model=provider, context_policy=NoopContextPolicy())
        result = await Runner.run(agent, "What is the capital of Australia?")
        await provider.aclose()
    assert result.output == "The capital is Canberra."
    assert len(srv.bodies) == 2
    last = srv.bodies[1]["messages"][-1]
    assert last["role"] == "assistant"
    assert "The capital is" in json.dumps(last["content"])
