"""One PostgreSQL schema as the stores use it: a psycopg 3 async pool and the tables.

Why it looks like this:

* psycopg and psycopg_pool are optional (extra ``postgres`` of lovia-core), so they are
  imported when a store is built, and a missing install is a ``UserError`` naming the extra.
* A DSN gets a pool we own (opened on first use, closed by ``aclose``); a pool passed in
  stays the caller's. Every statement runs inside ``conn.transaction()``, so connections go
  back to the pool idle whatever their autocommit setting.
* Tables are created on first use, in one transaction serialised by a transaction-level
  advisory lock, because ``CREATE TABLE IF NOT EXISTS`` races between processes.
* ``psycopg`` errors are translated to ``StoreError`` here, at the seam.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import StoreError, UserError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")

_INSTALL_HINT = "pip install 'psycopg[binary,pool]'"


def _schema_sql(p: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE IF NOT EXISTS {p}session_runs (
            id BIGSERIAL PRIMARY KEY,
            session_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            entries TEXT NOT NULL,
            meta TEXT NOT NULL,
            version INTEGER NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            UNIQUE (session_id, run_id)
        )""",
        f"CREATE INDEX IF NOT EXISTS session_runs_order ON {p}session_runs (session_id, id)",
        f"""CREATE TABLE IF NOT EXISTS {p}snapshot_turns (
            id BIGSERIAL PRIMARY KEY,
            run_id TEXT NOT NULL,
            entries TEXT NOT NULL,
            version INTEGER NOT NULL
        )""",
        f"CREATE INDEX IF NOT EXISTS snapshot_turns_order ON {p}snapshot_turns (run_id, id)",
        f"""CREATE TABLE IF NOT EXISTS {p}snapshot_heads (
            run_id TEXT PRIMARY KEY,
            head TEXT NOT NULL,
            version INTEGER NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
    )


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


class PostgresDatabase:
    """A pool (owned or borrowed), the schema prefix, and transaction helpers."""

    def __init__(
        self, dsn_or_pool: str | AsyncConnectionPool[Any], *, schema: str | None, max_size: int
    ) -> None:
        try:
            import psycopg  # noqa: F401 - fail at construction, not on the first query
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:
            raise UserError(
                "PostgreSQL stores need psycopg 3 and psycopg_pool", hint=_INSTALL_HINT
            ) from exc
        if schema is not None and not (isinstance(schema, str) and schema):
            raise UserError(
                f"schema must be a non-empty string or None, got {schema!r}",
                hint="name a PostgreSQL schema (created on first use), or None for search_path",
            )
        self.schema = schema
        self.prefix = "" if schema is None else quote_ident(schema) + "."
        if isinstance(dsn_or_pool, str):
            self._pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                dsn_or_pool,
                min_size=1,
                max_size=max_size,
                open=False,
                kwargs={"autocommit": True},
            )
            self._owns_pool = True
        elif isinstance(dsn_or_pool, AsyncConnectionPool):
            self._pool = dsn_or_pool
            self._owns_pool = False
        else:
            raise UserError(
                f"expected a DSN string or a psycopg_pool.AsyncConnectionPool, "
                f"got {type(dsn_or_pool).__name__}"
            )
        self._ready = False
        self._ready_lock: asyncio.Lock | None = None

    async def close(self) -> None:
        """Close the pool if this store opened it (a borrowed pool stays open)."""
        if self._owns_pool:
            await self._pool.close()

    async def run(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``fn`` (our own SQL) in one transaction on a pooled connection."""
        await self._ensure_ready()
        async with translated(), self._pool.connection() as conn, conn.transaction():
            return await fn(conn)

    async def getconn(self) -> AsyncConnection[Any]:
        """Borrow a connection for longer than one transaction (a lease); see ``putconn``."""
        await self._ensure_ready()
        async with translated():
            conn: AsyncConnection[Any] = await self._pool.getconn()
        return conn

    async def putconn(self, conn: AsyncConnection[Any]) -> None:
        """Give back a borrowed connection (a closed one is discarded by the pool)."""
        async with translated():
            await self._pool.putconn(conn)

    async def _ensure_ready(self) -> None:
        if self._ready:
            return
        if self._ready_lock is None:
            self._ready_lock = asyncio.Lock()
        async with self._ready_lock, translated():
            if self._ready:
                return
            if self._owns_pool:
                # Not open(wait=True): a caller cancelled inside that wait leaves the pool
                # unable to wait again; the first connection below waits just the same.
                await self._pool.open()
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"lovia.schema:{self.schema or ''}",),
                )
                if self.schema is not None:
                    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
                for statement in _schema_sql(self.prefix):
                    await conn.execute(statement)
            self._ready = True


@asynccontextmanager
async def translated() -> AsyncIterator[None]:
    """Turn a ``psycopg.Error`` raised in the block into a ``StoreError``."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(
            f"PostgreSQL store failed: {exc}",
            hint="check the server is reachable and the DSN (user, database, permissions)",
        ) from exc
