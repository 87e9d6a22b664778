"""200 concurrent 5-turn runs in one event loop.

Each run makes 4 tool-call turns (an async tool that returns at once) and a final text
turn. Target: under 250 ms wall for all 200 runs together, and under 30 MiB of extra peak
memory (tracemalloc, measured in a separate pass so tracing does not inflate the time).

Run: ``uv run python benchmarks/bench_concurrency.py`` (prints medians of repetitions).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc

from lovia import Agent, Runner, tool
from lovia.context_policy import NoopContextPolicy
from lovia.testing import ScriptedProvider, call, text

RUNS = 200
TOOL_TURNS = 4
REPS = 7


@tool
async def noop() -> str:
    """Return at once."""
    return "ok"


def _agents() -> list[Agent[None]]:
    return [
        Agent(
            "bench",
            instructions="Benchmark agent.",
            model=ScriptedProvider([*(call("noop", {}) for _ in range(TOOL_TURNS)), text("done")]),
            tools=[noop],
        )
        for _ in range(RUNS)
    ]


async def _all(agents: list[Agent[None]]) -> None:
    policy = NoopContextPolicy()
    await asyncio.gather(*(Runner.run(a, "go", context_policy=policy) for a in agents))


async def _timed() -> float:
    agents = _agents()
    gc.collect()
    start = time.perf_counter()
    await _all(agents)
    return time.perf_counter() - start


async def _peak_mib() -> float:
    agents = _agents()
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    await _all(agents)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (peak - base) / (1024 * 1024)


async def _main() -> None:
    await _timed()  # warm up
    samples = [await _timed() for _ in range(REPS)]
    median_ms = statistics.median(samples) * 1e3
    print(
        f"{RUNS} concurrent {TOOL_TURNS + 1}-turn runs: median {median_ms:.1f} ms "
        f"(min {min(samples) * 1e3:.1f} ms)"
    )
    print(f"extra peak memory: {await _peak_mib():.1f} MiB")


if __name__ == "__main__":
    asyncio.run(_main())
