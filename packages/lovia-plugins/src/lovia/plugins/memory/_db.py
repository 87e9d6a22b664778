"""One SQLite file shared by the archive's indexes: a lazily opened connection used from
worker threads one at a time, writes in ``BEGIN IMMEDIATE`` transactions (so processes
sharing the file queue on SQLite's busy timeout instead of failing), and every SQLite
failure translated into ``ArchiveError``."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from lovia.exceptions import StoreError
from lovia.stores.sqlite_file import open_sqlite, run_transaction

__all__ = ["ArchiveDB", "ArchiveError", "storable"]

_T = TypeVar("_T")
_BUSY_TIMEOUT_SECONDS = 30.0
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with lone surrogates (half an escaped emoji, say) as U+FFFD.

    A Python string may hold them, but neither a UTF-8 file nor SQLite can.
    """
    return _SURROGATE.sub("\ufffd", text)


class ArchiveError(StoreError):
    """The memory archive (``archive.db``) is unreadable or a write to it failed."""


def _hint(exc: sqlite3.Error) -> str:
    """Only a damaged file is worth moving aside; a busy one just needs its writer to end."""
    message = str(exc).lower()
    if "locked" in message or "busy" in message:
        return (
            f"another process held the archive for over {_BUSY_TIMEOUT_SECONDS:g} s; "
            "retry once its write ends (the file is not damaged)"
        )
    if isinstance(exc, sqlite3.OperationalError) and "malformed" not in message:
        return "check the disk and the file's permissions (the notes in MEMORY.md are not affected)"
    return (
        "if the file is corrupt, move it aside; a new one is created "
        "(the notes in MEMORY.md are not affected)"
    )


class ArchiveDB:
    """A SQLite file; ``read``/``write`` run a function with the connection off-loop."""

    def __init__(
        self, path: str | os.PathLike[str], setup: Callable[[sqlite3.Connection], None]
    ) -> None:
        self.path = Path(path)
        self._setup = setup
        """Creates the schema; runs once per connection, inside a write transaction."""
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            if str(self.path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = open_sqlite(
                str(self.path), wal=False, setup=self._setup, busy_timeout=_BUSY_TIMEOUT_SECONDS
            )
            self._conn = conn
            # Indexes live as long as their plugin and have no aclose of their own: close
            # the connection when this object goes, so it is never left for the GC to flag.
            weakref.finalize(self, conn.close)
        return self._conn

    def call(self, fn: Callable[[sqlite3.Connection], _T], *, write: bool) -> _T:
        """Run ``fn(conn)`` now (blocking), in a transaction when ``write``."""
        with self._lock:
            try:
                conn = self._open()
                if not write:
                    return fn(conn)
                return run_transaction(conn, fn, write=True)
            except sqlite3.Error as exc:
                raise ArchiveError(
                    f"memory archive {self.path} failed: {exc}", hint=_hint(exc)
                ) from exc

    async def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        return await asyncio.to_thread(self.call, fn, write=False)

    async def write(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        return await asyncio.to_thread(self.call, fn, write=True)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
