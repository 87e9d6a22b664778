"""Session append/load throughput and per-result checkpoint cost, per store backend.

Usage: uv run python benchmarks/bench_stores.py [REPEATS] [--pg DSN]

* session append / load: entries per second for one 1,000-entry run (median of REPEATS).
* checkpoint per tool result: mean milliseconds of one ``Checkpointer.append`` of a single
  tool result plus the head, as the run loop does after every tool call (200 in a row).
  Target (issue 6): under 1 ms on SQLite.
* checkpoint per turn, through a real run: a ``Runner.run`` of 100 one-tool turns
  (``ScriptedProvider``, a no-op context policy) with ``checkpoint=`` minus the same run
  without it, divided by the turns (median of REPEATS). Each turn saves twice (after the
  model output and after the tool result), so half of it is the cost per save.

PostgreSQL runs when a server answers at the DSN (default: the local test server); the
benchmark uses a throwaway schema and drops it afterwards.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lovia import Agent, Runner, tool
from lovia.checkpointer import CheckpointOptions, RunHead
from lovia.context_policy import NoopContextPolicy
from lovia.messages import Usage
from lovia.stores import (
    InMemoryCheckpointer,
    InMemorySession,
    PostgresCheckpointer,
    PostgresSession,
    SQLiteCheckpointer,
    SQLiteSession,
)
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry

RUN_ENTRIES = 1_000
CHECKPOINTS = 200
RUN_TURNS = 100


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


@tool
async def read_log(i: int) -> str:
    """Read one log file (returns ~300 characters, like a real tool)."""
    return f"log {i}: line of log output\n" * 12


async def timed_run(checkpoint: CheckpointOptions | None) -> float:
    script = [call("read_log", {"i": i}, call_id=f"c{i}") for i in range(RUN_TURNS)]
    agent = Agent(
        "bench",
        instructions="Read the logs.",
        model=ScriptedProvider([*script, text("done")]),
        tools=[read_log],
        context_policy=NoopContextPolicy(),
    )
    t0 = time.perf_counter()
    await Runner.run(agent, "go", max_turns=RUN_TURNS + 1, checkpoint=checkpoint)
    return time.perf_counter() - t0


async def bench_run_checkpoint(make: Callable[[], Any], repeats: int) -> float:
    """Milliseconds a checkpoint adds to one turn (model output + one tool result)."""
    store = make()
    plain, checkpointed = [], []
    for _ in range(repeats):
        plain.append(await timed_run(None))
        checkpointed.append(await timed_run(CheckpointOptions(store, uuid.uuid4().hex)))
    if hasattr(store, "aclose"):
        await store.aclose()
    return (statistics.median(checkpointed) - statistics.median(plain)) / RUN_TURNS * 1000


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
    print(f"run: {RUN_TURNS} one-tool turns, with minus without checkpoint=, median of {repeats}")
    print(
        f"{'backend':18s} {'append entries/s':>17s} {'load entries/s':>15s} "
        f"{'ckpt ms/result':>15s} {'run ms/turn':>12s}"
    )
    try:
        for name, (session, checkpointer) in backends.items():
            append_rate, load_rate = await bench_session(session, repeats)
            ckpt_ms = await bench_checkpoint(checkpointer)
            turn_ms = await bench_run_checkpoint(checkpointer, repeats)
            print(
                f"{name:18s} {append_rate:17,.0f} {load_rate:15,.0f} {ckpt_ms:15.3f} "
                f"{turn_ms:12.3f}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if dsn:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if not dsn:
        print("postgres: skipped (no server reachable; pass --pg DSN)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
