"""Test-side helpers: reassemble a provider stream, and serve captured bytes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from lovia.events import ReasoningDelta, TextDelta
from lovia.messages import Usage
from lovia.providers.base import (
    EntryCompletedDelta,
    FinishDelta,
    ModelDelta,
    ToolCallDelta,
    UsageDelta,
)
from lovia.transcript import ReasoningEntry

WIRE = Path(__file__).parent / "wire"
"""Captured transcripts and request bodies (a copy of shared/fixtures/wire)."""


@dataclass
class Turn:
    """What a stream reassembles into (the same rules the run loop applies)."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    completed: list[Any] = field(default_factory=list)
    usage: Usage | None = None
    finish: str | None = None
    order: list[str] = field(default_factory=list)

    @property
    def reasoning_entries(self) -> list[ReasoningEntry]:
        return [e for e in self.completed if isinstance(e, ReasoningEntry)]


def assemble(deltas: Sequence[ModelDelta]) -> Turn:
    turn = Turn()
    for d in deltas:
        assert turn.finish is None, f"delta after FinishDelta: {d!r}"
        if isinstance(d, TextDelta):
            turn.text += d.delta
        elif isinstance(d, ReasoningDelta):
            turn.reasoning += d.delta
        elif isinstance(d, ToolCallDelta):
            slot = turn.calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
            if d.call_id:
                assert not slot["id"], "call_id sent twice"
                slot["id"] = d.call_id
            if d.name:
                assert not slot["name"], "name sent twice"
                slot["name"] = d.name
            slot["arguments"] += d.arguments
        elif isinstance(d, UsageDelta):
            turn.usage = d.usage
        elif isinstance(d, EntryCompletedDelta):
            turn.completed.append(d.entry)
        elif isinstance(d, FinishDelta):
            turn.finish = d.reason
        turn.order.append(type(d).__name__)
    return turn


def replay_client(
    data: bytes,
    *,
    status: int = 200,
    content_type: str = "text/event-stream",
    seen: list[httpx.Request] | None = None,
) -> httpx.AsyncClient:
    """An httpx client whose every request gets ``data`` back (captured wire bytes)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, headers={"content-type": content_type}, content=data)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def sse(*payloads: Any, done: bool = True, events: Sequence[str | None] | None = None) -> bytes:
    """Build an SSE body from JSON payloads (optionally named events)."""
    parts = []
    for i, p in enumerate(payloads):
        name = events[i] if events else None
        head = f"event: {name}\n" if name else ""
        parts.append(f"{head}data: {json.dumps(p)}\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def body_of(request: httpx.Request) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(request.content)
    return data
