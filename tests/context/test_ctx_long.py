"""A 300-turn conversation against a scripted 32k-window endpoint."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from lovia.context import Compaction, CompactionRequest, InMemoryResultStore, TokenCounter
from lovia.context.compaction import SCRATCH_KEY
from lovia.events import TextDelta
from lovia.parts import ImagePart, TextPart
from lovia.providers.base import FinishDelta, ModelDelta, ModelSettings
from lovia.tools.base import Tool
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .ctx_support import SUMMARY_TEXT, assert_pairs_valid, dump, run_context

WINDOW = 32_000
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40).decode("ascii")


class WindowedEndpoint:
    """An in-test endpoint with a 32k window and its own 'real' tokenizer.

    Why a class and not ``ScriptedProvider``: the test needs the endpoint's view of token
    counts (text weighs 15% more than lovia's estimate, images less) to drive calibration,
    and it needs to answer the summariser with a valid summary; both are request-dependent.
    """

    name = "windowed"
    model = "w-32k"
    supports_json_schema = False

    def __init__(self) -> None:
        self.real_counter = TokenCounter(image_tokens=1_100)
        self.summary_requests: list[int] = []

    def context_window(self) -> int:
        return WINDOW

    def real_tokens(self, view: Sequence[TranscriptEntry], tools: Sequence[Tool]) -> int:
        return int(self.real_counter.count(view) * 1.15) + self.real_counter.count_tools(tools)

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        size = self.real_tokens(entries, tools)
        self.summary_requests.append(size)
        yield TextDelta(SUMMARY_TEXT + "\n" + "fact " * 50)
        yield FinishDelta("stop")


def _output(i: int) -> tuple[str, tuple[ImagePart | TextPart, ...] | None]:
    kind = i % 6
    if kind == 0:
        return f"{i} small ok", None
    if kind == 1:
        return f"{i} medium\r\n" + "lorem ipsum " * 80, None
    if kind == 2:
        return f"{i} large\n" + "0123456789abcdef\n" * 600, None
    if kind == 3:
        return f"{i} 中文输出：" + "上下文窗口管理测试。" * 300, None
    if kind == 4:
        return f"[image: image/png, {len(PNG)} bytes] {i}", (
            ImagePart(data=PNG, mime_type="image/png"),
        )
    return f"{i} mixed 混合 " + "data ✓ " * 400, None


async def test_300_turns_every_view_fits_and_every_cleared_result_is_recallable() -> None:
    endpoint = WindowedEndpoint()
    store = InMemoryResultStore(max_entries=None)
    policy = Compaction(reserve_output_tokens=4_096, store=store)
    tools = [
        Tool(
            name="lookup",
            description="Look something up.",
            parameters={"type": "object"},
            invoke=_never,
        ),
        *policy.tools(),
    ]
    tool_names = frozenset(t.name for t in tools)
    entries: list[TranscriptEntry] = [InputEntry("system", "You are a careful assistant.")]
    outputs: dict[str, str] = {}
    scratch: dict[str, Any] = {}
    last_real: int | None = None
    previous: list[str] | None = None
    compactions = 0
    for turn in range(300):
        content: str | tuple[TextPart | ImagePart, ...] = f"turn {turn}: please continue 继续"
        if turn % 25 == 0:
            content = (
                TextPart(f"turn {turn}: look at this"),
                ImagePart(data=PNG, mime_type="image/png"),
            )
        cid = f"call_{turn}"
        out, parts = _output(turn)
        outputs[cid] = out
        entries += [
            InputEntry("user", content),
            ToolCallEntry(cid, "lookup", json.dumps({"turn": turn})),
            ToolResultEntry(cid, out, parts=parts),
            AssistantTextEntry(f"done with turn {turn}"),
        ]
        req = CompactionRequest(
            entries=tuple(entries),
            provider=endpoint,
            model=endpoint.model,
            tools=tools,
            tool_names=tool_names,
            last_input_tokens=last_real,
            scratch=scratch,
            run_id="long-run",
            session_id="long-session",
        )
        res = await policy.compact(req)
        real = endpoint.real_tokens(res.entries, tools)
        assert real <= WINDOW - 4_096, f"turn {turn}: view of {real} tokens overflows"
        assert_pairs_valid(res.entries)
        view = dump(res.entries)
        if previous is not None and not res.compacted:
            assert view[: len(previous)] == previous, f"turn {turn}: prefix changed"
        compactions += res.compacted
        previous, last_real = view, real
    assert compactions >= 3
    assert endpoint.summary_requests, "the long run should have summarised"
    assert max(endpoint.summary_requests) <= WINDOW
    state = scratch[SCRATCH_KEY]
    ratio = state["calibration"]["ratio"]
    assert 0.5 <= ratio <= 2.5 and ratio > 1.0  # calibrated toward the endpoint
    decided = set(state["cleared"]) | set(state["offloaded"])
    assert decided
    recall = tools[-1]
    ctx = run_context(entries)
    for cid in decided:
        assert await recall.invoke({"ref": cid}, ctx) == outputs[cid]
    for record in state["offloaded"].values():
        assert await recall.invoke({"ref": record["digest"]}, ctx) in outputs.values()


async def _never(args: dict[str, Any], ctx: Any) -> Any:
    raise AssertionError("tools are not executed in this test")
