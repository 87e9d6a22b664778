"""Shared helpers for the test suite."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator

import pytest

IN_CI = os.environ.get("LOVIA_CI") == "1"


def require(available: bool, reason: str) -> None:
    """Skip the calling test when a real component is missing; under ``LOVIA_CI=1`` fail instead.

    CI installs and starts every component, so a missing one there is a broken pipeline,
    not a reason to skip.
    """
    if available:
        return
    if IN_CI:
        pytest.fail(f"required component missing under LOVIA_CI=1: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


_PG_USERS = ("postgres", "root")


def find_pg_dsn() -> str | None:
    """The DSN of the PostgreSQL server on 127.0.0.1:5432 (database ``test``, trust auth),
    or ``None`` without a server or without psycopg."""
    if not port_open("127.0.0.1", 5432):
        return None
    try:
        import psycopg
    except ImportError:  # the postgres extra is not installed
        return None
    for user in _PG_USERS:
        dsn = f"postgresql://{user}@127.0.0.1:5432/test"
        try:
            psycopg.connect(dsn, connect_timeout=3).close()
        except psycopg.Error:
            continue
        return dsn
    return None


@pytest.fixture(scope="session")
def pg_dsn_or_none() -> str | None:
    return find_pg_dsn()


@pytest.fixture
def pg_dsn(pg_dsn_or_none: str | None) -> str:
    require(pg_dsn_or_none is not None, "no PostgreSQL server at 127.0.0.1:5432 (db 'test')")
    assert pg_dsn_or_none is not None
    return pg_dsn_or_none


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema name for one test; the schema is dropped afterwards."""
    import psycopg

    name = f"lovia_test_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
