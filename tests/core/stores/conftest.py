"""Backends for the store suite: every contract test runs on memory, SQLite and PostgreSQL.

PostgreSQL is the server on 127.0.0.1:5432 (database ``test``, trust auth, user ``postgres``
or ``root``). Each test gets its own schema, dropped afterwards. Without a server the
PostgreSQL cases skip (and fail under ``LOVIA_CI=1``, see ``tests.support.require``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import pytest
from lovia.stores import (
    InMemoryCheckpointer,
    InMemorySession,
    PostgresCheckpointer,
    PostgresSession,
    SQLiteCheckpointer,
    SQLiteSession,
)

from tests.support import (  # noqa: F401 - the PostgreSQL fixtures
    pg_dsn,
    pg_dsn_or_none,
    pg_schema,
    require,
)

SessionStore = Union[InMemorySession, SQLiteSession, PostgresSession]
CheckpointStore = Union[InMemoryCheckpointer, SQLiteCheckpointer, PostgresCheckpointer]


@dataclass
class Backend:
    """One backend under test: store factories plus raw SQL access to its tables."""

    name: str
    location: str = ""
    """The SQLite file path, or the PostgreSQL DSN."""
    schema: str | None = None
    _open: list[Any] = field(default_factory=list)

    def session(self, **kwargs: Any) -> SessionStore:
        store: SessionStore
        if self.name == "memory":
            store = InMemorySession()
        elif self.name == "sqlite":
            store = SQLiteSession(self.location, **kwargs)
        else:
            store = PostgresSession(self.location, schema=self.schema, **kwargs)
        self._open.append(store)
        return store

    def checkpointer(self) -> CheckpointStore:
        store: CheckpointStore
        if self.name == "memory":
            store = InMemoryCheckpointer()
        elif self.name == "sqlite":
            store = SQLiteCheckpointer(self.location)
        else:
            store = PostgresCheckpointer(self.location, schema=self.schema)
        self._open.append(store)
        return store

    @property
    def persistent(self) -> bool:
        return self.name != "memory"

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run ``query`` (``?`` placeholders) directly on the backend's tables."""
        if self.name == "sqlite":
            with sqlite3.connect(self.location, isolation_level=None) as conn:
                rows = conn.execute(query, params).fetchall()
            conn.close()
            return rows
        assert self.name == "postgres", "the memory backend has no tables"
        import psycopg

        with psycopg.connect(
            self.location, autocommit=True, options=f"-csearch_path={self.schema}"
        ) as pg:
            cur = pg.execute(query.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    async def aclose(self) -> None:
        for store in self._open:
            if not isinstance(store, (InMemorySession, InMemoryCheckpointer)):
                await store.aclose()


def _backend(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Backend:
    if name == "memory":
        return Backend("memory")
    if name == "sqlite":
        return Backend("sqlite", str(tmp_path / "store.db"))
    schema: str = request.getfixturevalue("pg_schema")
    dsn: str = request.getfixturevalue("pg_dsn")
    return Backend("postgres", dsn, schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each backend in turn."""
    b = _backend(request.param, tmp_path, request)
    yield b
    await b.aclose()


@pytest.fixture(params=["sqlite", "postgres"])
async def db_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The backends with tables (for corrupt-row and cross-process tests)."""
    b = _backend(request.param, tmp_path, request)
    yield b
    await b.aclose()
