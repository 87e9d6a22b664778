"""SQLite stores: ``SQLiteSession`` and ``SQLiteCheckpointer`` (stdlib ``sqlite3`` only).

Tables (one file can hold both stores):

* ``session_runs``: one row per run, ``UNIQUE(session_id, run_id)``; an append is an
  ``INSERT ... ON CONFLICT DO NOTHING``, and when the row already exists its entries are
  compared so a differing re-append raises ``StoreError``. ``load`` orders by the
  autoincrement ``id`` (insertion order); a stored row is never rewritten except by explicit
  maintenance.
* ``snapshot_turns`` (one row per non-empty checkpoint append) and ``snapshot_heads`` (one
  row per run, replaced on every append), written together in one transaction.
* ``session_leases`` and ``run_leases``: one row per held lease, with an owner and an expiry
  the holder renews (see ``_sqlite_db``).

The behaviour is ``_sql``'s, shared with PostgreSQL; every row carries a schema version
(see ``_rows`` for how unreadable rows are reported).
"""

from __future__ import annotations

import os
from typing import Literal, overload
from urllib.parse import unquote, urlsplit

from ..checkpointer import Checkpointer
from ..exceptions import UserError
from ..session import Session
from ._sql import SQLCheckpointer, SQLSession, SQLStore
from ._sqlite_db import LeaseRows, SQLiteDatabase
from ._url import query_params

__all__ = ["SQLiteCheckpointer", "SQLiteSession", "from_url", "parse_url"]


class _SQLiteStore(SQLStore):
    def __init__(
        self, path: str | os.PathLike[str], *, wal: bool = False, lease_ttl: float = 30.0
    ) -> None:
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, (int, float)) or lease_ttl <= 0:
            raise UserError(
                f"lease_ttl must be > 0 seconds, got {lease_ttl!r}",
                hint="the default of 30 s suits most runs; the holder renews it while running",
            )
        db = SQLiteDatabase(path, wal=wal)
        super().__init__(db, LeaseRows(db, self.lease_kind, lease_ttl))


class SQLiteSession(_SQLiteStore, SQLSession):
    """A ``Session`` in an SQLite file, safe to share between processes.

    ``path`` is a file path (its folder must exist) or ``":memory:"`` (one private
    database per instance). ``wal=True`` turns on WAL mode (readers never block the writer;
    faster commits). ``lease_ttl`` is how long, in seconds, a lease outlives a holder that
    stopped renewing it (a crashed process on another host); the holder renews it every
    ``lease_ttl / 3``. Close with ``await store.aclose()`` or use ``async with``.
    """


class SQLiteCheckpointer(_SQLiteStore, SQLCheckpointer):
    """A ``Checkpointer`` in an SQLite file, safe to share between processes.

    Arguments as for ``SQLiteSession``; ``wal=True`` is recommended (a checkpoint then
    costs well under a millisecond), and ``lease_ttl`` applies to the run-id lease.
    """


@overload
def from_url(url: str, *, kind: Literal["session"]) -> Session: ...
@overload
def from_url(url: str, *, kind: Literal["checkpointer"]) -> Checkpointer: ...
def from_url(url: str, *, kind: Literal["session", "checkpointer"]) -> Session | Checkpointer:
    """An SQLite store from ``sqlite:///abs/path.db``, ``sqlite://rel/path.db`` or
    ``sqlite://:memory:``; ``?wal=1`` turns on WAL (the ``lovia.stores`` entry point).
    ``UserError`` for any other query parameter."""
    path, wal = parse_url(url)
    if kind == "session":
        return SQLiteSession(path, wal=bool(wal))
    return SQLiteCheckpointer(path, wal=bool(wal))


def parse_url(url: str) -> tuple[str, bool | None]:
    """The database path of an ``sqlite://`` URL and its ``wal`` parameter (``None`` when
    the URL does not set it); ``UserError`` for a URL without a path or with any other
    query parameter."""
    parts = urlsplit(url)
    params = query_params(url, parts.query, valid=("wal",))
    path = unquote(parts.netloc + parts.path)
    if not path:
        raise UserError(
            f"no database path in {url!r}",
            hint="use sqlite:///absolute/path.db or sqlite://:memory:",
        )
    if path == "/:memory:":
        path = ":memory:"
    if "wal" not in params:
        return path, None
    return path, params["wal"].lower() in ("1", "true", "yes", "on")
