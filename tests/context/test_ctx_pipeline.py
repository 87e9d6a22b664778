"""Compaction driven directly through CompactionRequest, turn by turn."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest
from lovia.context import (
    ClearToolResults,
    Compaction,
    InMemoryResultStore,
    OffloadToolResults,
    StageContext,
    SummarizeHistory,
    TokenCounter,
)
from lovia.context.compaction import SCRATCH_KEY
from lovia.transcript import (
    InputEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .ctx_support import (
    SummaryProvider,
    assert_pairs_valid,
    dump,
    exchange,
    request,
    run_context,
    transcript,
)


def _policy(**kw: Any) -> Compaction:
    kw.setdefault("context_window", 20_000)
    kw.setdefault("reserve_output_tokens", 0)
    kw.setdefault("compact_at", 0.8)
    kw.setdefault("compact_to", 0.5)
    kw.setdefault("stages", [OffloadToolResults(), ClearToolResults()])
    return Compaction(**kw)


async def _grow(
    policy: Compaction,
    turns: range,
    *,
    size: int = 2_000,
    scratch: dict[str, Any] | None = None,
    provider: Any = None,
    run_id: str = "run-1",
    session_id: str | None = None,
    history: Sequence[TranscriptEntry] = (),
) -> tuple[list[TranscriptEntry], list[Any], dict[str, Any]]:
    """Grow a transcript one exchange per turn, compacting before each 'model call'."""
    scratch = {} if scratch is None else scratch
    entries: list[TranscriptEntry] = list(history) or [InputEntry("system", "sys")]
    results = []
    for i in turns:
        entries.extend(exchange(i, f"{i}:" + "x" * size))
        frozen = tuple(entries)
        res = await policy.compact(
            request(
                frozen, scratch=scratch, run_id=run_id, session_id=session_id, provider=provider
            )
        )
        results.append(res)
    return entries, results, scratch


async def test_no_pressure_returns_the_transcript_object_itself() -> None:
    entries = tuple(transcript(5))
    res = await _policy().compact(request(entries))
    assert res.entries is entries and not res.changed and not res.compacted


async def test_transcript_is_never_mutated() -> None:
    entries = transcript(60)
    snapshot = copy.deepcopy(entries)
    policy = _policy(stages=None)
    res = await policy.compact(request(entries, provider=SummaryProvider()))
    assert res.compacted and entries == snapshot
    res = await policy.compact(request(entries, overflow=True, provider=SummaryProvider()))
    assert entries == snapshot


async def test_prefix_is_byte_stable_across_turns_and_decisions_are_monotonic() -> None:
    policy = _policy()
    _, results, _ = await _grow(policy, range(90))
    compactions = [i for i, r in enumerate(results) if r.compacted]
    assert 1 <= len(compactions) <= 10  # hysteresis: bursts, not every turn
    for prev, cur in zip(results, results[1:], strict=False):
        assert_pairs_valid(cur.entries)
        before, after = dump(prev.entries), dump(cur.entries)
        if not cur.compacted:
            assert after[: len(before)] == before
            continue
        # A burst only adds decisions: an entry may turn into a marker (or an offload marker
        # into a clear marker), but a clear marker, the final form, never changes again.
        assert len(after) == len(before) + 4
        for was, now in zip(before, after, strict=False):
            if was != now:
                assert "Earlier tool result cleared" not in was
                assert '"type": "tool_result"' in now
                if "Tool output offloaded" in was:
                    assert "Earlier tool result cleared" in now
    cleared_runs = [
        {e.call_id for e in r.entries if isinstance(e, ToolResultEntry) and "cleared" in e.output}
        for r in results
    ]
    for a, b in zip(cleared_runs, cleared_runs[1:], strict=False):
        assert a <= b


async def test_every_view_fits_the_target_after_a_burst() -> None:
    policy = _policy()
    _, results, _ = await _grow(policy, range(90))
    trigger = 16_000
    for r in results:
        assert r.tokens_after <= trigger
        if r.compacted:
            assert r.tokens_after <= 10_000 and r.tokens_before > trigger
            assert r.detail and r.reason == "threshold"


async def test_protected_tail_is_never_compacted_on_the_proactive_path() -> None:
    keep = 3_000
    policy = _policy(keep_recent_tokens=keep)
    _, results, _ = await _grow(policy, range(90))
    counter = TokenCounter()
    for r in results:
        view = list(r.entries)
        n = len(view)
        # The suffix of the view within `keep` tokens holds no marker.
        used, k = 0, 0
        for e in reversed(view):
            used += counter.count_entry(e)
            if used > keep:
                break
            k += 1
        assert all(
            not (isinstance(e, ToolResultEntry) and e.output.startswith("[")) for e in view[n - k :]
        )


async def test_cleared_and_offloaded_results_come_back_byte_exact_through_recall() -> None:
    store = InMemoryResultStore()
    policy = _policy(store=store)
    entries: list[TranscriptEntry] = [InputEntry("system", "sys")]
    outputs = {}
    for i in range(60):
        out = f"{i}\r\n漢字 line\n" + ("y" * (6_000 if i % 3 == 0 else 1_500))
        outputs[f"call_{i}"] = out
        entries.extend(exchange(i, out))
    res = await policy.compact(request(tuple(entries)))
    assert res.compacted
    recall = policy.tools()[0]
    ctx = run_context(list(entries))
    markers = [
        e for e in res.entries if isinstance(e, ToolResultEntry) and e.output.startswith("[")
    ]
    assert markers
    for marker in markers:
        ref = marker.output.split('recall_tool_result("')[1].split('")')[0]
        assert await recall.invoke({"ref": ref}, ctx) == outputs[marker.call_id]
    # Without a store, recall falls back to the transcript (by call id, then by digest).
    bare = _policy().tools()[0]
    for marker in markers:
        ref = marker.output.split('recall_tool_result("')[1].split('")')[0]
        assert await bare.invoke({"ref": ref}, ctx) == outputs[marker.call_id]


async def test_reactive_overflow_compacts_harder_and_reports_a_meaningful_shrink() -> None:
    policy = _policy(context_window=100_000)  # the proactive path sees no pressure
    entries = tuple(transcript(60))
    proactive = await policy.compact(request(entries))
    assert not proactive.compacted and proactive.entries is entries
    res = await policy.compact(request(entries, overflow=True))
    assert res.compacted and res.reason == "overflow"
    assert res.tokens_after <= res.tokens_before * 0.95
    assert res.tokens_after <= 100_000 // 4 + 4_000
    assert_pairs_valid(res.entries)


async def test_reactive_overflow_without_anything_to_shrink_is_not_compacted() -> None:
    policy = _policy(context_window=10_000)
    entries = (InputEntry("system", "s"), InputEntry("user", "z" * 60_000))
    res = await policy.compact(request(entries, overflow=True))
    assert not res.compacted  # the loop surfaces the ContextOverflowError


async def test_reactive_path_works_without_window_information() -> None:
    policy = Compaction(stages=[OffloadToolResults(), ClearToolResults()])
    entries = tuple(transcript(80))
    proactive = await policy.compact(request(entries))
    assert proactive.entries is entries  # no window: proactive compaction is off
    res = await policy.compact(request(entries, overflow=True))
    assert res.compacted and res.tokens_after <= res.tokens_before * 0.95


async def test_reported_window_caps_later_views_and_is_persisted() -> None:
    policy = _policy(context_window=200_000)
    scratch: dict[str, Any] = {}
    entries = transcript(40)
    res = await policy.compact(
        request(tuple(entries), overflow=True, reported_window=12_000, scratch=scratch)
    )
    assert res.compacted
    assert list(scratch[SCRATCH_KEY]["learned_windows"].values()) == [12_000]
    entries.extend(exchange(99, "x" * 2_000))
    nxt = await policy.compact(request(tuple(entries), scratch=scratch))
    assert nxt.tokens_after <= int(12_000 * 0.8)
    # a smaller configured window is never raised by a report
    small = _policy(context_window=8_000)
    res = await small.compact(request(tuple(entries), overflow=True, reported_window=50_000))
    assert res.tokens_after <= 8_000


async def test_a_refuted_window_claim_is_dropped() -> None:
    policy = _policy(context_window=None)
    scratch: dict[str, Any] = {}
    entries = tuple(transcript(10))
    await policy.compact(request(entries, overflow=True, reported_window=3_000, scratch=scratch))
    assert scratch[SCRATCH_KEY]["learned_windows"]
    await policy.compact(request(entries, last_input_tokens=9_000, scratch=scratch))
    assert scratch[SCRATCH_KEY]["learned_windows"] == {}


async def test_window_discovery_runs_once_per_run_and_failures_do_not_fail() -> None:
    class Discovering(SummaryProvider):
        probes = 0

        async def discover_context_window(self) -> int | None:
            Discovering.probes += 1
            raise RuntimeError("endpoint down")

    provider = Discovering(window=20_000)
    policy = Compaction(reserve_output_tokens=0, stages=[ClearToolResults()])
    scratch: dict[str, Any] = {}
    for n in (10, 40, 45):
        res = await policy.compact(
            request(tuple(transcript(n)), provider=provider, scratch=scratch)
        )
    assert Discovering.probes == 1
    assert res.changed  # the provider's table window (20k) applied after the failed probe


async def test_decisions_survive_a_checkpoint_resume_in_a_new_process() -> None:
    policy = _policy()
    entries, results, scratch = await _grow(policy, range(70))
    last = results[-1]
    restored = json.loads(json.dumps(scratch))
    fresh = _policy()  # a new process: nothing in memory
    res = await fresh.compact(request(tuple(entries), scratch=restored, run_id="run-1"))
    assert not res.compacted
    assert dump(res.entries) == dump(last.entries)


async def test_decisions_carry_into_the_next_run_of_a_session() -> None:
    policy = _policy()
    entries, results, scratch = await _grow(policy, range(70), session_id="s1", run_id="r1")
    seeded = json.loads(json.dumps(scratch))  # what the loop reads back from the segment meta
    _, nxt, _ = await _grow(
        _policy(), range(70, 71), scratch=seeded, run_id="r2", session_id="s1", history=entries
    )
    before = dump(results[-1].entries)
    assert dump(nxt[0].entries)[: len(before)] == before
    # Same instance, unseeded scratch: the per-session cache carries the decisions.
    _, cached, _ = await _grow(policy, range(70, 71), run_id="r3", session_id="s1", history=entries)
    assert dump(cached[0].entries)[: len(before)] == before


async def test_rewritten_history_resets_the_summary_but_keeps_cleared_ids() -> None:
    provider = SummaryProvider()
    policy = _policy(stages=None)
    entries, results, scratch = await _grow(policy, range(250), size=300, provider=provider)
    assert scratch[SCRATCH_KEY]["summary"] is not None
    cleared = set(scratch[SCRATCH_KEY]["cleared"])
    assert cleared
    rewritten = [InputEntry("user", "rewritten") if e == entries[1] else e for e in entries]
    roomy = _policy(stages=None, context_window=10_000_000)  # no pressure: no new summary
    res = await roomy.compact(
        request(
            tuple(rewritten),
            scratch=json.loads(json.dumps(scratch)),
            provider=provider,
            run_id="r9",
        )
    )
    text = json.dumps(dump(res.entries))
    assert "Background reference" not in text
    still = {
        e.call_id for e in res.entries if isinstance(e, ToolResultEntry) and "cleared" in e.output
    }
    assert still and still <= cleared


async def test_summary_uses_the_runs_provider_at_temperature_zero_and_never_splits_pairs() -> None:
    provider = SummaryProvider()
    policy = _policy(stages=[SummarizeHistory()])
    _, results, scratch = await _grow(policy, range(50), provider=provider)
    assert provider.calls
    for view, settings in provider.calls:
        assert settings is not None and settings.temperature == 0
        assert view[0].role == "system"  # type: ignore[union-attr]
    assert any(r.summary for r in results)
    for r in results:
        assert_pairs_valid(r.entries)
    summarised = [r for r in results if r.compacted][0]
    assert "Background reference" in summarised.entries[1].content


async def test_summarisation_requests_always_fit_the_summarisers_window() -> None:
    from lovia.context import LLMSummarizer

    provider = SummaryProvider(summary_window=3_000)
    summarizer = LLMSummarizer(context_window=3_000, max_output_tokens=500)
    policy = _policy(stages=[SummarizeHistory(summarizer)], context_window=60_000)
    _, results, _ = await _grow(policy, range(120), size=9_000, provider=provider)
    assert len(provider.request_sizes) > 1
    assert max(provider.request_sizes) <= 3_000
    assert any(r.compacted for r in results)


async def test_summary_breaker_trips_after_failures_and_aggressive_path_probes() -> None:
    provider = SummaryProvider(fail=1_000)
    policy = _policy(stages=[SummarizeHistory(max_failures=2)])
    entries, _, scratch = await _grow(policy, range(60), provider=provider)
    assert len(provider.calls) == 2
    assert scratch[SCRATCH_KEY]["summary_failures"] == 2
    await policy.compact(
        request(tuple(entries), overflow=True, provider=provider, scratch=scratch, run_id="run-1")
    )
    assert len(provider.calls) == 3


async def test_mid_fold_failure_keeps_partial_coverage() -> None:
    from lovia.context import LLMSummarizer

    class FailSecond(SummaryProvider):
        async def stream(self, entries: Any, **kw: Any) -> Any:
            if len(self.calls) == 1:
                self.calls.append((list(entries), kw.get("settings")))
                raise RuntimeError("second fold fails")
            async for d in super().stream(entries, **kw):
                yield d

    provider = FailSecond()
    summarizer = LLMSummarizer(context_window=4_000, max_output_tokens=500)
    policy = _policy(stages=[SummarizeHistory(summarizer)], context_window=60_000)
    entries = tuple(transcript(100, 2_000))
    scratch: dict[str, Any] = {}
    res = await policy.compact(request(entries, provider=provider, scratch=scratch))
    assert len(provider.calls) == 2
    assert scratch[SCRATCH_KEY]["summary"]["covered"] > 0
    assert res.compacted


async def test_anti_thrash_skips_a_summary_that_would_save_little() -> None:
    provider = SummaryProvider()
    policy = _policy(stages=[SummarizeHistory(min_savings_ratio=0.9)])
    await _grow(policy, range(50), provider=provider)
    assert provider.calls == []


async def test_incremental_counting_never_recounts_known_entries() -> None:
    class Counting(SummaryProvider):
        def __init__(self) -> None:
            super().__init__()
            self.counted = 0

        def estimate_tokens(self, entries: Sequence[TranscriptEntry]) -> int:
            self.counted += len(entries)
            return sum(len(json.dumps(str(e))) // 4 for e in entries)

    provider = Counting()
    policy = _policy(context_window=10_000_000)
    entries, _, _ = await _grow(policy, range(200), provider=provider, size=50)
    assert provider.counted == len(entries)


async def test_custom_stage_decisions_persist_even_when_a_later_stage_raises() -> None:
    class ClearThenFail:
        name = "clear_then_fail"

        async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
            for e in body[: ctx.tail_start]:
                if isinstance(e, ToolResultEntry):
                    ctx.state.decide_clear(e.call_id)
                    break
            raise RuntimeError("stage bug")

    class Never:
        name = "never"

        async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
            return False

    # Over the trigger but under the window after one clear: no last resort on top.
    policy = _policy(
        context_window=40_000, compact_at=0.6, compact_to=0.3, stages=[ClearThenFail(), Never()]
    )
    res = await policy.compact(request(tuple(transcript(60))))
    assert res.compacted and res.changed
    assert (
        sum(1 for e in res.entries if isinstance(e, ToolResultEntry) and "cleared" in e.output) == 1
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_window": 0},
        {"context_window": True},
        {"compact_at": 0.5, "compact_to": 0.6},
        {"compact_at": 1000, "compact_to": 2000},
        {"compact_at": 1.2},
        {"keep_recent_tokens": -1},
        {"reserve_output_tokens": True},
        {"image_tokens": -5},
    ],
)
def test_constructor_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Compaction(**kwargs)


def test_mixed_watermark_kinds_are_accepted() -> None:
    Compaction(compact_at=100_000, compact_to=0.5)
