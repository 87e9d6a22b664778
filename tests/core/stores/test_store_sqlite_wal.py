"""Opening one new SQLite file in WAL mode from many connections at once (issue 20, item 5).

``PRAGMA journal_mode=WAL`` does not wait on the busy timeout: while another connection is
writing in rollback mode (as the first of many openers is while it converts a new file to
WAL) SQLite answers "database is locked" at once. The store retries that step.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import threading
from pathlib import Path

from lovia.stores import SQLiteSession
from lovia.transcript import InputEntry

WORKER = str(Path(__file__).with_name("_store_worker.py"))


class _Signal(logging.Handler):
    """Sets ``seen`` when the store reports that it is retrying the WAL switch."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "WAL" in record.getMessage():
            self.seen.set()


async def test_a_wal_store_waits_for_a_writer_holding_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # a rollback-mode writer on the still empty file
    signal = _Signal()
    log = logging.getLogger("lovia.stores")
    log.addHandler(signal)
    old_level = log.level
    log.setLevel(logging.DEBUG)
    try:
        store = SQLiteSession(path, wal=True)
        append = asyncio.ensure_future(store.append("s", [InputEntry("user", "hi")]))
        retrying = asyncio.ensure_future(asyncio.to_thread(signal.seen.wait, 30))
        done, _ = await asyncio.wait({append, retrying}, return_when=asyncio.FIRST_COMPLETED)
        assert append not in done, f"the append did not wait: {append.exception()!r}"
        assert retrying.result(), "the store never retried the WAL switch"
        writer.execute("COMMIT")
        await append
        assert await store.load("s") == [InputEntry("user", "hi")]
        await store.aclose()
    finally:
        signal.seen.set()  # frees the waiting thread whatever happened
        log.removeHandler(signal)
        log.setLevel(old_level)
        writer.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


async def test_many_processes_open_one_new_wal_file_at_once(tmp_path: Path) -> None:
    """Eight processes of four stores each open a new file together, round after round."""
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            WORKER,
            "open-append",
            "{}",
            f"p{i}",
            "4",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for i in range(8)
    ]
    for r in range(8):
        path = tmp_path / f"round-{r}.db"
        for proc in procs:  # every process waits on its stdin, so they start together
            assert proc.stdin is not None
            proc.stdin.write(f"{path}\n".encode())
        await asyncio.gather(*(proc.stdin.drain() for proc in procs if proc.stdin))
        for proc in procs:
            assert proc.stdout is not None
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
            assert line == "done", line or (await proc.stderr.read()).decode()  # type: ignore[union-attr]
        async with SQLiteSession(path) as store:
            for i in range(8):
                assert len(await store.segments(f"p{i}-0")) == 1
    for proc in procs:
        _, err = await asyncio.wait_for(proc.communicate(b""), 60)
        assert proc.returncode == 0, err.decode()
