"""Backends for the chat store suite: every contract test runs on an SQLite file, the
in-memory store and PostgreSQL.

PostgreSQL is the server on 127.0.0.1:5432 (database ``test``, trust auth, user ``postgres``
or ``root``); each test gets its own schema, dropped afterwards. Without a server the
PostgreSQL cases skip (and fail under ``LOVIA_CI=1``, see ``tests.support.require``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lovia.web.eventlog import EventRetention
from lovia.web.store.base import ChatStore
from lovia.web.store.sql import SQLChatStore

from tests.support import (  # noqa: F401 - the PostgreSQL fixtures
    pg_dsn,
    pg_dsn_or_none,
    pg_schema,
    require,
)


@dataclass
class Backend:
    """One backend under test: store factories plus raw SQL on its tables."""

    name: str
    location: str = ""
    """The SQLite file path, or the PostgreSQL DSN."""
    schema: str | None = None
    _open: list[ChatStore] = field(default_factory=list)
    _first: ChatStore | None = None

    def store(self, retention: EventRetention | None = None) -> SQLChatStore:
        """A new store instance on this backend's database (for ``memory``: its own)."""
        from lovia.web.store.postgres import PostgresChatStore
        from lovia.web.store.sqlite import SQLiteChatStore

        store: SQLChatStore
        if self.name == "memory":
            store = SQLiteChatStore(":memory:", retention=retention)
        elif self.name == "sqlite":
            store = SQLiteChatStore(self.location, retention=retention)
        else:
            store = PostgresChatStore(self.location, schema=self.schema, retention=retention)
        self._open.append(store)
        return store

    @property
    def shared(self) -> bool:
        """Whether two ``store()`` instances see the same data."""
        return self.name != "memory"

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run ``query`` (``?`` placeholders) directly on the backend's tables."""
        if self.name == "sqlite":
            conn = sqlite3.connect(self.location, isolation_level=None)
            try:
                return conn.execute(query, params).fetchall()
            finally:
                conn.close()
        assert self.name == "postgres", "the memory backend has no tables outside its store"
        import psycopg

        with psycopg.connect(
            self.location, autocommit=True, options=f"-csearch_path={self.schema}"
        ) as pg:
            cur = pg.execute(query.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    async def aclose(self) -> None:
        for store in self._open:
            await store.aclose()


def _backend(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Backend:
    if name == "memory":
        return Backend("memory")
    if name == "sqlite":
        return Backend("sqlite", str(tmp_path / "nested" / "chat.db"))
    schema: str = request.getfixturevalue("pg_schema")
    dsn: str = request.getfixturevalue("pg_dsn")
    return Backend("postgres", dsn, schema)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each backend in turn."""
    b = _backend(request.param, tmp_path, request)
    yield b
    await b.aclose()


@pytest.fixture(params=["sqlite", "postgres"])
async def db_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The backends two store instances (two processes) can share."""
    b = _backend(request.param, tmp_path, request)
    yield b
    await b.aclose()


@pytest.fixture
async def store(backend: Backend) -> SQLChatStore:
    """A store on each backend in turn."""
    return backend.store()
