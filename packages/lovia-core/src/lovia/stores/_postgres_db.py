"""One PostgreSQL schema as the stores use it: a psycopg 3 async pool, the tables, and the
lease connection.

Why it looks like this:

* psycopg and psycopg_pool are optional (extra ``postgres`` of lovia-core), so they are
  imported when a store is built, and a missing install is a ``UserError`` naming the extra.
* A DSN gets a pool we own (opened on first use, closed by ``aclose``); a pool passed in
  stays the caller's. Every script runs inside ``conn.transaction()``, so connections go
  back to the pool idle whatever their autocommit setting.
* Tables are created on first use, in one transaction serialised by a transaction-level
  advisory lock, because ``CREATE TABLE IF NOT EXISTS`` races between processes.
* Leases are session-level advisory locks, all held on **one connection of their own**,
  opened beside the pool with its connection settings (``AdvisoryLocks``). A lease held on
  a pooled connection pins that connection for the whole run: ten leases drained the
  default pool of ten, and every holder then waited for a connection to load its history,
  a deadlock. One connection holds any number of advisory locks, so leases cost one
  connection per store whatever their number, and the pool serves only the work. The
  server drops the locks with the connection, so a crashed process frees its keys at once.
* ``psycopg`` errors are translated to ``StoreError`` here, at the seam.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import StoreError, UserError
from ._sql import Result, Script, Statements

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
    """A pool (owned or borrowed), the schema, the statements, and the lease connection.

    ``migrate(sql)``, when given, is a script run once per instance right after the stores'
    tables are created, in the same transaction and under the same advisory lock (so two
    processes starting at once migrate one after the other).
    """

    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        *,
        schema: str | None,
        max_size: int,
        migrate: Callable[[Statements], Script[None]] | None = None,
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
        self._prefix = "" if schema is None else quote_ident(schema) + "."
        self.sql = Statements(
            prefix=self._prefix, placeholder="%s", for_update=" FOR UPDATE", dialect="postgresql"
        )
        self._migrate = migrate
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
        self._lease_conn: AsyncConnection[Any] | None = None
        self._lease_lock: asyncio.Lock | None = None

    async def close(self) -> None:
        """Close the lease connection, and the pool if this store opened it."""
        conn, self._lease_conn = self._lease_conn, None
        if conn is not None:
            await conn.close()
        if self._owns_pool:
            await self._pool.close()

    async def read(self, script: Script[T]) -> T:
        """Run ``script`` (our own SQL) in one transaction on a pooled connection."""
        return await self.write(script)

    async def write(self, script: Script[T]) -> T:
        """Run ``script`` (our own SQL) in one transaction on a pooled connection."""
        await self._ensure_ready()
        async with translated(), self._pool.connection() as conn, conn.transaction():
            return await _drive(conn, script)

    async def lease_connection(self) -> AsyncConnection[Any]:
        """The connection every lease of this store is held on, (re)opened when needed."""
        if self._lease_lock is None:
            self._lease_lock = asyncio.Lock()
        async with self._lease_lock:
            conn = self._lease_conn
            if conn is None or conn.closed:
                async with translated():
                    conn = await self._connect_beside_pool()
                self._lease_conn = conn
            return conn

    async def _connect_beside_pool(self) -> AsyncConnection[Any]:
        """A new connection outside the pool, with the pool's settings, in autocommit."""
        pool = self._pool
        conninfo = await _resolved(pool.conninfo)
        kwargs = {**(await _resolved(pool.kwargs) or {}), "autocommit": True}
        conn: AsyncConnection[Any] = await pool.connection_class.connect(conninfo, **kwargs)
        return conn

    async def _ensure_ready(self) -> None:
        if self._ready:
            return
        if self._ready_lock is None:
            self._ready_lock = asyncio.Lock()
        async with self._ready_lock, translated():
            if self._ready:
                return
            if self._owns_pool:
                # One direct connection first: the pool retries a failed connect until its
                # 30 s timeout and then loses the cause (a refused port, an unknown role),
                # so a store that cannot connect would wait and then not say why.
                await (await self._connect_beside_pool()).close()
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
                for statement in _schema_sql(self._prefix):
                    await conn.execute(statement)
                if self._migrate is not None:
                    await _drive(conn, self._migrate(self.sql))
            self._ready = True


class AdvisoryLocks:
    """The cross-process leases of one store kind: advisory locks on ``lease_connection``.

    A token is ``(connection, lock name)``. Advisory locks are re-entrant on one connection,
    which is why ``Leases`` lets a single task of this process hold a key at a time.
    """

    renew_every: float | None = None  # the server holds the lock as long as the connection

    def __init__(self, db: PostgresDatabase, kind: str) -> None:
        self._db = db
        self._prefix = f"lovia.{kind}:{db.schema or ''}:"

    async def take(self, key: str) -> object | None:
        conn = await self._db.lease_connection()
        name = self._prefix + key
        async with translated():
            cur = await conn.execute(
                "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (name,)
            )
            row = await cur.fetchone()
        return (conn, name) if row and row[0] else None

    async def renew(self, token: object) -> bool:
        return True

    async def release(self, token: object) -> None:
        assert isinstance(token, tuple)
        conn, name = token
        if conn.closed:
            return  # the server dropped its locks with it
        async with translated():
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (name,))


async def _drive(conn: AsyncConnection[Any], script: Script[T]) -> T:
    """Run each statement ``script`` yields on ``conn`` and send it the result."""
    try:
        query = next(script)
        while True:
            cur = await conn.execute(*query)
            rows = await cur.fetchall() if cur.description is not None else []
            query = script.send(Result(cur.rowcount, rows))
    except StopIteration as done:
        value: T = done.value
        return value


async def _resolved(value: Any) -> Any:
    """A pool's ``conninfo`` or ``kwargs``: a value, or a (possibly async) function of none."""
    if callable(value):
        value = value()
    if inspect.isawaitable(value):
        value = await value
    return value


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
