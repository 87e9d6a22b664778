"""Stage-level behaviours and the summariser, driven through Compaction."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from lovia.context import (
    ClearToolResults,
    Compaction,
    CompactionState,
    LLMSummarizer,
    OffloadToolResults,
    SummarizationError,
    SummarizeHistory,
    SummaryState,
    TokenCounter,
    fingerprint,
    result_digest,
    transcript_to_text,
)
from lovia.context.compaction import SCRATCH_KEY
from lovia.parts import ImagePart
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .ctx_support import SUMMARY_TEXT, SummaryProvider, exchange, request, transcript

PNG = "iVBORw0KGgo="


def _policy(**kw: Any) -> Compaction:
    kw.setdefault("context_window", 20_000)
    kw.setdefault("reserve_output_tokens", 0)
    kw.setdefault("compact_at", 0.8)
    kw.setdefault("compact_to", 0.5)
    return Compaction(**kw)


def _markers(view: Sequence[TranscriptEntry], word: str) -> set[str]:
    return {e.call_id for e in view if isinstance(e, ToolResultEntry) and word in e.output}


async def test_clear_takes_image_results_despite_their_tiny_projection() -> None:
    entries: list[TranscriptEntry] = [InputEntry("system", "s")]
    for i in range(12):
        cid = f"img_{i}"
        entries += [
            InputEntry("user", f"q{i}"),
            ToolCallEntry(cid, "shot"),
            ToolResultEntry(cid, "[image]", parts=(ImagePart(data=PNG, mime_type="image/png"),)),
        ]
    res = await _policy(stages=[ClearToolResults()]).compact(request(tuple(entries)))
    assert res.compacted and _markers(res.entries, "cleared")


async def test_reused_call_ids_are_never_decided() -> None:
    entries = transcript(40)
    dup = [e for e in entries if isinstance(e, ToolCallEntry)][0].call_id
    entries += [ToolCallEntry(dup, "lookup"), ToolResultEntry(dup, "again" * 100)]
    entries += exchange(999, "tail")
    res = await _policy(stages=[OffloadToolResults(min_chars=100), ClearToolResults()]).compact(
        request(tuple(entries))
    )
    assert res.compacted
    assert dup not in _markers(res.entries, "cleared") | _markers(res.entries, "offloaded")


async def test_offload_records_the_decision_even_when_the_store_fails() -> None:
    class BrokenStore:
        def put(self, key: str, content: str) -> None:
            raise OSError("disk full")

        def get(self, key: str) -> str | None:
            return None

    policy = _policy(stages=[OffloadToolResults(min_chars=1_000)], store=BrokenStore())
    res = await policy.compact(request(tuple(transcript(40))))
    assert res.compacted and _markers(res.entries, "offloaded")


async def test_offload_keys_the_store_by_content_digest() -> None:
    from lovia.context import InMemoryResultStore

    store = InMemoryResultStore()
    policy = _policy(stages=[OffloadToolResults(min_chars=1_000)], store=store)
    entries = transcript(40)
    await policy.compact(request(tuple(entries)))
    first = next(e for e in entries if isinstance(e, ToolResultEntry))
    assert store.get(result_digest(first.output)) == first.output


async def test_reactive_path_gets_no_stale_calibration_sample() -> None:
    policy = _policy(context_window=10_000_000)
    scratch: dict[str, Any] = {}
    entries = tuple(transcript(5))
    await policy.compact(request(entries, scratch=scratch, run_id="r"))
    sent = TokenCounter().count(entries)
    await policy.compact(request(entries, scratch=scratch, run_id="r", last_input_tokens=sent * 2))
    ratio = scratch[SCRATCH_KEY]["calibration"]["ratio"]
    assert ratio > 1.0  # the proactive call folded a sample
    await policy.compact(
        request(entries, scratch=scratch, run_id="r", overflow=True, last_input_tokens=1)
    )
    assert scratch[SCRATCH_KEY]["calibration"]["ratio"] == ratio


async def test_summary_survives_an_output_trim_and_a_system_swap() -> None:
    entries = transcript(20, 500)
    body = entries[1:]
    state = CompactionState(
        summary=SummaryState(text=SUMMARY_TEXT, covered=8, fingerprint=fingerprint(body[:8]))
    )
    scratch = {SCRATCH_KEY: state.to_dict()}
    trimmed: list[TranscriptEntry] = [InputEntry("system", "a new agent's head")]
    trimmed += [
        ToolResultEntry(e.call_id, e.output[:10]) if isinstance(e, ToolResultEntry) else e
        for e in body
    ]
    res = await _policy(context_window=10_000_000).compact(request(tuple(trimmed), scratch=scratch))
    assert "Background reference" in str(res.entries[1])
    assert res.entries[0] == trimmed[0]


async def test_a_frontier_that_splits_a_pair_is_rewound_to_a_safe_cut() -> None:
    entries = transcript(10, 50)
    body = entries[1:]
    split = 2  # between call_0 and its result
    state = CompactionState(
        summary=SummaryState(text="S", covered=split, fingerprint=fingerprint(body[:split]))
    )
    scratch: dict[str, Any] = {SCRATCH_KEY: state.to_dict()}
    res = await _policy(context_window=10_000_000).compact(request(tuple(entries), scratch=scratch))
    assert scratch[SCRATCH_KEY]["summary"]["covered"] == 1
    assert isinstance(res.entries[2], ToolCallEntry)  # head, summary, then the whole pair
    # no safe cut at all before the frontier: the summary is reset
    state = CompactionState(summary=SummaryState(text="S", covered=0, fingerprint=""))
    body2: list[TranscriptEntry] = [ToolCallEntry("a", "t"), ToolResultEntry("a", "r")]
    state.summary = SummaryState(text="S", covered=1, fingerprint=fingerprint(body2[:1]))
    scratch = {SCRATCH_KEY: state.to_dict()}
    await _policy(context_window=10_000_000).compact(request(tuple(body2), scratch=scratch))
    assert scratch[SCRATCH_KEY]["summary"] is None


async def test_circuit_breaker_is_per_run() -> None:
    provider = SummaryProvider(fail=1_000)
    # Over the trigger but under the window: the last resort has no reason to step in.
    policy = _policy(context_window=30_000, stages=[SummarizeHistory(max_failures=1)])
    scratch: dict[str, Any] = {}
    entries = tuple(transcript(50))
    await policy.compact(request(entries, provider=provider, scratch=scratch, run_id="r1"))
    await policy.compact(request(entries, provider=provider, scratch=scratch, run_id="r1"))
    assert len(provider.calls) == 1
    carried = json.loads(json.dumps(scratch))
    await policy.compact(request(entries, provider=provider, scratch=carried, run_id="r2"))
    assert len(provider.calls) == 2


def test_warns_when_the_protected_tail_covers_the_whole_view(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import asyncio

    # The tail always keeps the last entry: one message bigger than the window is all tail.
    policy = _policy(stages=[ClearToolResults()])
    entries = (*transcript(0), InputEntry("user", "z" * 100_000))
    with caplog.at_level(logging.WARNING, logger="lovia.context.compaction"):
        res = asyncio.run(policy.compact(request(entries)))
    assert not res.compacted
    assert "protected tail covers the whole view" in caplog.text


async def test_a_swapped_system_head_is_recounted_without_re_rendering_the_body() -> None:
    policy = _policy(context_window=10_000_000)
    entries = transcript(5)
    scratch: dict[str, Any] = {}
    await policy.compact(request(entries, scratch=scratch, run_id="r"))
    entries[0] = InputEntry("system", "handoff target " * 400)
    res = await policy.compact(request(entries, scratch=scratch, run_id="r"))
    assert res.entries[0] == entries[0]
    assert res.tokens_before > 1_000


# -- LLMSummarizer -----------------------------------------------------------------------


async def test_summarizer_retries_once_when_a_section_is_missing_then_ships() -> None:
    provider = SummaryProvider(reply="## Session intent\nonly this")
    text = await LLMSummarizer().summarize(transcript(1), previous=None, provider=provider)
    assert text == "## Session intent\nonly this"
    assert len(provider.calls) == 2
    assert "missing" in str(provider.calls[1][0][-1])


async def test_summarizer_complete_reply_needs_one_call_and_includes_the_previous_summary() -> None:
    provider = SummaryProvider()
    out = await LLMSummarizer().summarize(transcript(1), previous="OLD SUMMARY", provider=provider)
    assert out == SUMMARY_TEXT and len(provider.calls) == 1
    view, settings = provider.calls[0]
    assert "OLD SUMMARY" in str(view[1]) and settings is not None and settings.temperature == 0


@pytest.mark.parametrize("reply,finish", [("", "stop"), (SUMMARY_TEXT, "length")])
async def test_empty_or_truncated_summaries_raise(reply: str, finish: str) -> None:
    provider = SummaryProvider(reply=reply, finish=finish)
    with pytest.raises(SummarizationError):
        await LLMSummarizer().summarize(transcript(1), previous=None, provider=provider)


async def test_custom_prompt_and_sections() -> None:
    provider = SummaryProvider(reply="## Facts\nx")
    summarizer = LLMSummarizer(prompt="Summarise.\n{sections}", required_sections=["Facts"])
    assert (
        await summarizer.summarize(transcript(1), previous=None, provider=provider) == "## Facts\nx"
    )
    assert provider.calls[0][0][0] == InputEntry("system", "Summarise.\n## Facts")


def test_transcript_to_text_skips_reasoning_and_clips() -> None:
    entries: list[TranscriptEntry] = [
        ReasoningEntry("secret thoughts"),
        AssistantTextEntry("visible " * 100),
        ToolResultEntry("c1", "bad", is_error=True),
    ]
    text = transcript_to_text(entries, max_entry_chars=20)
    assert "secret" not in text and "chars cut" in text and "(error)" in text


async def test_stale_records_are_pruned_from_scratch() -> None:
    state = CompactionState(cleared={"ghost", "call_1"})
    scratch: dict[str, Any] = {SCRATCH_KEY: state.to_dict()}
    res = await _policy(context_window=10_000_000).compact(
        request(tuple(transcript(3)), scratch=scratch)
    )
    assert scratch[SCRATCH_KEY]["cleared"] == ["call_1"]
    assert _markers(res.entries, "cleared") == {"call_1"}


async def test_the_latest_reported_window_replaces_the_previous_one() -> None:
    policy = _policy(context_window=None, stages=[ClearToolResults()])
    scratch: dict[str, Any] = {}
    entries = tuple(transcript(30))
    for reported in (12_000, 9_000):
        await policy.compact(
            request(entries, overflow=True, reported_window=reported, scratch=scratch)
        )
    assert list(scratch[SCRATCH_KEY]["learned_windows"].values()) == [9_000]
