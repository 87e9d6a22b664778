"""PostgreSQL stores: ``PostgresSession`` and ``PostgresCheckpointer`` (psycopg 3, async).

The tables and semantics match the SQLite stores (``session_runs`` with
``UNIQUE(session_id, run_id)`` and ``INSERT ... ON CONFLICT DO NOTHING``, ``snapshot_turns``
plus ``snapshot_heads``, a schema version on every row), so one test suite covers both.

The session lease is a session-level ``pg_advisory_lock`` held on a pooled connection for
the duration of the lease: the server releases it when the connection ends, so a crashed
worker never leaves a session locked. While leased, that connection is not available to the
pool; size ``max_connections`` above the number of sessions leased at once. A caller waiting
for a lease borrows a connection only for each brief attempt, so waiters never starve the
holder of the connections its appends need.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..checkpointer import Checkpointer, RunHead, RunSnapshot
from ..session import Segment, Session
from ..transcript import TranscriptEntry
from . import _maintenance, _rows
from ._lease import Backoff, busy, check_lease_args
from ._postgres_db import PostgresDatabase, translated

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresCheckpointer", "PostgresSession", "from_url"]

logger = logging.getLogger(__name__)


class PostgresSession:
    """A ``Session`` in PostgreSQL, shared safely by many processes and hosts.

    ``dsn_or_pool`` is a libpq DSN/URL (the store opens and owns a pool of up to
    ``max_connections``) or a ``psycopg_pool.AsyncConnectionPool`` you own. ``schema``
    names the PostgreSQL schema for the tables (created on first use); ``None`` uses the
    connection's ``search_path``. Raises ``UserError`` with an install hint when psycopg is
    missing. Close with ``await store.aclose()`` or use ``async with``.
    """

    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        *,
        schema: str | None = None,
        max_connections: int = 10,
    ) -> None:
        self._db = PostgresDatabase(dsn_or_pool, schema=schema, max_size=max_connections)
        self._t = self._db.prefix + "session_runs"

    async def __aenter__(self) -> PostgresSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool if this store opened it."""
        await self._db.close()

    async def segments(self, session_id: str) -> list[Segment]:
        """Every segment of ``session_id`` in insertion order."""
        return _rows.decode_segments(await self._db.run(lambda c: self._select(c, session_id)))

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat history of ``session_id``."""
        return _rows.decode_history(await self._db.run(lambda c: self._select(c, session_id)))

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Add one segment; idempotent per ``run_id`` (see ``Session.append``)."""
        run_id, encoded, encoded_meta = _rows.encode_segment(session_id, entries, run_id, meta)
        rid = run_id

        async def insert(conn: AsyncConnection[Any]) -> None:
            cur = await conn.execute(
                f"INSERT INTO {self._t} (session_id, run_id, entries, meta, version, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session_id, run_id) DO NOTHING",
                (session_id, rid, encoded, encoded_meta, _rows.ROW_VERSION, time.time()),
            )
            if cur.rowcount == 0:
                cur = await conn.execute(
                    f"SELECT entries FROM {self._t} WHERE session_id = %s AND run_id = %s",
                    (session_id, rid),
                )
                row = await cur.fetchone()
                _rows.check_reappend(session_id, rid, row[0] if row else None, encoded)

        await self._db.run(insert)
        return run_id

    async def clear(self, session_id: str) -> None:
        """Delete every segment of ``session_id``."""

        async def clear(conn: AsyncConnection[Any]) -> None:
            await conn.execute(f"DELETE FROM {self._t} WHERE session_id = %s", (session_id,))

        await self._db.run(clear)

    def lease(
        self, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``session_id`` for one run, across processes (see ``Session.lease``)."""
        return self._hold(session_id, wait=wait, timeout=timeout)

    async def trim_tool_results(
        self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1
    ) -> int:
        """Cut stored tool outputs to ``keep_chars`` in all but the last ``keep_runs`` runs.

        Returns how many results were trimmed. Idempotent; pairing and ``is_error`` are
        kept; one transaction, rolled back on any error. ``UserError`` for negative args.
        """
        _maintenance.check_trim_args(keep_chars, keep_runs)

        async def trim(conn: AsyncConnection[Any]) -> int:
            rows = await self._select(conn, session_id, for_update=True)
            updates, trimmed = _maintenance.trim_rows(rows, keep_chars, keep_runs)
            for update in updates:
                await conn.execute(
                    f"UPDATE {self._t} SET entries = %s, version = %s WHERE id = %s", update
                )
            return trimmed

        return await self._db.run(trim)

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of the history; returns how many went.

        Later runs are deleted; the run the cut lands in is truncated tool-consistently and
        loses its ``meta``. ``0`` empties the session; a cut past the end is a no-op.
        """
        _maintenance.check_rewind_args(keep_entries)

        async def rewind(conn: AsyncConnection[Any]) -> int:
            rows = await self._select(conn, session_id, for_update=True)
            truncate, gone, removed = _maintenance.rewind_rows(rows, keep_entries)
            if truncate is not None:
                await conn.execute(
                    f"UPDATE {self._t} SET entries = %s, meta = '{{}}', version = %s WHERE id = %s",
                    truncate,
                )
            if gone:
                await conn.execute(f"DELETE FROM {self._t} WHERE id = ANY(%s)", (gone,))
            return removed

        return await self._db.run(rewind)

    async def _select(
        self, conn: AsyncConnection[Any], session_id: str, *, for_update: bool = False
    ) -> list[_rows.SessionRow]:
        lock = " FOR UPDATE" if for_update else ""
        cur = await conn.execute(
            f"SELECT id, run_id, entries, meta, version FROM {self._t}"
            f" WHERE session_id = %s ORDER BY id{lock}",
            (session_id,),
        )
        rows: list[_rows.SessionRow] = await cur.fetchall()
        return rows

    @asynccontextmanager
    async def _hold(
        self, session_id: str, *, wait: bool, timeout: float | None
    ) -> AsyncIterator[None]:
        check_lease_args(session_id, timeout)
        key = f"lovia.session:{self._db.schema or ''}:{session_id}"
        backoff = Backoff(timeout)
        # A waiter gives its connection back between attempts: were it kept, waiters could
        # drain the pool and the holder could no longer append, a deadlock.
        while (conn := await self._try_lease(key)) is None:
            if not wait or not await backoff.wait():
                raise busy(session_id, waited=timeout if wait else None)
        try:
            # The run's own errors pass through untranslated: only our SQL is ours.
            yield
        finally:
            await self._release(conn)

    async def _try_lease(self, key: str) -> AsyncConnection[Any] | None:
        """A pooled connection now holding the advisory lock ``key``, or ``None`` if busy."""
        conn = await self._db.getconn()
        try:
            locked = await _try_lock(conn, key)
        except BaseException:
            await self._release(conn)  # the server may have granted it before the error
            raise
        if locked:
            return conn
        await self._db.putconn(conn)
        return None

    async def _release(self, conn: AsyncConnection[Any]) -> None:
        try:
            await _unlock_or_discard(conn)
        finally:
            await self._db.putconn(conn)


class PostgresCheckpointer:
    """A ``Checkpointer`` in PostgreSQL; arguments as for ``PostgresSession``."""

    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        *,
        schema: str | None = None,
        max_connections: int = 10,
    ) -> None:
        self._db = PostgresDatabase(dsn_or_pool, schema=schema, max_size=max_connections)
        self._turns = self._db.prefix + "snapshot_turns"
        self._heads = self._db.prefix + "snapshot_heads"

    async def __aenter__(self) -> PostgresCheckpointer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool if this store opened it."""
        await self._db.close()

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Add ``entries`` (no row when empty) and replace the head, in one transaction."""
        encoded, encoded_head = _rows.encode_checkpoint(run_id, entries, head)

        async def append(conn: AsyncConnection[Any]) -> None:
            if encoded is not None:
                await conn.execute(
                    f"INSERT INTO {self._turns} (run_id, entries, version) VALUES (%s, %s, %s)",
                    (run_id, encoded, _rows.ROW_VERSION),
                )
            await conn.execute(
                f"INSERT INTO {self._heads} (run_id, head, version, updated_at)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET"
                " head = excluded.head, version = excluded.version,"
                " updated_at = excluded.updated_at",
                (run_id, encoded_head, _rows.ROW_VERSION, head.updated_at),
            )

        await self._db.run(append)

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of ``run_id``, or ``None``; ``StoreError`` names an unreadable row."""

        async def select(conn: AsyncConnection[Any]) -> tuple[Any, list[Any]]:
            # REPEATABLE READ is not needed: the head and its turns are written in one
            # transaction, and turns are only ever added, so a head read first never
            # describes more entries than the turn query that follows returns.
            cur = await conn.execute(
                f"SELECT head, version FROM {self._heads} WHERE run_id = %s", (run_id,)
            )
            head = await cur.fetchone()
            cur = await conn.execute(
                f"SELECT id, entries, version FROM {self._turns} WHERE run_id = %s ORDER BY id",
                (run_id,),
            )
            return head, await cur.fetchall()

        head_row, turns = await self._db.run(select)
        return _rows.build_snapshot(run_id, head_row, turns)

    async def delete(self, run_id: str) -> None:
        """Forget ``run_id`` (idempotent)."""

        async def delete(conn: AsyncConnection[Any]) -> None:
            await conn.execute(f"DELETE FROM {self._turns} WHERE run_id = %s", (run_id,))
            await conn.execute(f"DELETE FROM {self._heads} WHERE run_id = %s", (run_id,))

        await self._db.run(delete)


async def _try_lock(conn: AsyncConnection[Any], key: str) -> bool:
    async with translated(), conn.transaction():
        cur = await conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,))
        row = await cur.fetchone()
    return bool(row and row[0])


async def _unlock_or_discard(conn: AsyncConnection[Any]) -> None:
    """Release every session-level advisory lock of ``conn``.

    A connection that cannot is closed instead, so a lock never travels back into the pool
    with it (the server drops its locks with the connection). A failed unlock is logged,
    not raised: it must not replace the outcome of the run that held the lease.
    """
    import psycopg

    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_unlock_all()")
    except psycopg.Error:
        logger.warning("releasing a session lease failed; closing its connection", exc_info=True)
        await _close_quietly(conn)
    except BaseException:  # cancelled mid-release: closing still frees the lock
        await _close_quietly(conn)
        raise


async def _close_quietly(conn: AsyncConnection[Any]) -> None:
    import psycopg

    try:
        await conn.close()
    except psycopg.Error:
        # Closing is already the fallback; the server releases locks with the connection.
        logger.debug("closing a lease connection failed", exc_info=True)


@overload
def from_url(url: str, *, kind: Literal["session"]) -> Session: ...
@overload
def from_url(url: str, *, kind: Literal["checkpointer"]) -> Checkpointer: ...
def from_url(url: str, *, kind: Literal["session", "checkpointer"]) -> Session | Checkpointer:
    """A PostgreSQL store from ``postgresql://user@host/db?schema=name`` (the ``lovia.stores``
    entry point); ``schema`` is lovia's, every other query parameter goes to libpq."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in reversed(query) if k == "schema"), None) or None
    dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
    if kind == "session":
        return PostgresSession(dsn, schema=schema)
    return PostgresCheckpointer(dsn, schema=schema)
