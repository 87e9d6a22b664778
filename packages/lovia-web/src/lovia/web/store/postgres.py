"""``PostgresChatStore``: the ``ChatStore`` in one PostgreSQL database (psycopg 3, async).

The chat tables, the core's ``PostgresSession`` and its ``PostgresCheckpointer`` live in the
same database and schema; each keeps its own pool (so up to three pools of
``max_connections``, plus one lease connection each for the session and the checkpointer).
The tables are created and migrated on first use under an advisory lock, so several server
processes may start on one database at once. Needs the ``postgres`` extra of lovia-web
(psycopg and psycopg_pool). The behaviour is ``lovia.web.store.sql``'s, shared with SQLite.
"""

from __future__ import annotations

import importlib.util

from lovia.exceptions import UserError, install_hint
from lovia.stores.postgres import PostgresCheckpointer, PostgresSession
from lovia.stores.sql import PostgresDatabase, parse_postgres_url

from ..eventlog import EventRetention
from .sql import SQLChatStore, migrate

__all__ = ["PostgresChatStore"]


class PostgresChatStore(SQLChatStore):
    """A ``ChatStore`` in PostgreSQL at ``url`` (a libpq DSN or a ``postgresql://`` URL,
    whose ``?schema=`` is read as ``schema``); ``schema`` names the PostgreSQL schema of
    every table (created on first use), ``None`` uses the connection's ``search_path``.
    ``UserError`` naming the extra when psycopg is not installed."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        retention: EventRetention | None = None,
        max_connections: int = 10,
    ) -> None:
        if importlib.util.find_spec("psycopg") is None or (
            importlib.util.find_spec("psycopg_pool") is None
        ):
            raise UserError(
                "the PostgreSQL chat store needs psycopg 3 and psycopg_pool",
                hint=install_hint("lovia-web", "postgres"),
            )
        dsn = url
        if isinstance(url, str) and url.lower().startswith(("postgresql://", "postgres://")):
            dsn, url_schema = parse_postgres_url(url)
            schema = schema if schema is not None else url_schema
        self.schema = schema
        self._dsn = dsn
        db = PostgresDatabase(dsn, schema=schema, max_size=max_connections, migrate=migrate)
        session = PostgresSession(dsn, schema=schema, max_connections=max_connections)
        checkpointer = PostgresCheckpointer(dsn, schema=schema, max_connections=max_connections)
        super().__init__(db, session, checkpointer, retention=retention)

    def __repr__(self) -> str:
        return f"PostgresChatStore(schema={self.schema!r})"
