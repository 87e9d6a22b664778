"""Hostile ids: every store takes quotes and long ids, and refuses ids no database can store.

An id with a NUL or a lone surrogate once reached the driver: PostgreSQL answered a
``StoreError`` blaming the server's reachability, SQLite took the NUL but raised a raw
``UnicodeEncodeError`` on the surrogate, and the in-memory store took both. Now every store
refuses them the same way, with ``UserError``, before any SQL runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from lovia import InputEntry
from lovia.checkpointer import RunHead
from lovia.exceptions import UserError

from .conftest import Backend

ODD_BUT_VALID = ["a'b\"c;-- DROP TABLE session_runs", "x" * 10_000, "é🙂\n\t"]
UNSTORABLE = ["nul\x00id", "lone\udcffsurrogate"]


@pytest.mark.parametrize("key", ODD_BUT_VALID, ids=["quotes", "10k", "unicode"])
async def test_odd_ids_round_trip(backend: Backend, key: str) -> None:
    session, checkpointer = backend.session(), backend.checkpointer()
    await session.append(key, [InputEntry("user", "hi")], run_id=key)
    assert [s.run_id for s in await session.segments(key)] == [key]
    async with session.lease(key, wait=False):
        pass
    await checkpointer.append(key, [InputEntry("user", "hi")], RunHead(agent_name="a"))
    snapshot = await checkpointer.load(key)
    assert snapshot is not None and snapshot.run_id == key


def _session_calls(session: Any, key: str) -> list[Callable[[], Awaitable[Any]]]:
    async def lease() -> None:
        async with session.lease(key):
            pass

    return [
        lambda: session.append(key, [InputEntry("user", "hi")]),
        lambda: session.append("ok", [InputEntry("user", "hi")], run_id=key),
        lambda: session.load(key),
        lambda: session.segments(key),
        lambda: session.clear(key),
        lease,
    ]


def _checkpointer_calls(checkpointer: Any, key: str) -> list[Callable[[], Awaitable[Any]]]:
    async def lease() -> None:
        async with checkpointer.lease(key):
            pass

    return [
        lambda: checkpointer.append(key, [InputEntry("user", "hi")], RunHead(agent_name="a")),
        lambda: checkpointer.load(key),
        lambda: checkpointer.delete(key),
        lease,
    ]


@pytest.mark.parametrize("key", UNSTORABLE, ids=["nul", "surrogate"])
async def test_unstorable_ids_are_a_user_error_on_every_store(backend: Backend, key: str) -> None:
    session, checkpointer = backend.session(), backend.checkpointer()
    for call in _session_calls(session, key) + _checkpointer_calls(checkpointer, key):
        with pytest.raises(UserError) as caught:
            await call()
        assert caught.value.hint
    # Nothing was written on the way.
    assert await session.load("ok") == []
