"""Opening a SQLite file and running one transaction on it, as every lovia SQLite store does.

The core stores, the memory archive (lovia-plugins) and the chat store (lovia-web) each keep
one connection per store, used from worker threads under a lock; these two functions are
what they share, so each gets the same rules:

* autocommit mode (``isolation_level=None``) with explicit transactions, so a
  read-modify-write is exactly one transaction and an error rolls it back;
* writers open ``BEGIN IMMEDIATE``, so two processes writing at once wait on the busy
  timeout instead of failing half-way (a deferred transaction that upgrades cannot wait);
* ``PRAGMA journal_mode=WAL`` is retried within the busy timeout: SQLite answers it with
  "database is locked" at once, without its busy handler, while another connection converts
  the same new file;
* the schema statements run once per connection, in one write transaction.

Errors are left as ``sqlite3.Error``: each store translates them at its own seam.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["BUSY_TIMEOUT_SECONDS", "open_sqlite", "run_transaction"]

T = TypeVar("T")

BUSY_TIMEOUT_SECONDS = 30.0
"""How long a statement waits for another connection's lock before failing."""

_log = logging.getLogger("lovia.stores")


def open_sqlite(
    path: str,
    *,
    wal: bool,
    schema: Iterable[str] = (),
    setup: Callable[[sqlite3.Connection], None] | None = None,
    busy_timeout: float = BUSY_TIMEOUT_SECONDS,
) -> sqlite3.Connection:
    """A connection to ``path`` for use from worker threads, with ``schema`` created.

    ``wal=True`` switches the file to WAL with ``synchronous=NORMAL`` (survives process
    crashes; only a power loss may drop the last commits). ``setup(conn)`` runs after the
    schema statements, in the same transaction. ``busy_timeout`` (seconds) bounds every wait
    for another connection's lock, the switch to WAL included.
    """
    conn = sqlite3.connect(
        path,
        timeout=busy_timeout,
        isolation_level=None,
        check_same_thread=False,  # the caller serialises use with its own lock
    )
    try:
        if wal and path != ":memory:":
            _switch_to_wal(conn, path, busy_timeout)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        conn.execute("BEGIN IMMEDIATE")
        for statement in schema:
            conn.execute(statement)
        if setup is not None:
            setup(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        raise
    return conn


def run_transaction(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], *, write: bool
) -> T:
    """``fn(conn)`` in one transaction (``BEGIN IMMEDIATE`` when ``write``), rolled back if
    it raises. The caller holds the connection's lock."""
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        result = fn(conn)
    except BaseException:
        if conn.in_transaction:  # SQLite may already have rolled back itself
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def _switch_to_wal(conn: sqlite3.Connection, path: str, busy_timeout: float) -> None:
    """``PRAGMA journal_mode=WAL``, retried while the file is locked, up to the busy timeout."""
    deadline = time.monotonic() + busy_timeout
    delay = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + delay > deadline:
                raise
            _log.debug("switching %r to WAL: the file is locked; retrying", path)
        time.sleep(delay)  # in the store's worker thread, never on the event loop
        delay = min(delay * 2, 0.05)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    return code == 5 if code is not None else "locked" in str(exc)  # 5: SQLITE_BUSY
