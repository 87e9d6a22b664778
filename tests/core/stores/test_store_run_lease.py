"""The checkpointer's run-id lease, on every backend (issue 20, item 3): the same contract
as the session lease, with ``RunBusyError``."""

from __future__ import annotations

import asyncio

import pytest
from lovia.exceptions import RunBusyError, SessionBusyError, UserError

from .conftest import Backend
from .test_store_concurrency import finish, next_line, spawn


async def test_a_held_run_id_makes_a_fail_fast_caller_raise(backend: Backend) -> None:
    store = backend.checkpointer()
    async with store.lease("r"):
        with pytest.raises(RunBusyError) as info:
            async with store.lease("r", wait=False):
                pass
        async with store.lease("other", wait=False):
            pass  # run ids lease independently
        with pytest.raises(RunBusyError, match="stayed in progress"):
            async with store.lease("r", timeout=0.05):
                pass
    assert not isinstance(info.value, SessionBusyError)
    assert info.value.hint is not None and "run_id" in info.value.hint
    async with store.lease("r", wait=False):
        pass  # released on exit


async def test_a_run_lease_and_a_session_lease_of_one_name_are_independent(
    backend: Backend,
) -> None:
    async with backend.session().lease("x"), backend.checkpointer().lease("x", wait=False):
        pass


async def test_a_waiter_gets_the_run_id_when_the_holder_leaves(backend: Backend) -> None:
    store = backend.checkpointer()
    other = backend.checkpointer() if backend.persistent else store
    order: list[str] = []
    held, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with store.lease("r"):
            held.set()
            await release.wait()
            order.append("holder out")

    async def waiter() -> None:
        await held.wait()
        with pytest.raises(RunBusyError):
            async with other.lease("r", wait=False):
                pass
        release.set()
        async with other.lease("r", timeout=30):
            order.append("waiter in")

    await asyncio.gather(holder(), waiter())
    assert order == ["holder out", "waiter in"]


async def test_a_blank_run_id_is_a_user_error(backend: Backend) -> None:
    with pytest.raises(UserError, match="run_id"):
        async with backend.checkpointer().lease(""):
            pass


async def test_a_run_id_held_by_another_process_is_released_to_a_waiter(
    db_backend: Backend,
) -> None:
    proc = await spawn(db_backend, "hold-run", "r")
    assert await next_line(proc) == "held"
    store = db_backend.checkpointer()
    waiter = asyncio.create_task(store.lease("r", timeout=30).__aenter__())
    assert proc.stdin is not None
    proc.stdin.close()
    assert await next_line(proc) == "released"
    await finish(proc)
    await waiter  # (the lease is dropped with the store at teardown)
