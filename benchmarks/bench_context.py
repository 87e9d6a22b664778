"""Per-turn cost of the Compaction policy at 100, 1000 and 5000 entries.

Run: ``uv run python benchmarks/bench_context.py``

Three figures per size:

* ``no pressure``: one turn (one exchange appended, then ``compact``) on a transcript far
  below the trigger; the target is a flat cost as the transcript grows (the policy
  renders and counts only the new entries).
* ``steady``: the same, after a burst has made decisions (markers in the view); still
  incremental, plus one list copy of the view.
* ``burst``: one call that crosses the trigger and runs the stages (offload, clear) on a
  fresh policy: a full count and re-render, so it grows with the transcript.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from lovia.context import (
    ClearToolResults,
    Compaction,
    CompactionRequest,
    OffloadToolResults,
    TokenCounter,
)
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


async def main() -> None:
    print(f"{'entries':>8} {'no pressure':>14} {'steady':>14} {'burst':>14}")
    for n in SIZES:
        a, b, c = await _no_pressure(n), await _steady(n), await _burst(n)
        print(f"{n:>8} {a * 1e6:>11.1f} us {b * 1e6:>11.1f} us {c * 1e3:>11.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
