"""Contract items of the policy that the other test modules left unpinned.

Each test here was checked against a deliberate break of the behaviour it names (the test
fails with the break in place).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, overload

import pytest
from lovia.context import (
    ClearToolResults,
    Compaction,
    CompactionState,
    InMemoryResultStore,
    LLMSummarizer,
    NoopContextPolicy,
    OffloadToolResults,
    SummarizeHistory,
    TokenCounter,
    render_view,
    result_digest,
)
from lovia.context.compaction import SCRATCH_KEY
from lovia.tools.base import Tool
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .ctx_support import (
    SUMMARY_TEXT,
    SummaryProvider,
    assert_pairs_valid,
    dump,
    exchange,
    request,
    transcript,
)


def _policy(**kw: Any) -> Compaction:
    kw.setdefault("context_window", 20_000)
    kw.setdefault("reserve_output_tokens", 0)
    kw.setdefault("compact_at", 0.8)
    kw.setdefault("compact_to", 0.5)
    kw.setdefault("stages", [OffloadToolResults(), ClearToolResults()])
    return Compaction(**kw)


def _marked(view: Sequence[TranscriptEntry]) -> set[str]:
    return {e.call_id for e in view if isinstance(e, ToolResultEntry) and e.output.startswith("[")}


def _schema_tools(n: int) -> list[Tool]:
    async def never(args: dict[str, Any], ctx: Any) -> str:
        raise AssertionError("not executed")

    return [
        Tool(
            name=f"tool_{i}",
            description="A tool with a long description. " * 20,
            parameters={"type": "object", "properties": {"q": {"type": "string"}}},
            invoke=never,
        )
        for i in range(n)
    ]


async def test_the_tail_stays_verbatim_even_when_the_target_is_out_of_reach() -> None:
    # The tail (12k tokens) is bigger than the target (10k): only entries before it can be
    # compacted, so every burst stops short of the target instead of eating into the tail.
    # The tail is measured on the view as it stood when the burst started.
    keep = 12_000
    policy = _policy(keep_recent_tokens=keep)
    entries: list[TranscriptEntry] = [InputEntry("system", "sys")]
    scratch: dict[str, Any] = {}
    counter = TokenCounter()
    bursts = 0
    for i in range(60):
        entries.extend(exchange(i, f"{i}:" + "x" * 2_000))
        state = CompactionState.from_dict(json.loads(json.dumps(scratch.get(SCRATCH_KEY))))
        before = render_view(entries, state)
        tail: set[str] = set()
        used = 0
        for e in reversed(before):
            used += counter.count_entry(e)
            if used > keep:
                break
            if isinstance(e, ToolResultEntry):
                tail.add(e.call_id)
        res = await policy.compact(request(tuple(entries), scratch=scratch, run_id="r"))
        bursts += res.compacted
        newly = _marked(res.entries) - _marked(before)
        assert not newly & tail, f"turn {i}: tail results {newly & tail} were compacted"
    assert bursts >= 2


async def test_keep_last_results_stay_verbatim_whatever_the_pressure() -> None:
    def squeezed(*stages: Any) -> Compaction:
        return _policy(compact_at=1_000, compact_to=500, keep_recent_tokens=0, stages=stages)

    entries = tuple(transcript(30))
    for policy, kept, word in (
        (squeezed(OffloadToolResults(min_chars=100, keep_last=4)), 4, "offloaded"),
        (squeezed(ClearToolResults(keep_last=3)), 3, "cleared"),
    ):
        res = await policy.compact(request(entries))
        results = [e for e in res.entries if isinstance(e, ToolResultEntry)]
        assert res.compacted
        assert not _marked(results[-kept:])
        assert word in results[-kept - 1].output


async def test_a_reactive_pass_that_barely_shrinks_the_view_is_not_compacted() -> None:
    # Small results can be cleared, but the view is dominated by one huge user message, so
    # the retry would be doomed: the policy must not ask for it.
    entries: list[TranscriptEntry] = [InputEntry("system", "sys")]
    for i in range(5):
        entries.extend(exchange(i, f"{i}:" + "x" * 300))
    entries.append(InputEntry("user", "z" * 80_000))
    policy = _policy(context_window=30_000)
    res = await policy.compact(request(tuple(entries), overflow=True, run_id="r"))
    assert _marked(res.entries)  # decisions were made ...
    assert res.tokens_after > res.tokens_before * 0.95
    assert not res.compacted  # ... but they do not make a retry worthwhile


async def test_anti_thrash_is_bypassed_on_the_aggressive_path() -> None:
    provider = SummaryProvider()
    policy = _policy(stages=[SummarizeHistory(min_savings_ratio=0.99)])
    entries = tuple(transcript(60))
    await policy.compact(request(entries, provider=provider, run_id="r"))
    assert provider.calls == []  # proactive: the projected saving is under 99%
    res = await policy.compact(request(entries, provider=provider, overflow=True, run_id="r"))
    assert provider.calls and res.compacted and res.summary


async def test_a_summary_larger_than_what_it_replaces_is_rejected() -> None:
    provider = SummaryProvider(reply=SUMMARY_TEXT + "\n" + "padding " * 60_000)
    policy = _policy(stages=[SummarizeHistory()], context_window=40_000)
    scratch: dict[str, Any] = {}
    res = await policy.compact(
        request(tuple(transcript(80)), provider=provider, scratch=scratch, run_id="r")
    )
    assert provider.calls
    assert scratch[SCRATCH_KEY]["summary"] is None
    assert scratch[SCRATCH_KEY]["summary_failures"] == 1
    assert "Background reference" not in json.dumps(dump(res.entries))


async def test_markers_mention_recall_only_when_the_agent_has_the_tool() -> None:
    policy = _policy()
    entries = tuple(transcript(60))
    bare = await policy.compact(request(entries, tool_names=frozenset({"lookup"}), run_id="a"))
    assert _marked(bare.entries)
    assert "recall_tool_result" not in json.dumps(dump(bare.entries))
    # The same run gains the tool (a handoff to an agent that has it): markers now say so.
    full = await policy.compact(request(entries, run_id="a"))
    marker = next(e for e in full.entries if isinstance(e, ToolResultEntry) and "[" in e.output)
    assert f'recall_tool_result("{marker.call_id}")' in marker.output


async def test_tool_schemas_are_added_before_the_calibration_multiplier() -> None:
    big, none = _schema_tools(30), list[Tool]()
    schema_tokens = TokenCounter().count_tools(big)
    assert schema_tokens > 2_000
    policy = _policy(context_window=10_000_000)
    scratch: dict[str, Any] = {}
    entries = tuple(transcript(5))
    first = await policy.compact(request(entries, tools=big, scratch=scratch, run_id="r"))
    assert first.tokens_before == TokenCounter().count(entries) + schema_tokens
    # The endpoint reports exactly the estimate: the text estimate was right, so the ratio
    # must not move, even though this call carries no tools (a handoff swapped them).
    await policy.compact(
        request(
            entries,
            tools=none,
            scratch=scratch,
            run_id="r",
            last_input_tokens=first.tokens_before,
        )
    )
    assert scratch[SCRATCH_KEY]["calibration"]["ratio"] == 1.0


class _CountingEntries(Sequence[TranscriptEntry]):
    """A read-only transcript that counts how many entries the policy reads."""

    def __init__(self, items: list[TranscriptEntry]) -> None:
        self._items = items
        self.reads = 0

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> TranscriptEntry: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[TranscriptEntry]: ...

    def __getitem__(self, i: int | slice) -> TranscriptEntry | Sequence[TranscriptEntry]:
        if isinstance(i, slice):
            part = self._items[i]
            self.reads += len(part)
            return part
        self.reads += 1
        return self._items[i]

    def __iter__(self) -> Iterator[TranscriptEntry]:
        for e in self._items:
            self.reads += 1
            yield e


async def test_the_per_turn_cost_does_not_grow_with_the_transcript() -> None:
    # Decisions are made early (a small window), then the window is effectively unlimited
    # via an absolute trigger: each later turn must read only the new entries.
    policy = _policy(context_window=20_000, compact_at=16_000, compact_to=10_000)
    items: list[TranscriptEntry] = [InputEntry("system", "sys")]
    scratch: dict[str, Any] = {}
    reads: list[tuple[int, bool]] = []
    for i in range(400):
        items.extend(exchange(i, f"{i}:" + "x" * (2_000 if i < 40 else 4)))
        seq = _CountingEntries(items)
        res = await policy.compact(request(seq, scratch=scratch, run_id="r"))
        assert_pairs_valid(res.entries)
        reads.append((seq.reads, not res.detail))  # a burst reads everything
    assert scratch[SCRATCH_KEY]["cleared"] or scratch[SCRATCH_KEY]["offloaded"]
    steady = [n for n, quiet in reads[100:] if quiet]
    assert len(steady) > 200
    assert max(steady) <= 20, f"reads per quiet turn grow with the transcript: {steady[-5:]}"


async def test_a_reused_call_id_lifts_the_old_decision_instead_of_hiding_the_new_result() -> None:
    policy = _policy(stages=[ClearToolResults()])
    entries = transcript(40)
    scratch: dict[str, Any] = {}
    first = await policy.compact(request(tuple(entries), scratch=scratch, run_id="r"))
    assert "call_1" in _marked(first.entries)
    entries += [
        InputEntry("user", "again"),
        ToolCallEntry("call_1", "lookup", "{}"),
        ToolResultEntry("call_1", "FRESH RESULT"),
        AssistantTextEntry("ok"),
    ]
    res = await policy.compact(request(tuple(entries), scratch=scratch, run_id="r"))
    assert [e.output for e in res.entries if isinstance(e, ToolResultEntry)][-1] == "FRESH RESULT"
    assert "call_1" not in scratch[SCRATCH_KEY]["cleared"]
    # The same holds for state loaded from scratch (a resumed run or the next session run).
    loaded = {SCRATCH_KEY: CompactionState(cleared={"call_0", "call_1"}).to_dict()}
    fresh = await _policy(context_window=10_000_000).compact(
        request(tuple(entries), scratch=loaded)
    )
    assert _marked(fresh.entries) == {"call_0"}
    assert loaded[SCRATCH_KEY]["cleared"] == ["call_0"]


def test_summarizer_validation_rejects_non_int_windows() -> None:
    for bad in (1.5, "4096", True, 0):
        with pytest.raises(ValueError):
            LLMSummarizer(context_window=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            LLMSummarizer(max_output_tokens=bad)  # type: ignore[arg-type]


async def test_a_fold_never_sends_a_block_too_big_for_the_summarisers_window() -> None:
    # One parallel group of 300 calls is a single pair-safe block: no amount of clipping
    # fits it into a 1,500-token summariser, so the fold must stop before it.
    provider = SummaryProvider(summary_window=1_500)
    summarizer = LLMSummarizer(context_window=1_500, max_output_tokens=200)
    policy = _policy(stages=[SummarizeHistory(summarizer)], context_window=100_000)
    entries: list[TranscriptEntry] = [InputEntry("system", "sys")]
    for i in range(20):
        entries.extend(exchange(i, f"{i}:" + "x" * 400))
    group = [f"g{i}" for i in range(300)]
    entries.append(InputEntry("user", "fan out"))
    entries.extend(ToolCallEntry(cid, "lookup", "{}") for cid in group)
    entries.extend(ToolResultEntry(cid, "y" * 400) for cid in group)
    entries.append(AssistantTextEntry("fanned out"))
    for i in range(20, 200):
        entries.extend(exchange(i, f"{i}:" + "x" * 400))
    scratch: dict[str, Any] = {}
    res = await policy.compact(
        request(tuple(entries), provider=provider, scratch=scratch, overflow=True)
    )
    assert provider.request_sizes and max(provider.request_sizes) <= 1_500
    assert scratch[SCRATCH_KEY]["summary_failures"] == 0
    assert res.summary  # the span before the group was still folded
    assert_pairs_valid(res.entries)


async def test_an_oversized_tail_result_loses_its_immunity_only_on_the_aggressive_path() -> None:
    store = InMemoryResultStore()
    stages = [OffloadToolResults(keep_last=0), ClearToolResults(keep_last=0)]
    policy = _policy(context_window=20_000, store=store, stages=stages)
    # The view ends with a fresh ~18k-token result: the most recent entry, always in the tail.
    entries = [*transcript(3, 100), *exchange(9, "giant " * 12_000)[:-1]]
    proactive = await policy.compact(request(tuple(entries), run_id="a"))
    assert "call_9" not in _marked(proactive.entries)
    res = await policy.compact(request(tuple(entries), overflow=True, run_id="a"))
    assert res.compacted and "call_9" in _marked(res.entries)
    assert store.get(result_digest("giant " * 12_000)) == "giant " * 12_000


async def test_the_window_probe_is_skipped_when_the_window_is_configured() -> None:
    class Probed(SummaryProvider):
        probes = 0

        async def discover_context_window(self) -> int | None:
            Probed.probes += 1
            return 1_000

    provider = Probed(window=1_000)
    res = await _policy(context_window=10_000_000).compact(
        request(tuple(transcript(20)), provider=provider)
    )
    assert Probed.probes == 0 and not res.changed


async def test_noop_policy_returns_the_same_sequence_object() -> None:
    entries = transcript(3)
    res = await NoopContextPolicy().compact(request(entries))
    assert res.entries is entries and not res.changed and not res.compacted


async def test_a_learned_window_belongs_to_its_endpoint_and_model() -> None:
    policy = _policy(context_window=None)
    scratch: dict[str, Any] = {}
    entries = tuple(transcript(30))
    await policy.compact(
        request(entries, model="small", overflow=True, reported_window=6_000, scratch=scratch)
    )
    grown = tuple(transcript(60))
    other = await policy.compact(request(grown, model="large", scratch=scratch))
    assert not other.compacted and other.tokens_after > 6_000  # nothing known about "large"
    same = await policy.compact(request(grown, model="small", scratch=scratch))
    assert same.compacted and same.tokens_after <= 6_000 * 0.8


def test_the_token_memo_is_bounded() -> None:
    calls: list[int] = []

    class Estimator:
        def estimate_tokens(self, entries: Sequence[TranscriptEntry]) -> int:
            calls.append(1)
            return 1

    counter = TokenCounter(estimator=Estimator())
    first = InputEntry("user", "first")
    counter.count_entry(first)
    counter.count(InputEntry("user", "x") for _ in range(70_000))
    calls.clear()
    counter.count_entry(first)
    assert calls == [1]  # evicted long ago, so counted again


async def test_bursts_only_add_decisions_offload_markers_included() -> None:
    # Mixed sizes so both stages decide. Quiet turns keep the whole previous view as the
    # prefix; a burst may turn a result into a marker, or an offload marker into a clear
    # marker, and changes nothing else.
    policy = _policy()
    entries: list[TranscriptEntry] = [InputEntry("system", "sys")]
    previous: list[str] | None = None
    kinds: set[str] = set()
    for i in range(120):
        entries.extend(exchange(i, f"{i}:" + "x" * (6_000 if i % 2 else 1_200)))
        res = await policy.compact(request(tuple(entries), run_id="r"))
        view = dump(res.entries)
        kinds |= {k for k in ("offloaded", "cleared") if any(k in v for v in view)}
        if previous is not None:
            assert len(view) == len(previous) + 4
            for a, b in zip(previous, view, strict=False):
                if a == b:
                    continue
                assert res.compacted, f"turn {i}: the view changed without a burst"
                assert "Earlier tool result cleared" not in a
                if "Tool output offloaded" in a:
                    assert "Earlier tool result cleared" in b
                assert '"type": "tool_result"' in b
        previous = view
    assert kinds == {"offloaded", "cleared"}
