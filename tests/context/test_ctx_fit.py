"""Compaction that always fits: one unit for the tail and the watermarks, defaults that
work on small windows, configuration that cannot work, the last resort, and folds sized
to the summariser's window (issue 19)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from lovia import Agent, Runner
from lovia.context import (
    ClearToolResults,
    Compaction,
    ContextConfigError,
    LLMSummarizer,
    OffloadToolResults,
    SummarizeHistory,
    TokenBudget,
    TokenCounter,
)
from lovia.events import ContextCompacted
from lovia.exceptions import UserError
from lovia.stores.memory import InMemorySession
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .ctx_support import SummaryProvider, assert_pairs_valid, request, transcript
from .windowed import Reply, WindowedEndpoint

# -- one unit: calibrated tokens for the tail and the watermarks ---------------------------


def _agent_loop(n: int) -> list[TranscriptEntry]:
    """One task, then ``n`` tool calls with mid-sized results (no later user message)."""
    out: list[TranscriptEntry] = [InputEntry("system", "sys"), InputEntry("user", "do the task")]
    for i in range(n):
        cid = f"c{i}"
        out += [ToolCallEntry(cid, "step", json.dumps({"i": i})), ToolResultEntry(cid, "r" * 4_000)]
    return out


@pytest.mark.parametrize("ratio", [0.5, 0.8, 1.0, 1.42, 1.8, 2.5])
async def test_a_one_task_loop_compacts_proactively_at_every_calibration_ratio(
    ratio: float,
) -> None:
    window = 20_000
    policy = Compaction(context_window=window, reserve_output_tokens=0, stages=[ClearToolResults()])
    budget = TokenBudget(window, reserve_output_tokens=0)
    counter = TokenCounter()
    scratch: dict[str, Any] = {}
    sent: int | None = None
    bursts = 0
    for n in range(1, int(3 * window / (ratio * 1_000))):
        entries = tuple(_agent_loop(n))
        res = await policy.compact(
            request(entries, scratch=scratch, run_id="r", last_input_tokens=sent)
        )
        view = list(res.entries)
        real = int(ratio * counter.count(view))
        # The endpoint never sees more than the usable window, from the third call on.
        if n >= 3:
            assert real <= budget.usable, f"call {n}: {real} > {budget.usable}"
        if res.compacted:
            bursts += 1
            assert res.tokens_after <= budget.target_tokens
            assert res.reason == "threshold"
            # The stages did it at the trigger: the whole body was not protected, so the
            # last resort (which only runs when nothing else fits) was never needed.
            assert not any("left the oldest" in line for line in res.detail), res.detail
            # The tail kept verbatim is measured in the same (calibrated) unit.
            verbatim = 0
            for e in reversed(view):
                if isinstance(e, ToolResultEntry) and e.output.startswith("["):
                    break
                verbatim += int(ratio * counter.count_entry(e))
            assert verbatim >= budget.tail_tokens * 0.8
            assert verbatim <= budget.target_tokens
        sent = real
    assert bursts >= 2


# -- defaults that work on small windows, and configuration that cannot work -----------------


def test_the_reply_reserve_scales_down_on_small_windows() -> None:
    assert TokenBudget(4_096).usable == 3_072
    assert TokenBudget(8_192).usable == 6_144
    assert TokenBudget(200_000).usable == 200_000 - 16_384
    assert TokenBudget(8_192, keep_recent_tokens=100_000).tail_tokens == 6_144 * 3 // 4
    assert TokenBudget(8_192, reserve_output_tokens=1_000).usable == 7_192


def test_a_reserve_that_leaves_nothing_is_a_user_error_with_a_hint() -> None:
    with pytest.raises(ContextConfigError) as caught:
        Compaction(context_window=8_192, reserve_output_tokens=16_384)
    assert isinstance(caught.value, UserError) and isinstance(caught.value, ValueError)
    assert caught.value.hint and "reserve_output_tokens" in caught.value.hint
    with pytest.raises(ContextConfigError):
        TokenBudget(4_096, reserve_output_tokens=4_096)


async def test_a_reserve_larger_than_a_learned_window_fails_loudly() -> None:
    policy = Compaction(reserve_output_tokens=16_384)  # window unknown: accepted for now
    entries = tuple(transcript(30, 2_000))
    with pytest.raises(ContextConfigError, match="8192-token context window"):
        await policy.compact(request(entries, overflow=True, reported_window=8_192))


@pytest.mark.parametrize(
    "build",
    [
        lambda: Compaction(compact_at=0.5, compact_to=0.7),
        lambda: Compaction(compact_at=1.5),
        lambda: Compaction(context_window=0),
        lambda: Compaction(keep_recent_tokens=-1),
        lambda: OffloadToolResults(min_chars=0),
        lambda: SummarizeHistory(min_savings_ratio=1.0),
        lambda: LLMSummarizer(max_output_tokens=0),
        lambda: TokenCounter(image_tokens=True),
    ],
)
def test_every_configuration_mistake_is_a_user_error_with_a_hint(build: Any) -> None:
    with pytest.raises(UserError) as caught:
        build()
    assert caught.value.hint
    assert isinstance(caught.value, ValueError)  # callers that caught ValueError still do


# -- the last resort ------------------------------------------------------------------------


class _BrokenSummarizer:
    async def summarize(
        self, entries: Sequence[TranscriptEntry], *, previous: str | None, provider: Any
    ) -> str:
        raise RuntimeError("summariser down")


def _chat(turns: int, size: int) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = [InputEntry("system", "sys")]
    for i in range(turns):
        out += [
            InputEntry("user", f"q{i} " + "w" * size),
            AssistantTextEntry(f"a{i} " + "v" * size),
        ]
    return out


async def test_when_no_stage_can_fit_the_oldest_span_is_left_out_of_the_view() -> None:
    policy = Compaction(
        context_window=4_096, stages=[ClearToolResults(), SummarizeHistory(_BrokenSummarizer())]
    )
    entries = (*_chat(12, 2_000), InputEntry("user", "and now?"))
    res = await policy.compact(request(entries, run_id="r"))
    budget = TokenBudget(4_096)
    assert res.compacted and res.tokens_after <= budget.usable
    marker = res.entries[1]
    assert isinstance(marker, InputEntry) and isinstance(marker.content, str)
    assert "left out of this view" in marker.content and "record still holds" in marker.content
    assert any("left the oldest" in line and "record still holds" in line for line in res.detail)
    assert res.entries[-1] is entries[-1]  # the newest entry is kept
    assert len(entries) == 26  # the transcript is untouched
    # Sticky: the next call renders the same prefix.
    again = await policy.compact(request((*entries, AssistantTextEntry("ok")), run_id="r"))
    assert list(again.entries[: len(res.entries)]) == list(res.entries)


async def test_the_last_resort_keeps_pairs_whole() -> None:
    entries: list[TranscriptEntry] = [InputEntry("system", "sys"), InputEntry("user", "go")]
    for i in range(10):
        cid = f"c{i}"
        entries += [ToolCallEntry(cid, "t", "{}"), ToolResultEntry(cid, "x" * 150)]
        entries += [AssistantTextEntry("y" * 2_000)]
    policy = Compaction(context_window=4_096, stages=[ClearToolResults()])
    res = await policy.compact(request(tuple(entries), run_id="r"))
    assert res.compacted
    assert_pairs_valid(res.entries)


async def test_a_chat_on_an_unknown_window_recovers_reactively_every_time() -> None:
    """No window anywhere: the endpoint names none and the policy has none configured, so
    every overflow goes through the reactive path; the last resort makes each retry fit."""
    endpoint = WindowedEndpoint(window=6_000, factor=1.0, overhead=0, names_window=False)
    endpoint.script = lambda n: Reply(text=f"[reply {n}] " + endpoint.text_of(300))
    agent: Agent[None] = Agent(
        name="companion",
        model=endpoint,
        context_policy=Compaction(
            stages=[ClearToolResults(), SummarizeHistory(_BrokenSummarizer())]
        ),
    )
    session = InMemorySession()
    reactive = 0
    for _turn in range(15):
        handle = Runner.stream(agent, endpoint.text_of(700), session=session, session_id="s")
        notices = [e.notice async for e in handle if isinstance(e, ContextCompacted)]
        await handle.result()  # never raises
        reactive += sum(n.reactive for n in notices)
        assert all("record still holds" in " ".join(n.detail) for n in notices)
    assert reactive >= 1 and endpoint.rejections
    assert all(size <= endpoint.window for size in endpoint.sizes)


# -- folds sized to the summariser's window ---------------------------------------------------


async def test_max_output_tokens_is_a_ceiling_that_small_windows_scale_down() -> None:
    sizes = {}
    for window in (4_096, 200_000):
        provider = SummaryProvider()
        policy = Compaction(context_window=window, stages=[SummarizeHistory(LLMSummarizer())])
        entries = tuple(_chat(window // 500, 1_000))
        await policy.compact(request(entries, provider=provider, run_id="r"))
        assert provider.calls, f"no fold at {window}"
        sizes[window] = {s.max_tokens for _, s in provider.calls if s is not None}
    assert sizes[4_096] == {512}
    assert sizes[200_000] == {4_096}
    capped = SummaryProvider()
    policy = Compaction(
        context_window=200_000, stages=[SummarizeHistory(LLMSummarizer(max_output_tokens=300))]
    )
    await policy.compact(request(tuple(_chat(400, 1_000)), provider=capped, run_id="r"))
    assert {s.max_tokens for _, s in capped.calls if s is not None} == {300}


async def test_the_missing_section_retry_is_made_only_where_it_fits() -> None:
    incomplete = "## Session intent\nchat\n## Current state\nongoing"
    endpoint = WindowedEndpoint(window=4_096, factor=1.0, overhead=0)
    endpoint._summary = lambda max_tokens: incomplete  # type: ignore[method-assign]
    policy = Compaction(context_window=4_096)
    entries = (*_chat(8, 1_200), InputEntry("user", "next"))
    res = await policy.compact(request(entries, provider=endpoint, run_id="r"))
    assert res.compacted and res.summary == incomplete  # shipped after one retry
    assert len(endpoint.summary_sizes) % 2 == 0  # every fold was retried once ...
    assert not endpoint.rejections  # ... and every request, retries included, fit

    once = SummaryProvider(reply=incomplete)
    text = await LLMSummarizer().summarize(
        list(entries[1:5]), previous=None, provider=once, retry=False
    )
    assert text == incomplete and len(once.calls) == 1
