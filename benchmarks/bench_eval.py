"""The framework overhead of ``evaluate()`` per sample: 100 cases x 5 samples, concurrency 16.

The agent is scripted (one text reply per run) and each case has one ``contains`` check. The
same 500 runs are also made by hand, with ``Runner.run`` under a 16-slot semaphore and the
check called directly; the difference, divided by 500, is what ``evaluate()`` adds per
sample (cases, the worker pool, check dispatch, timing, results and the report).

Run: ``uv run python benchmarks/bench_eval.py`` (prints medians of repetitions).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time

from lovia import Agent, Runner
from lovia.context_policy import NoopContextPolicy
from lovia.eval import Case, contains, evaluate, run_check
from lovia.testing import ScriptedProvider, text

CASES = 100
SAMPLES = 5
CONCURRENCY = 16
REPS = 21

AGENT = Agent("bench", instructions="Benchmark agent.", context_policy=NoopContextPolicy())
CHECK = contains("ok")


def _model() -> ScriptedProvider:
    return ScriptedProvider([text("ok")])


async def _with_evaluate() -> float:
    cases = [Case(f"q{i}", [CHECK], model=_model, samples=SAMPLES) for i in range(CASES)]
    start = time.perf_counter()
    report = await evaluate(AGENT, cases, concurrency=CONCURRENCY)
    elapsed = time.perf_counter() - start
    assert report.passed and len(report.samples) == CASES * SAMPLES
    return elapsed


async def _by_hand() -> float:
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with slots:
            for _ in range(SAMPLES):
                result = await Runner.run(AGENT.clone(model=_model()), f"q{i}")
                assert (await run_check(CHECK, result)).passed

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(CASES)))
    return time.perf_counter() - start


def main() -> None:
    evaluated: list[float] = []
    manual: list[float] = []
    asyncio.run(_with_evaluate())  # warm-up: first-use imports and caches
    for rep in range(REPS):
        # Alternate which goes first, so neither always inherits the other's garbage.
        order = [(_with_evaluate, evaluated), (_by_hand, manual)]
        for bench, times in order if rep % 2 == 0 else reversed(order):
            gc.collect()
            times.append(asyncio.run(bench()))
    samples = CASES * SAMPLES
    e, m = statistics.median(evaluated), statistics.median(manual)
    print(f"evaluate(): {CASES} cases x {SAMPLES} samples, concurrency {CONCURRENCY}")
    print(f"  evaluate() wall    median {e * 1000:8.1f} ms  ({e / samples * 1e6:6.1f} us/sample)")
    print(f"  by hand wall       median {m * 1000:8.1f} ms  ({m / samples * 1e6:6.1f} us/sample)")
    # The median of paired differences: each rep's two runs share the machine's load.
    overhead = statistics.median(a - b for a, b in zip(evaluated, manual, strict=True))
    print(f"  overhead           median {overhead / samples * 1e6:6.1f} us/sample (paired)")


if __name__ == "__main__":
    main()
