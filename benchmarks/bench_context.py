"""Cost of the Compaction policy: per turn at 100, 1000 and 5000 entries, per compaction
turn on small windows (4k, 8k), and the calibration error after 1, 3 and 10 samples.

Run: ``uv run python benchmarks/bench_context.py``

Three figures per size:

* ``no pressure``: one turn (one exchange appended, then ``compact``) on a transcript far
  below the trigger; the target is a flat cost as the transcript grows (the policy
  renders and counts only the new entries).
* ``steady``: the same, after a burst has made decisions (markers in the view); still
  incremental, plus one list copy of the view.
* ``burst``: one call that crosses the trigger and runs the stages (offload, clear) on a
  fresh policy: a full count and re-render, so it grows with the transcript.

Small windows: a 40-turn chat (user messages of ~750 tokens, replies of ~375) against an
endpoint that counts 1.3x lovia's estimate plus 346 tokens per prompt, with the default
pipeline and an instant summarising model. Per compaction turn: the policy's wall time
(summary calls included, at zero model latency), the summary calls made and the tokens
they send (prompt plus reply budget). Every request is checked against the window.

Calibration: views of a growing chat sent to endpoints with different tokenizer factors and
hidden overheads; after k samples, the error of the estimate for the next view, for the
two-part model and for the single EMA ratio it replaced (median over the endpoints).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from lovia.context import (
    REQUIRED_SECTIONS,
    Calibration,
    ClearToolResults,
    Compaction,
    CompactionRequest,
    OffloadToolResults,
    TokenCounter,
)
from lovia.events import TextDelta
from lovia.messages import Usage
from lovia.providers.base import FinishDelta, ModelSettings, UsageDelta
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

SIZES = (100, 1_000, 5_000)
TURNS = 200


def _exchange(i: int, size: int) -> list[TranscriptEntry]:
    cid = f"call_{i}"
    return [
        InputEntry("user", f"question {i}"),
        ToolCallEntry(cid, "lookup", f'{{"q": {i}}}'),
        ToolResultEntry(cid, f"{i}:" + "x" * size),
        AssistantTextEntry(f"answer {i}"),
    ]


def _transcript(n_entries: int, size: int = 1_000) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = [InputEntry("system", "sys")]
    i = 0
    while len(out) < n_entries:
        out.extend(_exchange(i, size))
        i += 1
    return out


def _policy(window: int) -> Compaction:
    return Compaction(
        context_window=window,
        reserve_output_tokens=0,
        compact_at=0.8,
        compact_to=0.5,
        stages=[OffloadToolResults(), ClearToolResults()],
    )


async def _per_turn(
    policy: Compaction, entries: list[TranscriptEntry], scratch: dict[str, Any]
) -> float:
    """Median seconds per turn over TURNS turns of growth (one exchange each)."""
    await policy.compact(CompactionRequest(entries=entries, scratch=scratch, run_id="bench"))
    samples = []
    base = len(entries)
    for t in range(TURNS):
        entries.extend(_exchange(base + t, 200))
        start = time.perf_counter()
        await policy.compact(CompactionRequest(entries=entries, scratch=scratch, run_id="bench"))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def _no_pressure(n: int) -> float:
    return await _per_turn(_policy(10**9), _transcript(n), {})


async def _steady(n: int) -> float:
    entries = _transcript(n)
    window = int(TokenCounter().count(entries) * 1.1)  # the first call is a burst
    policy, scratch = _policy(window), dict[str, Any]()
    await policy.compact(CompactionRequest(entries=entries, scratch=scratch, run_id="bench"))
    policy.compact_at = 0.99  # keep the following turns below the trigger
    policy.compact_to = 0.5
    return await _per_turn(policy, entries, scratch)


async def _burst(n: int) -> float:
    entries = _transcript(n)
    window = int(TokenCounter().count(entries) * 1.1)
    samples = []
    for _ in range(5):
        policy = _policy(window)
        start = time.perf_counter()
        res = await policy.compact(CompactionRequest(entries=entries, scratch={}, run_id="b"))
        samples.append(time.perf_counter() - start)
        assert res.compacted
    return statistics.median(samples)


class _InstantEndpoint:
    """Counts like an endpoint (``factor`` x estimate + ``overhead``), answers summary
    requests at once with a short structured summary, and checks the window."""

    name = "bench"
    model = "bench-model"

    def __init__(self, window: int, factor: float, overhead: int) -> None:
        self.window, self.factor, self.overhead = window, factor, overhead
        self.counter = TokenCounter()
        self.summary_tokens: list[int] = []

    def count(self, entries: Any) -> int:
        return int(self.factor * self.counter.count(list(entries))) + self.overhead

    async def stream(
        self, entries: Any, *, tools: Any = (), settings: ModelSettings | None = None, **_: Any
    ) -> Any:
        budget = settings.max_tokens if settings is not None and settings.max_tokens else 0
        sent = self.count(entries) + budget
        assert sent <= self.window, f"summary request of {sent} tokens over the window"
        self.summary_tokens.append(sent)
        words = "fact " * max(1, budget // 8)
        yield TextDelta("\n".join(f"## {s}\n{words}" for s in REQUIRED_SECTIONS))
        yield UsageDelta(Usage(input_tokens=sent))
        yield FinishDelta("stop")


async def _small_window(window: int) -> tuple[int, float, float, float]:
    """(compaction turns, median ms, median summary calls, median summary tokens) per
    compaction turn of a 40-turn chat."""
    endpoint = _InstantEndpoint(window, factor=1.3, overhead=346)
    policy = Compaction(context_window=window)
    entries: list[TranscriptEntry] = [InputEntry("system", "You are a patient companion.")]
    scratch: dict[str, Any] = {}
    sent: int | None = None
    times, calls, tokens = [], [], []
    for turn in range(40):
        entries.append(InputEntry("user", f"[turn {turn}] " + "word " * 460))  # ~750 tokens
        before = len(endpoint.summary_tokens)
        start = time.perf_counter()
        res = await policy.compact(
            CompactionRequest(
                entries=tuple(entries),
                provider=endpoint,
                scratch=scratch,
                run_id="chat",
                last_input_tokens=sent,
            )
        )
        elapsed = time.perf_counter() - start
        sent = endpoint.count(res.entries)
        assert sent + 375 <= window, f"turn {turn}: a {sent}-token view over the window"
        if res.compacted:
            made = endpoint.summary_tokens[before:]
            times.append(elapsed)
            calls.append(len(made))
            tokens.append(sum(made))
        entries.append(AssistantTextEntry(f"[reply {turn}] " + "word " * 230))  # ~375 tokens
    return (
        len(times),
        statistics.median(times) * 1e3,
        statistics.median(calls),
        statistics.median(tokens),
    )


_ENDPOINTS = ((1.0, 346), (1.3, 0), (2.0, 346), (0.8, 1_000), (2.5, 346))


def _calibration_errors(samples: int) -> tuple[float, float]:
    """Median relative error of the next view's estimate after ``samples`` samples:
    (two-part model, the former single EMA ratio)."""
    fitted, former = [], []
    for factor, overhead in _ENDPOINTS:
        cal, ema = Calibration(), 1.0
        views = [1_500 + 1_100 * i for i in range(samples + 1)]  # a chat growing each turn
        for view in views[:-1]:
            real = int(factor * view) + overhead
            cal.fold(real, view)
            ema = min(2.5, max(0.5, 0.8 * ema + 0.2 * real / view))
        nxt = views[-1]
        real = int(factor * nxt) + overhead
        fitted.append(abs(cal.tokens(nxt) - real) / real)
        former.append(abs(int(ema * nxt) - real) / real)
    return statistics.median(fitted), statistics.median(former)


async def main() -> None:
    print(f"{'entries':>8} {'no pressure':>14} {'steady':>14} {'burst':>14}")
    for n in SIZES:
        a, b, c = await _no_pressure(n), await _steady(n), await _burst(n)
        print(f"{n:>8} {a * 1e6:>11.1f} us {b * 1e6:>11.1f} us {c * 1e3:>11.2f} ms")
    print()
    print(f"{'window':>8} {'compactions':>12} {'ms/turn':>9} {'summary calls':>14} {'tokens':>8}")
    for window in (4_096, 8_192):
        turns, ms, n_calls, n_tokens = await _small_window(window)
        print(f"{window:>8} {turns:>9}/40 {ms:>9.2f} {n_calls:>14.0f} {n_tokens:>8.0f}")
    print()
    print(f"{'samples':>8} {'two-part error':>15} {'former EMA error':>17}")
    for k in (1, 3, 10):
        fitted, former = _calibration_errors(k)
        print(f"{k:>8} {fitted:>14.1%} {former:>16.1%}")


if __name__ == "__main__":
    asyncio.run(main())
