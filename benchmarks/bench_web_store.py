"""The chat store's event log: append and read throughput on SQLite (WAL) and PostgreSQL.

* ``append``: ``EVENTS`` records of one run appended in batches of ``BATCH`` (what the
  supervisor's log writer does under a fast stream: one transaction per batch), events/s.
* ``append x1``: the same records one per transaction (a slow stream: every delta alone).
* ``read_after``: the whole run read back with ``read_events(run, after=0)``, then the last
  tenth with ``after=`` (a client re-attaching with ``Last-Event-ID``), events/s.

PostgreSQL is the server at 127.0.0.1:5432 (database ``test``; a scratch schema, dropped
afterwards); without one only SQLite is measured. Run:
``uv run python benchmarks/bench_web_store.py`` (prints medians of ``REPS`` repetitions).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from lovia.web import ChatStore, EventRecord

EVENTS = 4000
BATCH = 50
SINGLE = 400
REPS = 5
_PG = os.environ.get("LOVIA_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _records(run: str, count: int) -> list[EventRecord]:
    return [EventRecord(run, seq, "text_delta", {"delta": "token "}) for seq in range(1, count + 1)]


async def _measure(store: ChatStore) -> dict[str, float]:
    run = uuid.uuid4().hex
    records = _records(run, EVENTS)
    start = time.perf_counter()
    for i in range(0, EVENTS, BATCH):
        await store.append_events("bench", records[i : i + BATCH])
    append = EVENTS / (time.perf_counter() - start)

    single_run = uuid.uuid4().hex
    start = time.perf_counter()
    for record in _records(single_run, SINGLE):
        await store.append_events("bench", [record])
    single = SINGLE / (time.perf_counter() - start)

    start = time.perf_counter()
    assert len(await store.read_events(run)) == EVENTS
    read_all = EVENTS / (time.perf_counter() - start)
    tail = EVENTS // 10
    start = time.perf_counter()
    assert len(await store.read_events(run, after=EVENTS - tail)) == tail
    read_tail = tail / (time.perf_counter() - start)
    return {"append": append, "append x1": single, "read all": read_all, "read tail": read_tail}


async def _bench(
    name: str, make: Callable[[], ChatStore], cleanup: Callable[[], Awaitable[None]]
) -> None:
    results: dict[str, list[float]] = {}
    try:
        for _ in range(REPS):
            store = make()
            try:
                for key, value in (await _measure(store)).items():
                    results.setdefault(key, []).append(value)
            finally:
                await store.aclose()
    finally:
        await cleanup()
    line = ", ".join(f"{k} {statistics.median(v):,.0f}/s" for k, v in results.items())
    print(f"{name:<10} median of {REPS}: {line}")


async def _pg_available() -> bool:
    try:
        import psycopg
    except ImportError:
        return False
    try:
        conn = await psycopg.AsyncConnection.connect(_PG, connect_timeout=3)
    except psycopg.Error:
        return False
    await conn.close()
    return True


async def main() -> None:
    print(f"events={EVENTS} batch={BATCH} single={SINGLE} load={os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "bench.db")

        async def nothing() -> None:
            return None

        await _bench("sqlite", lambda: ChatStore.sqlite(path), nothing)
    if not await _pg_available():
        print("postgres   skipped: no server at", _PG)
        return
    import psycopg

    schema = f"lovia_bench_{uuid.uuid4().hex[:8]}"

    async def drop() -> None:
        async with await psycopg.AsyncConnection.connect(_PG, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    await _bench("postgres", lambda: ChatStore.postgres(_PG, schema=schema), drop)


if __name__ == "__main__":
    asyncio.run(main())
