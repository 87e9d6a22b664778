"""The SQL stores, once for SQLite and PostgreSQL: statements, scripts and the store classes.

Why it looks like this:

* The two databases differ in their driver, not their logic: sqlite3 blocks (a whole
  transaction runs in a worker thread) while psycopg is async. So every operation is a
  *script*, a generator that yields ``(sql, params)`` and is sent each statement's
  ``Result``; ``SQLiteDatabase`` drives it synchronously in its thread, ``PostgresDatabase``
  awaits each statement. Both run one script as one transaction, rolled back if it raises.
* ``Statements`` holds the SQL in one dialect: ``?`` placeholders become the driver's, the
  tables get the schema prefix, and the read-modify-write of maintenance locks its rows
  where the dialect can (``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already excludes).
* ``SQLSession`` and ``SQLCheckpointer`` are the stores' behaviour; the public classes in
  ``sqlite.py`` and ``postgres.py`` only build their database and their lease backend.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Literal, NamedTuple, Protocol, TypeVar

from ..checkpointer import RunHead, RunSnapshot
from ..session import Segment
from ..transcript import TranscriptEntry
from . import _maintenance, _rows
from ._lease import LeaseBackend, LeaseKind, Leases

T = TypeVar("T")
S = TypeVar("S", bound="SQLStore")


class Result(NamedTuple):
    """What one statement gave back: the affected row count and the rows it returned."""

    rowcount: int
    rows: list[Any]


Dialect = Literal["sqlite", "postgresql"]
"""The SQL dialects the stores speak."""

Query = tuple[str, tuple[Any, ...]]
Script = Generator[Query, Result, T]
"""One transaction's statements: yields each query, is sent its result, returns a value."""


def statement(sql: str, *params: Any) -> Script[None]:
    """A script of one statement."""
    yield sql, params


class Statements:
    """The stores' SQL in one dialect and schema."""

    def __init__(
        self,
        *,
        prefix: str = "",
        placeholder: str = "?",
        for_update: str = "",
        dialect: Dialect = "sqlite",
    ) -> None:
        self.prefix = prefix
        self.placeholder = placeholder
        self.for_update = for_update
        self.dialect: Dialect = dialect
        sql = self.render

        runs = "SELECT id, run_id, entries, meta, version FROM {t}session_runs"
        self.select_runs = sql(runs + " WHERE session_id = ? ORDER BY id")
        self.select_runs_to_change = self.select_runs + for_update
        self.select_run_entries = sql(
            "SELECT entries FROM {t}session_runs WHERE session_id = ? AND run_id = ?"
        )
        self.insert_run = sql(
            "INSERT INTO {t}session_runs (session_id, run_id, entries, meta, version, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, run_id) DO NOTHING"
        )
        self.delete_session = sql("DELETE FROM {t}session_runs WHERE session_id = ?")
        self.update_entries = sql(
            "UPDATE {t}session_runs SET entries = ?, version = ? WHERE id = ?"
        )
        self.truncate_run = sql(
            "UPDATE {t}session_runs SET entries = ?, meta = '{}', version = ? WHERE id = ?"
        )
        self.delete_run = sql("DELETE FROM {t}session_runs WHERE id = ?")
        self.insert_turn = sql(
            "INSERT INTO {t}snapshot_turns (run_id, entries, version) VALUES (?, ?, ?)"
        )
        self.upsert_head = sql(
            "INSERT INTO {t}snapshot_heads (run_id, head, version, updated_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
            " head = excluded.head, version = excluded.version, updated_at = excluded.updated_at"
        )
        self.select_head = sql("SELECT head, version FROM {t}snapshot_heads WHERE run_id = ?")
        self.select_turns = sql(
            "SELECT id, entries, version FROM {t}snapshot_turns WHERE run_id = ? ORDER BY id"
        )
        self.delete_turns = sql("DELETE FROM {t}snapshot_turns WHERE run_id = ?")
        self.delete_head = sql("DELETE FROM {t}snapshot_heads WHERE run_id = ?")

    def render(self, text: str) -> str:
        """``text`` (``{t}`` before each table, ``?`` placeholders) in this dialect and schema."""
        return text.replace("{t}", self.prefix).replace("?", self.placeholder)


class Database(Protocol):
    """One database as the stores use it (``SQLiteDatabase``, ``PostgresDatabase``)."""

    sql: Statements

    async def read(self, script: Script[T]) -> T:
        """Run ``script`` in one read transaction."""
        ...

    async def write(self, script: Script[T]) -> T:
        """Run ``script`` in one write transaction (rolled back if it raises)."""
        ...

    async def close(self) -> None:
        """Close the connections the store opened (idempotent)."""
        ...


class SQLStore:
    """What every SQL store has: its database, its leases, and closing."""

    lease_kind: ClassVar[LeaseKind]

    def __init__(self, db: Database, lease_backend: LeaseBackend) -> None:
        self._db = db
        self._sql = db.sql
        self._leases = Leases(self.lease_kind, lease_backend)

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the store's connections (idempotent); a borrowed pool stays open."""
        await self._db.close()


