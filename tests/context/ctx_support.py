"""Shared builders for the lovia-context tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from lovia.context import REQUIRED_SECTIONS, CompactionRequest
from lovia.events import TextDelta
from lovia.messages import Usage
from lovia.providers.base import FinishDelta, ModelDelta, ModelSettings, UsageDelta
from lovia.run_context import RunContext
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_to_dict,
)

SUMMARY_TEXT = "\n".join(f"## {s}\nfolded fact" for s in REQUIRED_SECTIONS)


class SummaryProvider:
    """A minimal in-test Provider for the summariser side of the policy.

    Why not ``lovia.testing.ScriptedProvider``: the summariser needs a provider whose reply
    depends on the request (a summary every time, failures on demand) and that records the
    exact view and settings it was sent; this class is the smallest thing that satisfies
    the ``Provider`` protocol and does that. ``window`` is what ``context_window()``
    reports; ``summary_window`` makes it reject summarisation requests that do not fit.
    """

    name = "summary-test"
    model = "summary-model"
    supports_json_schema = False

    def __init__(
        self,
        *,
        reply: str = SUMMARY_TEXT,
        window: int | None = None,
        fail: int = 0,
        finish: str = "stop",
        summary_window: int | None = None,
    ) -> None:
        self.reply = reply
        self.window = window
        self.fail = fail
        self.finish = finish
        self.summary_window = summary_window
        self.calls: list[tuple[list[TranscriptEntry], ModelSettings | None]] = []
        self.request_sizes: list[int] = []

    def context_window(self) -> int | None:
        return self.window

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Any] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        self.calls.append((list(entries), settings))
        size = sum(len(json.dumps(entry_to_dict(e), ensure_ascii=False).encode()) for e in entries)
        self.request_sizes.append(size // 4)
        if self.summary_window is not None and size // 4 > self.summary_window:
            raise RuntimeError("summarisation request overflows the summariser's window")
        if self.fail > 0:
            self.fail -= 1
            raise RuntimeError("summariser down")
        yield TextDelta(self.reply[: len(self.reply) // 2])
        yield TextDelta(self.reply[len(self.reply) // 2 :])
        yield UsageDelta(Usage())
        yield FinishDelta(self.finish)


def exchange(i: int, output: str, *, is_error: bool = False) -> list[TranscriptEntry]:
    """One user turn with a tool call, its result and a reply."""
    cid = f"call_{i}"
    return [
        InputEntry("user", f"question {i}"),
        ToolCallEntry(cid, "lookup", json.dumps({"q": i})),
        ToolResultEntry(cid, output, is_error=is_error),
        AssistantTextEntry(f"answer {i}"),
    ]


def transcript(
    n: int, size: int = 2_000, *, system: str = "You are helpful."
) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = [InputEntry("system", system)]
    for i in range(n):
        out.extend(exchange(i, f"{i}:" + "x" * size))
    return out


def request(entries: Sequence[TranscriptEntry], **kw: Any) -> CompactionRequest:
    kw.setdefault("tool_names", frozenset({"recall_tool_result", "lookup"}))
    return CompactionRequest(entries=entries, **kw)


def dump(view: Sequence[TranscriptEntry]) -> list[str]:
    return [json.dumps(entry_to_dict(e), ensure_ascii=False, sort_keys=True) for e in view]


def assert_pairs_valid(view: Sequence[TranscriptEntry]) -> None:
    """No orphan result; every call before the last entry has its result."""
    open_ids: dict[str, int] = {}
    for e in view:
        if isinstance(e, ToolCallEntry):
            open_ids[e.call_id] = open_ids.get(e.call_id, 0) + 1
        elif isinstance(e, ToolResultEntry):
            assert open_ids.get(e.call_id, 0) > 0, f"orphan result {e.call_id}"
            open_ids[e.call_id] -= 1
    assert not any(open_ids.values()), f"calls without results: {open_ids}"


def run_context(entries: list[TranscriptEntry]) -> RunContext[None]:
    """A RunContext for invoking a tool directly (agent/cancel/mailbox are unused here)."""
    return RunContext(
        deps=None,
        agent=cast(Any, None),
        cancel_token=cast(Any, None),
        mailbox=cast(Any, None),
        entries=entries,
    )
