"""PostgreSQL stores: ``PostgresSession`` and ``PostgresCheckpointer`` (psycopg 3, async).

The tables and the behaviour are the SQLite stores' (``_sql``): ``session_runs`` with
``UNIQUE(session_id, run_id)`` and ``INSERT ... ON CONFLICT DO NOTHING``, ``snapshot_turns``
plus ``snapshot_heads``, a schema version on every row; one test suite covers both.

A lease (a session's, a run id's) is a session-level advisory lock on one connection the
store keeps beside its pool, shared by all its leases, so leasing never takes a connection
from the work it protects; the server releases the locks when that connection ends, so a
crashed worker never leaves a key locked (see ``_postgres_db``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..checkpointer import Checkpointer
from ..session import Session
from ._postgres_db import AdvisoryLocks, PostgresDatabase
from ._sql import SQLCheckpointer, SQLSession, SQLStore
from ._url import unknown_param

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresCheckpointer", "PostgresSession", "from_url", "parse_url"]


class _PostgresStore(SQLStore):
    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        *,
        schema: str | None = None,
        max_connections: int = 10,
    ) -> None:
        db = PostgresDatabase(dsn_or_pool, schema=schema, max_size=max_connections)
        super().__init__(db, AdvisoryLocks(db, self.lease_kind))


class PostgresSession(_PostgresStore, SQLSession):
    """A ``Session`` in PostgreSQL, shared safely by many processes and hosts.

    ``dsn_or_pool`` is a libpq DSN/URL (the store opens and owns a pool of up to
    ``max_connections``) or a ``psycopg_pool.AsyncConnectionPool`` you own. ``schema``
    names the PostgreSQL schema for the tables (created on first use); ``None`` uses the
    connection's ``search_path``. Leases use one more connection, outside the pool. Raises
    ``UserError`` with an install hint when psycopg is missing. Close with
    ``await store.aclose()`` or use ``async with``.
    """


class PostgresCheckpointer(_PostgresStore, SQLCheckpointer):
    """A ``Checkpointer`` in PostgreSQL; arguments as for ``PostgresSession``."""


@overload
def from_url(url: str, *, kind: Literal["session"]) -> Session: ...
@overload
def from_url(url: str, *, kind: Literal["checkpointer"]) -> Checkpointer: ...
def from_url(url: str, *, kind: Literal["session", "checkpointer"]) -> Session | Checkpointer:
    """A PostgreSQL store from ``postgresql://user@host/db?schema=name`` (the ``lovia.stores``
    entry point); ``schema`` is lovia's, libpq's connection parameters go to libpq, and any
    other parameter is a ``UserError``."""
    dsn, schema = parse_url(url)
    if kind == "session":
        return PostgresSession(dsn, schema=schema)
    return PostgresCheckpointer(dsn, schema=schema)


def parse_url(url: str) -> tuple[str, str | None]:
    """A ``postgresql://`` URL split into the DSN libpq gets and lovia's ``schema``
    parameter (``None`` when absent); ``UserError`` for a parameter neither knows."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    libpq = _libpq_keywords()
    for name, _ in query:
        if libpq and name != "schema" and name not in libpq:
            raise unknown_param(
                url,
                name,
                ("schema", *libpq),
                accepted="schema and libpq's connection parameters (sslmode, connect_timeout, ...)",
            )
    schema = next((v for k, v in reversed(query) if k == "schema"), None) or None
    dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
    return dsn, schema


def _libpq_keywords() -> frozenset[str]:
    """The connection parameters this libpq knows (empty without psycopg: the store's
    constructor then names the missing extra)."""
    try:
        from psycopg import pq
    except ImportError:
        return frozenset()
    return frozenset(o.keyword.decode() for o in pq.Conninfo.get_defaults())
