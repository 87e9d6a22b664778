from __future__ import annotations

import copy

from lovia.context import (
    CompactionState,
    OffloadRecord,
    SummaryState,
    clear_marker,
    offload_marker,
    pair_safe_cuts,
    protected_tail_start,
    render_view,
    summary_entry,
)
from lovia.context.prompts import SUMMARY_WRAPPER
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .ctx_support import assert_pairs_valid, transcript


def test_markers_keep_call_id_and_error_flag_and_mention_recall_only_when_available() -> None:
    result = ToolResultEntry("call_42", "boom" * 100, is_error=True)
    marker = clear_marker(result, recall=True)
    assert (marker.call_id, marker.is_error) == ("call_42", True)
    assert 'recall_tool_result("call_42")' in marker.output
    assert "recall_tool_result" not in clear_marker(result, recall=False).output
    record = OffloadRecord(preview="boomboom", chars=400, digest="ab" * 32)
    off = offload_marker(result, record, recall=True)
    assert off.is_error and "boomboom" in off.output and "ab" * 32 in off.output
    assert "recall_tool_result" not in offload_marker(result, record, recall=False).output


def test_render_view_is_pure_and_applies_decisions() -> None:
    entries = transcript(4, 300)
    snapshot = copy.deepcopy(entries)
    state = CompactionState(
        cleared={"call_1"},
        offloaded={"call_2": OffloadRecord(preview="p", chars=300, digest="d" * 64)},
        summary=SummaryState(text="S", covered=4, fingerprint="x"),
    )
    state_before = state.to_dict()
    view = render_view(entries, state)
    assert entries == snapshot and state.to_dict() == state_before
    assert view == render_view(entries, state)
    assert view[0] == entries[0] and view[1] == summary_entry("S")
    assert SUMMARY_WRAPPER.format(summary="S") == view[1].content
    outputs = {e.call_id: e.output for e in view if isinstance(e, ToolResultEntry)}
    assert "call_0" not in outputs  # covered by the summary
    assert outputs["call_1"].startswith("[Earlier tool result cleared")
    assert outputs["call_2"].startswith("[Tool output offloaded")
    assert outputs["call_3"] == entries[-2].output  # type: ignore[union-attr]
    assert_pairs_valid(view)


def _group() -> list[TranscriptEntry]:
    return [
        InputEntry("user", "go"),
        ToolCallEntry("a", "t"),
        ToolCallEntry("b", "t"),
        ToolResultEntry("a", "1"),
        ToolResultEntry("b", "2"),
        AssistantTextEntry("done"),
    ]


def test_pair_safe_cuts_keep_a_parallel_group_whole() -> None:
    assert pair_safe_cuts(_group()) == [0, 1, 5, 6]


def test_pair_safe_cuts_pair_duplicate_ids_like_parentheses() -> None:
    body: list[TranscriptEntry] = [
        ToolCallEntry("x", "t"),
        ToolResultEntry("x", "1"),
        ToolCallEntry("x", "t"),
        ToolCallEntry("x", "t"),
        ToolResultEntry("x", "2"),
        ToolResultEntry("x", "3"),
    ]
    assert pair_safe_cuts(body) == [0, 2, 6]


def test_protected_tail_is_budgeted_anchors_the_user_and_never_splits_pairs() -> None:
    body = _group() + _group()

    def cost(i: int) -> int:
        return 10

    # budget for 2 entries would cut inside the second group's results: expands to a safe cut
    start = protected_tail_start(body, cost, 20)
    assert start == 7 and start in pair_safe_cuts(body)
    # the last user message is anchored when affordable
    assert protected_tail_start(body, cost, 20, anchor_limit=1_000) == 6
    # always keeps the most recent entry even with no budget
    assert protected_tail_start(body, cost, 0) == 11
