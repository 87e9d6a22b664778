"""Calibration: a fixed overhead plus a multiplier, learned without being poisoned."""

from __future__ import annotations

from typing import Any

import pytest
from lovia.context import Calibration, ClearToolResults, Compaction, TokenCounter
from lovia.context.compaction import SCRATCH_KEY

from .ctx_support import request, transcript


def _endpoint(estimate: int, factor: float, overhead: int) -> int:
    return int(factor * estimate) + overhead


def test_two_view_sizes_separate_the_overhead_from_the_multiplier() -> None:
    cal = Calibration()
    assert cal.fold(_endpoint(1_000, 1.3, 346), 1_000)
    assert cal.fold(_endpoint(2_500, 1.3, 346), 2_500)
    assert cal.ratio == pytest.approx(1.3, abs=0.01)
    assert cal.overhead == pytest.approx(346, abs=5)
    assert cal.tokens(20_000) == pytest.approx(_endpoint(20_000, 1.3, 346), rel=0.005)


def test_the_first_sample_moves_the_ratio_half_way_only() -> None:
    cal = Calibration()
    assert cal.fold(2_000, 1_000)
    assert cal.ratio == pytest.approx(1.5)
    # An overhead alone (the 346-token tool-use prompt) no longer saturates.
    lone = Calibration()
    lone.fold(_endpoint(800, 1.0, 346), 800)
    assert lone.ratio < 1.25


@pytest.mark.parametrize("report", [0, -5, 10_000_000, 40])
def test_an_implausible_report_is_dropped(report: int) -> None:
    cal = Calibration()
    cal.fold(_endpoint(1_000, 1.2, 0), 1_000)
    cal.fold(_endpoint(3_000, 1.2, 0), 3_000)
    before = (cal.ratio, cal.overhead, cal.samples)
    assert not cal.fold(report, 2_000)
    assert (cal.ratio, cal.overhead, cal.samples) == before


def test_a_cumulative_count_is_recognised_and_dropped() -> None:
    cal = Calibration()
    total = 0
    accepted = []
    for estimate in range(1_000, 11_000, 1_000):  # a growing chat
        total += _endpoint(estimate, 1.2, 0)  # the endpoint reports the run's running total
        accepted.append(cal.fold(total, estimate))
    assert accepted[0] and not any(accepted[1:])
    assert 1.0 <= cal.ratio <= 1.25  # not pinned at the 2.5 cap


def test_per_prompt_counts_of_a_growing_chat_are_not_mistaken_for_cumulative_ones() -> None:
    cal = Calibration()
    for estimate in range(1_000, 11_000, 1_000):
        assert cal.fold(_endpoint(estimate, 2.0, 346), estimate)
    assert cal.ratio == pytest.approx(2.0, abs=0.01)
    assert cal.overhead == pytest.approx(346, abs=5)


def test_a_drift_in_the_tokenizer_is_followed() -> None:
    cal = Calibration()
    for estimate in (1_000, 2_000, 3_000, 4_000):
        cal.fold(_endpoint(estimate, 1.0, 100), estimate)
    for estimate in (5_000, 6_000, 5_500, 7_000, 6_500, 8_000, 7_500, 9_000, 8_500, 9_500):
        cal.fold(_endpoint(estimate, 1.6, 100), estimate)  # the content turned code-heavy
    assert cal.tokens(9_000) == pytest.approx(_endpoint(9_000, 1.6, 100), rel=0.05)


def test_views_of_one_size_move_only_the_ratio() -> None:
    cal = Calibration(overhead=200.0)
    for _ in range(5):
        cal.fold(_endpoint(4_000, 1.0, 200), 4_000)
    assert cal.overhead == pytest.approx(200)
    assert cal.ratio == pytest.approx(1.0, abs=0.01)


def test_the_model_round_trips_and_tolerates_garbage() -> None:
    cal = Calibration()
    cal.fold(1_500, 1_000)
    cal.fold(2_700, 2_000)
    again = Calibration.from_dict(cal.to_dict())
    assert again == cal
    assert Calibration.from_dict("nope") == Calibration()
    assert Calibration.from_dict(None, ratio=1.7).ratio == 1.7  # an older state's ratio
    assert Calibration.from_dict({"ratio": float("nan"), "samples": True}) == Calibration()


@pytest.mark.parametrize("factor,overhead", [(0.8, 0), (1.0, 346), (2.0, 346), (2.5, 1_000)])
async def test_the_policy_predicts_the_endpoint_after_two_samples(
    factor: float, overhead: int
) -> None:
    """Through ``Compaction``: the endpoint's count of each view is fed back as
    ``last_input_tokens``; from the third call on the policy's estimate is within 2%."""
    policy = Compaction(context_window=10_000_000, stages=[ClearToolResults()])
    scratch: dict[str, Any] = {}
    counter = TokenCounter()
    sent: int | None = None
    for n in range(1, 8):
        entries = tuple(transcript(n * 3, 400))
        res = await policy.compact(
            request(entries, scratch=scratch, run_id="r", last_input_tokens=sent)
        )
        real = _endpoint(counter.count(res.entries), factor, overhead)
        if n >= 3:
            assert res.tokens_before == pytest.approx(real, rel=0.02)
        sent = real
    assert scratch[SCRATCH_KEY]["calibration"]["samples"] == 6


async def test_the_next_run_of_a_session_starts_with_the_last_prompt_size() -> None:
    """A chat of one-call runs calibrates: run 2's first request carries the prompt size
    the endpoint reported for run 1's last call."""
    from lovia import Agent, Runner
    from lovia.context import CompactionRequest, ContextResult
    from lovia.messages import Usage
    from lovia.stores.memory import InMemorySession
    from lovia.testing import ScriptedProvider, text

    class Recording:
        def __init__(self) -> None:
            self.seen: list[int | None] = []

        async def compact(self, req: CompactionRequest) -> ContextResult:
            self.seen.append(req.last_input_tokens)
            return ContextResult(entries=req.entries)

    policy = Recording()
    provider = ScriptedProvider(
        [text(word, usage=Usage(input_tokens=n)) for word, n in (("a", 1_234), ("b", 2_345))]
        + [text("c")]
    )
    agent: Agent[None] = Agent(name="a", model=provider, context_policy=policy)
    session = InMemorySession()
    await Runner.run(agent, "first", session=session, session_id="s")
    await Runner.run(agent, "second", session=session, session_id="s")
    assert policy.seen == [None, 1_234]
    await Runner.run(agent.clone(), "no session")  # a run without a session starts fresh
    assert policy.seen[-1] is None
