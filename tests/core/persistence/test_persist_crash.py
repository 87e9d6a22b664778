"""The crash test (issue 6, "Faults to survive"): SIGKILL a checkpointed run at many points,
then resume it to completion in another process.

``persist_worker.py`` runs a five-turn, two-agent run whose tools append to a log file. At
the chosen point it prints ``READY`` and waits; the parent kills it with SIGKILL on that line
(deterministic, no sleeps), notes what the store held at that moment, and resumes the same
run id itself (a different process from the one killed). Kill points run concurrently,
each on its own run and session of the shared store. Then:

* the run completes with the scripted answer, and the resumer calls the model only for the
  turns the checkpoint did not hold (its script is consumed exactly);
* no entry is lost or duplicated: every call and every result appears exactly once, and
  the entries are the uninterrupted run's entries (results of a batch may be reordered);
* every tool result stored before the kill is kept and its tool never runs again; a call
  without a stored result runs exactly once more (at-least-once);
* the session holds the run exactly once, with the checkpoint's entries.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lovia.checkpointer import RunSnapshot
from lovia.stores import PostgresCheckpointer, PostgresSession, SQLiteCheckpointer, SQLiteSession
from lovia.transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry

from tests.core.persistence import persist_worker
from tests.support import port_open, require

WORKER = str(Path(__file__).with_name("persist_worker.py"))
ITEMS = ("a", "b", "c", "d", "e")
APPENDS = 12
"""Checkpoint appends of the uninterrupted run (see ``persist_worker.SCRIPT``)."""
TIMEOUT = 60.0
"""Only a guard against a hung child; nothing waits on elapsed time."""

Point = dict[str, Any] | list[dict[str, Any]]
"""Where to kill the worker; a list kills it there, then kills the resume at the next one."""

KILL_POINTS: list[Point] = [
    *({"at": "before-append", "n": n} for n in range(1, APPENDS + 1)),
    {"at": "after-append", "n": 3},  # both results of turn 1 stored, before turn 2's model call
    {"at": "after-append", "n": APPENDS},  # finalised, before the session append
    {"at": "before-session"},
    {"at": "in-tool", "item": "a"},  # a parallel call, its sibling may or may not finish
    {"at": "in-tool", "item": "c"},
    {"at": "in-tool", "item": "e"},  # in the handoff target
    # Crash again while resuming: appends are counted per process.
    [{"at": "in-tool", "item": "a"}, {"at": "before-append", "n": 2}],
    [
        {"at": "before-append", "n": 4},
        {"at": "in-tool", "item": "d"},
        {"at": "after-append", "n": 1},
    ],
]
SOME_KILL_POINTS: list[Point] = [  # a spread of the kinds above
    {"at": "before-append", "n": 1},
    {"at": "before-append", "n": 6},  # the handoff's model output, before its save
    {"at": "before-append", "n": 10},
    {"at": "after-append", "n": APPENDS},
    {"at": "in-tool", "item": "d"},
]


def _point_id(point: dict[str, Any]) -> str:
    return "-".join(str(v) for v in point.values())


async def _worker(spec: dict[str, Any]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        WORKER,
        json.dumps(spec),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _kill_at_ready(spec: dict[str, Any]) -> None:
    proc = await _worker(spec)
    assert proc.stdout is not None and proc.stderr is not None
    line = await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)
    if line.strip() != b"READY":
        proc.kill()
        _, err = await proc.communicate()
        pytest.fail(f"the worker never reached {spec['kill']}: {line!r}\n{err.decode()}")
    proc.kill()  # SIGKILL: no cleanup, no finally, no atexit
    await proc.wait()


def _log(path: Path) -> Counter[str]:
    return Counter(path.read_text().split()) if path.exists() else Counter()


def _result_items(entries: tuple[TranscriptEntry, ...]) -> set[str]:
    return {e.call_id for e in entries if isinstance(e, ToolResultEntry)} & set(ITEMS)


def _canonical(entries: tuple[TranscriptEntry, ...] | list[TranscriptEntry]) -> list[str]:
    return sorted(repr(e) for e in entries)


class Harness:
    """Stores for the parent's own reads (fresh instances, as another process would use)."""

    def __init__(self, backend: dict[str, Any], tmp_path: Path) -> None:
        self.backend = backend
        self.tmp_path = tmp_path

    def stores(self) -> tuple[Any, Any]:
        b = self.backend
        if b["name"] == "sqlite":
            return SQLiteSession(b["path"], wal=b["wal"]), SQLiteCheckpointer(
                b["path"], wal=b["wal"]
            )
        return PostgresSession(b["dsn"], schema=b["schema"]), PostgresCheckpointer(
            b["dsn"], schema=b["schema"]
        )

    async def read(self, run_id: str, session_id: str) -> tuple[RunSnapshot | None, list[Any]]:
        session, checkpointer = self.stores()
        try:
            return await checkpointer.load(run_id), await session.segments(session_id)
        finally:
            await session.aclose()
            await checkpointer.aclose()

    def spec(self, name: str, kill: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "run_id": f"run-{name}",
            "session_id": f"session-{name}",
            "log": str(self.tmp_path / f"{name}.log"),
            "kill": kill,
        }

    async def reference(self) -> tuple[RunSnapshot, dict[str, Any]]:
        spec = self.spec("reference")
        result = await persist_worker.run(spec)
        snapshot, _ = await self.read(spec["run_id"], spec["session_id"])
        assert snapshot is not None
        return snapshot, result

    async def crash_and_resume(self, point: Point, reference: RunSnapshot) -> None:
        """Kill at ``point`` (a list: kill each resume again), then resume to the end."""
        chain = point if isinstance(point, list) else [point]
        spec = self.spec("_".join(_point_id(p) for p in chain))
        at_kill: RunSnapshot | None = None
        for kill in chain:
            await _kill_at_ready({**spec, "kill": kill})
            before, (at_kill, _) = at_kill, await self.read(spec["run_id"], spec["session_id"])
            if before is not None:
                assert at_kill is not None
                assert at_kill.entries[: len(before.entries)] == before.entries  # append-only
        ran_at_kill = _log(Path(spec["log"]))
        kept = _result_items(at_kill.entries) if at_kill is not None else set()

        result = await persist_worker.run({**spec, "kill": None})
        final, segments = await self.read(spec["run_id"], spec["session_id"])

        assert (result["output"], result["agent"]) == ("finished", "closer")
        stored_turns = at_kill.head.turns if at_kill is not None else 0
        assert result["resumed_from_turn"] == stored_turns
        assert result["model_calls"] == 5 - stored_turns  # never re-asks a stored model output
        assert final is not None and final.head.status == "completed"
        calls = [e.call_id for e in final.entries if isinstance(e, ToolCallEntry)]
        results = [e.call_id for e in final.entries if isinstance(e, ToolResultEntry)]
        assert calls == [*ITEMS[:3], "h", *ITEMS[3:]]  # nothing lost, nothing duplicated
        assert sorted(results) == sorted(calls)
        assert _canonical(final.entries) == _canonical(reference.entries)
        if at_kill is not None:
            assert final.entries[: len(at_kill.entries)] == at_kill.entries  # append-only
        ran = _log(Path(spec["log"]))
        for item in ITEMS:
            again = 0 if item in kept else 1  # only calls without a stored result re-run
            assert ran[item] == ran_at_kill[item] + again, (item, ran_at_kill, kept)
        assert [s.run_id for s in segments] == [spec["run_id"]]
        assert list(segments[0].entries) == list(final.entries)


