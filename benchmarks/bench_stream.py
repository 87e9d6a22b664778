"""Streaming a 10,000-delta reply through ``Runner.stream`` to a consumer.

The ScriptedProvider streams the reply one character per ``TextDelta`` (deltas are built
when the script is, outside the timing); the loop forwards the provider's own objects.
Target: at least 1,000,000 deltas per second end to end (including run start and end).

Run: ``uv run python benchmarks/bench_stream.py`` (prints the median of repetitions).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time

from lovia import Agent, Runner
from lovia.context_policy import NoopContextPolicy
from lovia.events import TextDelta
from lovia.testing import ScriptedProvider, text

DELTAS = 10_000
REPS = 15


async def _run_once() -> float:
    agent = Agent("bench", model=ScriptedProvider([text("x" * DELTAS)]))
    gc.collect()
    received = 0
    start = time.perf_counter()
    async for event in Runner.stream(agent, "go", context_policy=NoopContextPolicy()):
        if type(event) is TextDelta:
            received += 1
    elapsed = time.perf_counter() - start
    assert received == DELTAS
    return DELTAS / elapsed


async def _main() -> None:
    await _run_once()  # warm up
    samples = [await _run_once() for _ in range(REPS)]
    print(
        f"{DELTAS} deltas: median {statistics.median(samples) / 1e6:.2f} M deltas/s "
        f"(best {max(samples) / 1e6:.2f} M deltas/s)"
    )


if __name__ == "__main__":
    asyncio.run(_main())
