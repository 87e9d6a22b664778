"""Per-turn framework overhead of the run loop, and the cost of ``import lovia``.

An agent runs N turns, each one call to an async tool that returns at once, against a
ScriptedProvider doing O(1) work per turn. The provider stamps the clock each time it is
called, so a turn's cost is the interval between two consecutive model calls: framework
overhead only (run start-up and teardown are excluded, so N=10 is not skewed by them). The
figure per N is the median interval of a run, then the median over repetitions. It must not
grow with the transcript (target: N=2000 at most 1.1x N=10) and must stay at or under 50 us
at N=100 with the default policy (issue 11; it was about 100 us before a lone call ran
inline). The machine is shared, so expect noise; rerun before trusting one outlier.

Run: ``uv run python benchmarks/bench_turns.py`` (prints medians of several repetitions).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import subprocess
import sys
import time
from typing import Any

from lovia import Agent, Runner, tool
from lovia.context_policy import ContextPolicy, NoopContextPolicy
from lovia.testing import ScriptedProvider, call, text

SIZES = (10, 100, 1000, 2000)
REPS = 7


@tool
async def noop() -> str:
    """Return at once."""
    return "ok"


class _StampingProvider(ScriptedProvider):
    """Records when each model call starts (O(1) per call)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamps: list[float] = []

    def stream(self, entries: Any, **kwargs: Any) -> Any:
        self.stamps.append(time.perf_counter())
        return super().stream(entries, **kwargs)


async def _run_once(n: int, policy: ContextPolicy | None) -> float:
    provider = _StampingProvider([*(call("noop", {}) for _ in range(n)), text("done")])
    agent = Agent("bench", instructions="Benchmark agent.", model=provider, tools=[noop])
    gc.collect()
    await Runner.run(agent, "go", max_turns=n + 1, context_policy=policy)
    stamps = provider.stamps
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:], strict=False))


def _measure_us(policy: ContextPolicy | None, reps: int) -> dict[int, list[float]]:
    """Per-turn figures for every N, in rounds that visit each N once.

    Interleaving the sizes spreads load changes on a shared machine over all of them
    instead of biasing whichever size ran during a busy spell.
    """

    async def go() -> dict[int, list[float]]:
        await _run_once(10, policy)  # warm up imports and caches
        samples: dict[int, list[float]] = {n: [] for n in SIZES}
        for _ in range(reps):
            for n in SIZES:
                samples[n].append(await _run_once(n, policy) * 1e6)
        return samples

    return asyncio.run(go())


def _import_cost_ms(reps: int = 7) -> float:
    def timed(code: str) -> float:
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    return (timed("import lovia") - timed("pass")) * 1e3


def main() -> None:
    for label, policy in (("NoopContextPolicy", NoopContextPolicy()), ("default policy", None)):
        samples = _measure_us(policy, REPS)
        median = {n: statistics.median(v) for n, v in samples.items()}
        best = {n: min(v) for n, v in samples.items()}
        for n in SIZES:
            print(f"[{label}] N={n:>5}: median {median[n]:7.1f} us/turn (best {best[n]:7.1f})")
        print(
            f"[{label}] ratio N=2000/N=10: median {median[2000] / median[10]:.2f}, "
            f"best {best[2000] / best[10]:.2f}"
        )
    print(f"import lovia (net of a bare interpreter): {_import_cost_ms():.1f} ms")


if __name__ == "__main__":
    main()