@pytest.mark.parametrize(
    ("wal", "points"),
    [(False, KILL_POINTS), (True, SOME_KILL_POINTS)],
    ids=["sqlite", "sqlite-wal"],
)
async def test_sigkill_at_every_point_then_resume_on_sqlite(
    tmp_path: Path, wal: bool, points: list[Point]
) -> None:
    harness = Harness({"name": "sqlite", "path": str(tmp_path / "crash.db"), "wal": wal}, tmp_path)
    reference, result = await harness.reference()
    assert result["output"] == "finished"
    assert len(reference.entries) == 1 + 6 + 6 + 1  # input, calls, results, final text
    await asyncio.gather(*(harness.crash_and_resume(p, reference) for p in points))


def _pg_dsn() -> str | None:
    if not port_open("127.0.0.1", 5432):
        return None
    import psycopg

    for user in ("postgres", "root"):
        dsn = f"postgresql://{user}@127.0.0.1:5432/test"
        try:
            psycopg.connect(dsn, connect_timeout=3).close()
        except psycopg.Error:
            continue
        return dsn
    return None


@pytest.fixture
def pg_harness(tmp_path: Path) -> Iterator[Harness]:
    dsn = _pg_dsn()
    require(dsn is not None, "no PostgreSQL server at 127.0.0.1:5432 (db 'test')")
    assert dsn is not None
    schema = f"lovia_crash_{uuid.uuid4().hex[:12]}"
    yield Harness({"name": "postgres", "dsn": dsn, "schema": schema}, tmp_path)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_sigkill_then_resume_on_postgres(pg_harness: Harness) -> None:
    reference, _ = await pg_harness.reference()
    await asyncio.gather(*(pg_harness.crash_and_resume(p, reference) for p in SOME_KILL_POINTS))