class SQLSession(SQLStore):
    """A ``Session`` in an SQL database (see ``lovia.session.Session``)."""

    lease_kind = "session"

    async def segments(self, session_id: str) -> list[Segment]:
        """Every segment of ``session_id`` in insertion order."""
        return _rows.decode_segments(await self._db.read(self._select(session_id)))

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat history of ``session_id``."""
        return _rows.decode_history(await self._db.read(self._select(session_id)))

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
        await self._db.write(self._insert(session_id, run_id, encoded, encoded_meta))
        return run_id

    async def clear(self, session_id: str) -> None:
        """Delete every segment of ``session_id``."""
        _rows.check_session_id(session_id)
        await self._db.write(statement(self._sql.delete_session, session_id))

    def lease(
        self, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``session_id`` for one run, across processes (see ``Session.lease``)."""
        return self._leases.hold(session_id, wait=wait, timeout=timeout)

    async def trim_tool_results(
        self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1
    ) -> int:
        """Cut stored tool outputs to ``keep_chars`` in all but the last ``keep_runs`` runs.

        Returns how many results were trimmed. Idempotent; pairing and ``is_error`` are
        kept; one transaction, rolled back on any error. ``UserError`` for negative args.
        """
        _maintenance.check_trim_args(keep_chars, keep_runs)
        return await self._db.write(self._trim(session_id, keep_chars, keep_runs))

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of the history; returns how many went.

        Later runs are deleted; the run the cut lands in is truncated tool-consistently and
        loses its ``meta``. ``0`` empties the session; a cut past the end is a no-op.
        """
        _maintenance.check_rewind_args(keep_entries)
        return await self._db.write(self._rewind(session_id, keep_entries))

    # -- scripts ----------------------------------------------------------------------

    def _select(self, session_id: str, *, to_change: bool = False) -> Script[list[Any]]:
        _rows.check_session_id(session_id)
        q = self._sql
        found = yield (q.select_runs_to_change if to_change else q.select_runs), (session_id,)
        return found.rows

    def _insert(self, session_id: str, run_id: str, encoded: str, meta: str) -> Script[None]:
        q = self._sql
        row = (session_id, run_id, encoded, meta, _rows.ROW_VERSION, time.time())
        inserted = yield q.insert_run, row
        if inserted.rowcount == 0:  # the run is stored: only the same entries are accepted
            found = yield q.select_run_entries, (session_id, run_id)
            stored = found.rows[0][0] if found.rows else None
            _rows.check_reappend(session_id, run_id, stored, encoded)

    def _trim(self, session_id: str, keep_chars: int, keep_runs: int) -> Script[int]:
        rows = yield from self._select(session_id, to_change=True)
        updates, trimmed = _maintenance.trim_rows(rows, keep_chars, keep_runs)
        for update in updates:
            yield self._sql.update_entries, update
        return trimmed

    def _rewind(self, session_id: str, keep_entries: int) -> Script[int]:
        rows = yield from self._select(session_id, to_change=True)
        truncate, gone, removed = _maintenance.rewind_rows(rows, keep_entries)
        if truncate is not None:
            yield self._sql.truncate_run, truncate
        for row_id in gone:
            yield self._sql.delete_run, (row_id,)
        return removed


class SQLCheckpointer(SQLStore):
    """A ``Checkpointer`` in an SQL database (see ``lovia.checkpointer.Checkpointer``)."""

    lease_kind = "run"

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Add ``entries`` (no row when empty) and replace the head, in one transaction."""
        encoded, encoded_head = _rows.encode_checkpoint(run_id, entries, head)
        await self._db.write(self._append(run_id, encoded, encoded_head, head.updated_at))

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of ``run_id``, or ``None``; ``StoreError`` names an unreadable row."""
        _rows.check_run_id(run_id)
        head_row, turns = await self._db.read(self._select(run_id))
        return _rows.build_snapshot(run_id, head_row, turns)

    async def delete(self, run_id: str) -> None:
        """Forget ``run_id`` (idempotent)."""
        _rows.check_run_id(run_id)
        await self._db.write(self._delete(run_id))

    def lease(
        self, run_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``run_id`` for one run, across processes (see ``Checkpointer``): a second
        run with this id waits, or fails with ``RunBusyError``."""
        return self._leases.hold(run_id, wait=wait, timeout=timeout)

    # -- scripts ----------------------------------------------------------------------

    def _append(
        self, run_id: str, encoded: str | None, head: str, updated_at: float
    ) -> Script[None]:
        if encoded is not None:
            yield self._sql.insert_turn, (run_id, encoded, _rows.ROW_VERSION)
        yield self._sql.upsert_head, (run_id, head, _rows.ROW_VERSION, updated_at)

    def _select(self, run_id: str) -> Script[tuple[Any, list[Any]]]:
        # The head and its turns are written in one transaction and turns are only ever
        # added, so a head read first never describes more entries than the turns after it.
        head = yield self._sql.select_head, (run_id,)
        turns = yield self._sql.select_turns, (run_id,)
        return (head.rows[0] if head.rows else None), turns.rows

    def _delete(self, run_id: str) -> Script[None]:
        yield self._sql.delete_turns, (run_id,)
        yield self._sql.delete_head, (run_id,)
