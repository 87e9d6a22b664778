"""One turn with 50 concurrent calls to an async tool that sleeps 20 ms.

Serial execution would take 1 s; concurrent execution takes 20 ms plus framework
overhead. Target: under 23 ms wall for the whole run (under 3 ms of overhead), measured
end to end around ``Runner.run`` (two model calls: the batch, then the final text).

A second figure runs the same batch with a tool that returns at once: that is the
framework's own cost for the batch, and it is less sensitive to a loaded machine than the
timer-bound first figure.

Run: ``uv run python benchmarks/bench_parallel.py`` (prints the median of repetitions).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time

from lovia import Agent, Runner, Tool, tool
from lovia.context_policy import NoopContextPolicy
from lovia.testing import ScriptedProvider, batch, text

CALLS = 50
SLEEP_SECONDS = 0.020
REPS = 15


@tool
async def wait_a_bit() -> str:
    """Sleep 20 ms."""
    await asyncio.sleep(SLEEP_SECONDS)
    return "ok"


@tool(name="wait_a_bit")
async def return_at_once() -> str:
    """Return at once (the framework-only variant)."""
    return "ok"


async def _run_once(tool_: Tool = wait_a_bit) -> float:
    provider = ScriptedProvider([batch(*(("wait_a_bit", {}) for _ in range(CALLS))), text("done")])
    agent = Agent("bench", model=provider, tools=[tool_])
    gc.collect()
    start = time.perf_counter()
    await Runner.run(agent, "go", context_policy=NoopContextPolicy())
    return time.perf_counter() - start


async def _main() -> None:
    await _run_once()  # warm up
    samples = [await _run_once() for _ in range(REPS)]
    median = statistics.median(samples) * 1e3
    print(
        f"{CALLS} calls x {SLEEP_SECONDS * 1e3:.0f} ms: median {median:.2f} ms wall "
        f"(min {min(samples) * 1e3:.2f} ms); overhead {median - SLEEP_SECONDS * 1e3:.2f} ms"
    )
    instant = [await _run_once(return_at_once) for _ in range(REPS)]
    print(
        f"{CALLS} calls returning at once: median {statistics.median(instant) * 1e3:.2f} ms "
        "(framework cost of the batch, both model turns included)"
    )


if __name__ == "__main__":
    asyncio.run(_main())
