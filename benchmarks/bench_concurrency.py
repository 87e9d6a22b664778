"""200 concurrent 5-turn runs in one event loop, without stores and on 200 sessions.

Each run makes 4 tool-call turns (an async tool that returns at once) and a final text
turn. Target: under 250 ms wall for all 200 runs together, and under 30 MiB of extra peak
memory (tracemalloc, measured in a separate pass so tracing does not inflate the time).

Then the same 200 runs, each on its own session (so each takes a session lease, loads its
history and appends its segment) in a default ``SQLiteSession(wal=True)`` and a default
``PostgresSession`` (pool of 10; issue 20 item 1: these once deadlocked at 10 runs). The
PostgreSQL figure needs the local test server (or ``--pg DSN``) and uses a throwaway schema.

Run: ``uv run python benchmarks/bench_concurrency.py [--pg DSN]`` (prints medians).
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from lovia import Agent, Runner, tool
from lovia.context_policy import NoopContextPolicy
from lovia.testing import ScriptedProvider, call, text

RUNS = 200
TOOL_TURNS = 4
REPS = 7
SESSION_REPS = 5


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


async def _all(agents: list[Agent[None]], session: Any = None) -> None:
    policy = NoopContextPolicy()
    tag = uuid.uuid4().hex[:8]  # fresh sessions on every repetition
    await asyncio.gather(
        *(
            Runner.run(a, "go", context_policy=policy, **_on_session(session, f"{tag}-{i}"))
            for i, a in enumerate(agents)
        )
    )


def _on_session(session: Any, session_id: str) -> dict[str, Any]:
    return {} if session is None else {"session": session, "session_id": session_id}


async def _timed(session: Any = None) -> float:
    agents = _agents()
    gc.collect()
    start = time.perf_counter()
    await _all(agents, session)
    return time.perf_counter() - start


async def _on_sessions(name: str, session: Any) -> None:
    await _timed(session)  # warm up (tables, connections)
    samples = [await _timed(session) for _ in range(SESSION_REPS)]
    await session.aclose()
    print(
        f"{RUNS} concurrent runs on {RUNS} {name} sessions: median "
        f"{statistics.median(samples) * 1e3:.1f} ms (min {min(samples) * 1e3:.1f} ms)"
    )


async def _stores(argv: list[str]) -> None:
    from lovia.stores import PostgresSession, SQLiteSession

    tmp = Path(tempfile.mkdtemp(prefix="lovia-bench-"))
    try:
        await _on_sessions("SQLite (wal=True)", SQLiteSession(tmp / "s.db", wal=True))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    from bench_stores import pg_dsn  # type: ignore[import-not-found]  # (a sibling script)

    dsn = pg_dsn(argv)
    if dsn is None:
        print("PostgreSQL: skipped (no server reachable; pass --pg DSN)")
        return
    schema = f"lovia_bench_{uuid.uuid4().hex[:8]}"
    try:
        await _on_sessions("PostgreSQL (default pool)", PostgresSession(dsn, schema=schema))
    finally:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


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
    await _stores(sys.argv)


if __name__ == "__main__":
    asyncio.run(_main())
