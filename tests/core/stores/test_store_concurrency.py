"""Many writers and the session lease: in-process on every backend, across processes on the
database backends (real subprocesses, synchronised on the lines they print)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from lovia.exceptions import RunBusyError, SessionBusyError, UserError
from lovia.stores import SQLiteSession
from lovia.transcript import InputEntry

from .conftest import Backend

WORKER = str(Path(__file__).with_name("_store_worker.py"))


async def spawn(
    backend: Backend, command: str, session_id: str, n: int = 0
) -> asyncio.subprocess.Process:
    spec = {"name": backend.name, "location": backend.location, "schema": backend.schema}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        WORKER,
        command,
        json.dumps(spec),
        session_id,
        str(n),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def next_line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if not line:
        assert proc.stderr is not None
        raise AssertionError(f"worker exited early: {(await proc.stderr.read()).decode()}")
    return line.decode().strip()


async def finish(proc: asyncio.subprocess.Process) -> None:
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()


# -- many writers --------------------------------------------------------------------------


async def test_eight_processes_appending_to_distinct_sessions_lose_nothing(
    db_backend: Backend,
) -> None:
    # No warm-up: the workers also race to create the schema and tables on first use.
    procs = [await spawn(db_backend, "append", f"s{i}", 15) for i in range(8)]
    for proc in procs:
        assert await next_line(proc) == "done"
        await finish(proc)
    store = db_backend.session()
    checkpointer = db_backend.checkpointer()
    for i in range(8):
        segments = await store.segments(f"s{i}")
        assert [s.run_id for s in segments] == [f"s{i}-run{n}" for n in range(15)]
        assert all(len(s.entries) == 4 for s in segments)
        snapshot = await checkpointer.load(f"s{i}-run14")
        assert snapshot is not None and len(snapshot.entries) == 4
        assert snapshot.head.status == "completed"


async def test_concurrent_tasks_appending_to_one_session_keep_every_run(
    backend: Backend,
) -> None:
    store = backend.session()
    await asyncio.gather(
        *(store.append("s", [InputEntry("user", str(i))], run_id=f"r{i}") for i in range(20))
    )
    assert sorted(s.run_id for s in await store.segments("s")) == sorted(f"r{i}" for i in range(20))


# -- the lease, in one process -------------------------------------------------------------


async def test_a_held_lease_makes_a_fail_fast_caller_raise(backend: Backend) -> None:
    store = backend.session()
    async with store.lease("s"):
        with pytest.raises(SessionBusyError) as info:
            async with store.lease("s", wait=False):
                pass
        async with store.lease("other", wait=False):
            pass  # sessions lease independently
    assert info.value.hint is not None and "wait=True" in info.value.hint
    async with store.lease("s", wait=False):
        pass  # released on exit


async def test_a_waiting_caller_gets_the_lease_when_the_holder_leaves(backend: Backend) -> None:
    store = backend.session()
    order: list[str] = []
    holder_in = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with store.lease("s"):
            holder_in.set()
            await release.wait()
            order.append("holder out")

    async def waiter() -> None:
        await holder_in.wait()
        async with store.lease("s", wait=True, timeout=30):
            order.append("waiter in")

    task_h = asyncio.create_task(holder())
    task_w = asyncio.create_task(waiter())
    await holder_in.wait()
    release.set()
    await asyncio.gather(task_h, task_w)
    assert order == ["holder out", "waiter in"]


async def test_a_waiting_caller_gives_up_after_its_timeout(backend: Backend) -> None:
    store = backend.session()
    async with store.lease("s"):
        started = time.monotonic()
        with pytest.raises(SessionBusyError, match="stayed leased"):
            async with store.lease("s", timeout=0.05):
                pass
        assert time.monotonic() - started < 5


async def test_the_lease_is_released_when_the_block_raises(backend: Backend) -> None:
    store = backend.session()
    with pytest.raises(RuntimeError):
        async with store.lease("s"):
            raise RuntimeError("run failed")
    async with store.lease("s", wait=False):
        pass


async def test_a_negative_lease_timeout_is_a_user_error(backend: Backend) -> None:
    with pytest.raises(UserError):
        async with backend.session().lease("s", timeout=-1):
            pass


# -- the lease, across processes -----------------------------------------------------------


async def test_another_process_fails_fast_then_waits_for_the_lease(db_backend: Backend) -> None:
    store = db_backend.session()
    async with store.lease("s"):
        proc = await spawn(db_backend, "contend", "s")
        assert await next_line(proc) == "busy"
    assert await next_line(proc) == "acquired"
    await finish(proc)


@pytest.mark.parametrize("kind", ["session", "run"])
async def test_a_killed_holder_does_not_keep_the_key_leased(db_backend: Backend, kind: str) -> None:
    """A session's lease, and a checkpointer's lease on a run id."""
    proc = await spawn(db_backend, "hold" if kind == "session" else "hold-run", "s")
    assert await next_line(proc) == "held"
    store = db_backend.session() if kind == "session" else db_backend.checkpointer()
    with pytest.raises(SessionBusyError if kind == "session" else RunBusyError):
        async with store.lease("s", wait=False):
            pass
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    # SQLite sees that the holder's pid is gone; PostgreSQL drops the advisory lock with
    # the connection (the server notices asynchronously, hence wait=True). Far below the
    # 30 s lease expiry either way.
    started = time.monotonic()
    async with store.lease("s", wait=True, timeout=15):
        pass
    assert time.monotonic() - started < 15


async def test_an_sqlite_lease_from_another_host_holds_until_it_expires(tmp_path: Path) -> None:
    async with SQLiteSession(tmp_path / "s.db") as store:
        await store.load("s")
        backend = Backend("sqlite", str(tmp_path / "s.db"))
        backend.sql(
            "INSERT INTO session_leases VALUES ('s', 'elsewhere:1:x', ?)", (time.time() + 3600,)
        )
        with pytest.raises(SessionBusyError):
            async with store.lease("s", wait=False):
                pass
        backend.sql("UPDATE session_leases SET expires_at = ?", (time.time() - 1,))
        async with store.lease("s", wait=False):
            assert backend.sql(
                "SELECT count(*) FROM session_leases WHERE owner LIKE 'elsewhere%'"
            ) == [(0,)]


@pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="Linux PID namespaces")
async def test_an_sqlite_lease_from_another_pid_namespace_is_not_judged_by_its_pid(
    tmp_path: Path,
) -> None:
    """A container sharing the file and the host name: its pids are not ours to probe."""
    gone = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await gone.wait()  # a pid that (almost surely) names no live process here
    async with SQLiteSession(tmp_path / "s.db") as store:
        await store.load("s")
        backend = Backend("sqlite", str(tmp_path / "s.db"))
        for host in (socket.gethostname(), "elsewhere"):
            backend.sql(
                "INSERT OR REPLACE INTO session_leases VALUES ('s', ?, ?)",
                (f"{host}:{gone.pid}:x", time.time() + 3600),
            )
            with pytest.raises(SessionBusyError):
                async with store.lease("s", wait=False):
                    pass
        # The same owner seen from our own namespace is known dead and taken over at once.
        async with store.lease("probe", wait=False):
            ((owner,),) = backend.sql("SELECT owner FROM session_leases WHERE session_id = 'probe'")
        backend.sql(
            "INSERT OR REPLACE INTO session_leases VALUES ('s', ?, ?)",
            (f"{owner.split(':')[0]}:{gone.pid}:x", time.time() + 3600),
        )
        async with store.lease("s", wait=False):
            pass


async def test_an_sqlite_lease_is_renewed_while_held(tmp_path: Path) -> None:
    async with SQLiteSession(tmp_path / "s.db", lease_ttl=0.3) as store:
        backend = Backend("sqlite", str(tmp_path / "s.db"))
        async with store.lease("s"):
            ((first,),) = backend.sql("SELECT expires_at FROM session_leases")
            deadline = time.monotonic() + 10
            while backend.sql("SELECT expires_at FROM session_leases") == [(first,)]:
                assert time.monotonic() < deadline, "the lease was never renewed"
                await asyncio.sleep(0.02)
        assert backend.sql("SELECT count(*) FROM session_leases") == [(0,)]


async def test_a_cancelled_waiter_leaves_no_lease_behind(backend: Backend) -> None:
    store = backend.session()
    async with store.lease("s"):
        waiter = asyncio.create_task(store.lease("s", timeout=30).__aenter__())
        await asyncio.sleep(0)  # let it start waiting (any point of its wait will do)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    async with store.lease("s", wait=False):
        pass


async def test_a_lease_cancelled_while_being_taken_is_handed_back(backend: Backend) -> None:
    """The session is free, so the attempt succeeds in the database while being cancelled."""
    store = backend.session()
    for i in range(10):
        lease = store.lease(f"s{i}", wait=False)
        attempt = asyncio.create_task(lease.__aenter__())
        await asyncio.sleep(0)  # let it start its attempt; the cancel lands inside it
        attempt.cancel()
        try:
            await attempt
        except asyncio.CancelledError:
            pass
        else:  # the in-memory lease is taken without suspending: nothing to cancel
            await lease.__aexit__(None, None, None)
        async with store.lease(f"s{i}", wait=False):
            pass
    if backend.name == "sqlite":
        assert backend.sql("SELECT count(*) FROM session_leases") == [(0,)]


async def test_errors_inside_a_lease_pass_through_untranslated(db_backend: Backend) -> None:
    import sqlite3

    import psycopg

    error: Exception = (
        sqlite3.OperationalError("the run's own")
        if db_backend.name == "sqlite"
        else psycopg.OperationalError("the run's own")
    )
    store = db_backend.session()
    with pytest.raises(type(error)) as info:
        async with store.lease("s"):
            raise error
    assert info.value is error
    async with store.lease("s", wait=False):
        pass


async def test_postgres_leases_do_not_starve_the_holder_of_connections(
    pg_dsn: str, pg_schema: str
) -> None:
    """Neither a held lease nor waiting callers sit on pooled connections: with a pool of
    one, a holder and three waiters (of another store on that pool, so they poll the
    server), the holder still gets the connection for its own appends."""
    from lovia.stores import PostgresSession
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(
        pg_dsn, min_size=1, max_size=1, timeout=5, open=False, kwargs={"autocommit": True}
    ) as pool:
        store = PostgresSession(pool, schema=pg_schema)
        other = PostgresSession(pool, schema=pg_schema)
        await store.load("warm-up")
        entered: list[int] = []
        tried: list[int] = []
        all_tried = asyncio.Event()

        async def waiter(i: int) -> None:
            try:
                async with other.lease("s", wait=False):
                    pass
            except SessionBusyError:
                tried.append(i)
                if len(tried) == 3:
                    all_tried.set()
            async with other.lease("s", timeout=60):
                entered.append(i)

        async with store.lease("s"):
            waiters = [asyncio.create_task(waiter(i)) for i in range(3)]
            await asyncio.wait_for(all_tried.wait(), 30)
            for i in range(3):
                await store.append("s", [InputEntry("user", f"held {i}")], run_id=f"h{i}")
        await asyncio.gather(*waiters)
        assert sorted(entered) == [0, 1, 2]
        assert len(await store.load("s")) == 3
        await store.aclose()
        await other.aclose()
