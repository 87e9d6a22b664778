"""Session append/load throughput and per-result checkpoint cost, per store backend.

Usage: uv run python benchmarks/bench_stores.py [REPEATS] [--pg DSN]

* session append / load: entries per second for one 1,000-entry run (median of REPEATS).
* checkpoint per tool result: mean milliseconds of one ``Checkpointer.append`` of a single
  tool result plus the head, as the run loop does after every tool call (200 in a row).
  Target (issue 6): under 1 ms on SQLite.

PostgreSQL runs when a server answers at the DSN (default: the local test server); the
benchmark uses a throwaway schema and drops it afterwards.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lovia.checkpointer import RunHead
from lovia.messages import Usage
from lovia.stores import (
    InMemoryCheckpointer,
    InMemorySession,
    PostgresCheckpointer,
    PostgresSession,
    SQLiteCheckpointer,
    SQLiteSession,
)
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry

RUN_ENTRIES = 1_000
CHECKPOINTS = 200


def a_run(n: int) -> list[Any]:
    """A realistic mix: calls with JSON args, ~300-char results, some text."""
    out: list[Any] = [InputEntry("user", "please investigate the logs")]
    i = 0
    while len(out) < n:
        out.append(ToolCallEntry(f"c{i}", "read_file", f'{{"path": "logs/app-{i}.log"}}'))
        out.append(ToolResultEntry(f"c{i}", "line of log output — ünïcode ok\n" * 10))
        out.append(AssistantTextEntry(f"step {i}: looked at file {i}"))
        i += 1
    return out[:n]


async def bench_session(make: Callable[[], Any], repeats: int) -> tuple[float, float]:
    entries = a_run(RUN_ENTRIES)
    store = make()
    appends, loads = [], []
    for r in range(repeats):
        sid = f"bench-{r}"
        t0 = time.perf_counter()
        await store.append(sid, entries)
        appends.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        loaded = await store.load(sid)
        loads.append(time.perf_counter() - t0)
        assert len(loaded) == RUN_ENTRIES
    if hasattr(store, "aclose"):
        await store.aclose()
    return RUN_ENTRIES / statistics.median(appends), RUN_ENTRIES / statistics.median(loads)


async def bench_checkpoint(make: Callable[[], Any]) -> float:
    store = make()
    head = RunHead(agent_name="main", usage=Usage(1000, 200, requests=3), turns=3)
    run_id = uuid.uuid4().hex
    await store.append(run_id, [InputEntry("user", "go")], head)
    result = ToolResultEntry("c", "line of log output\n" * 16)
    t0 = time.perf_counter()
    for _ in range(CHECKPOINTS):
        await store.append(run_id, [result], head)
    elapsed = time.perf_counter() - t0
    if hasattr(store, "aclose"):
        await store.aclose()
    return elapsed / CHECKPOINTS * 1000


def pg_dsn(argv: list[str]) -> str | None:
    dsn = argv[argv.index("--pg") + 1] if "--pg" in argv else None
    import psycopg

    for candidate in (
        [dsn] if dsn else [f"postgresql://{u}@127.0.0.1/test" for u in ("postgres", "root")]
    ):
        try:
            psycopg.connect(candidate, connect_timeout=3).close()
            return candidate
        except psycopg.Error:
            continue
    return None


async def main(argv: list[str]) -> None:
    repeats = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else 7
    tmp = Path(tempfile.mkdtemp(prefix="lovia-bench-"))
    backends: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "memory": (InMemorySession, InMemoryCheckpointer),
        "sqlite": (
            lambda: SQLiteSession(tmp / "plain.db"),
            lambda: SQLiteCheckpointer(tmp / "plain.db"),
        ),
        "sqlite wal=True": (
            lambda: SQLiteSession(tmp / "wal.db", wal=True),
            lambda: SQLiteCheckpointer(tmp / "wal.db", wal=True),
        ),
    }
    dsn = pg_dsn(argv)
    schema = f"lovia_bench_{uuid.uuid4().hex[:8]}"
    if dsn:
        backends["postgres"] = (
            lambda: PostgresSession(dsn, schema=schema),
            lambda: PostgresCheckpointer(dsn, schema=schema),
        )
    print(
        f"session: one {RUN_ENTRIES:,}-entry run, median of {repeats}; "
        f"checkpoint: mean of {CHECKPOINTS} single-result appends"
    )
    print(
        f"{'backend':18s} {'append entries/s':>17s} {'load entries/s':>15s} {'ckpt ms/result':>15s}"
    )
    try:
        for name, (session, checkpointer) in backends.items():
            append_rate, load_rate = await bench_session(session, repeats)
            ckpt_ms = await bench_checkpoint(checkpointer)
            print(f"{name:18s} {append_rate:17,.0f} {load_rate:15,.0f} {ckpt_ms:15.3f}")
    finally:
        if dsn:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if not dsn:
        print("postgres: skipped (no server reachable; pass --pg DSN)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
