"""A PostgreSQL store that cannot connect says why, at once.

The first use of a store whose DSN names an unknown role, or a port where nothing listens,
waited out the pool's 30 s and then raised ``StoreError("couldn't get a connection after
30.00 sec")``: the server's own answer (``role ... does not exist``, ``Connection refused``)
was lost.
"""

from __future__ import annotations

import asyncio
import socket

import pytest
from lovia.exceptions import StoreError
from lovia.stores import PostgresCheckpointer, PostgresSession

pytest.importorskip("psycopg_pool")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def _first_use_error(dsn: str) -> StoreError:
    session = PostgresSession(dsn)
    try:
        with pytest.raises(StoreError) as caught:
            await asyncio.wait_for(session.load("s1"), 10)  # well inside the pool's 30 s
    finally:
        await session.aclose()
    return caught.value


async def test_nothing_listening_is_reported_with_the_cause() -> None:
    error = await _first_use_error(f"postgresql://postgres@127.0.0.1:{_closed_port()}/test")
    assert "refused" in str(error).lower()
    assert error.hint


async def test_an_unknown_role_is_reported_with_the_servers_answer(pg_dsn: str) -> None:
    dsn = pg_dsn.replace("://postgres@", "://no_such_role_probe4@").replace(
        "://root@", "://no_such_role_probe4@"
    )
    error = await _first_use_error(dsn)
    assert "no_such_role_probe4" in str(error)


async def test_a_checkpointer_fails_the_same_way() -> None:
    checkpointer = PostgresCheckpointer(f"postgresql://postgres@127.0.0.1:{_closed_port()}/test")
    try:
        with pytest.raises(StoreError, match="(?i)refused"):
            await asyncio.wait_for(checkpointer.load("r1"), 10)
    finally:
        await checkpointer.aclose()
