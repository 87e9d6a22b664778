"""Result stores: where offloaded tool outputs are archived, keyed by content digest.

``ResultStore`` is two synchronous methods; the policy and ``recall_tool_result`` call
them off the event loop (``asyncio.to_thread``). Keys are content digests, so one store can
be shared across sessions (call ids are session-local; digests cannot collide across
sessions and identical outputs dedupe for free).
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from .tokens import check_count

__all__ = ["FileResultStore", "InMemoryResultStore", "ResultStore"]


class ResultStore(Protocol):
    """Archive for full tool outputs: ``put(key, content)`` and ``get(key) -> str | None``."""

    def put(self, key: str, content: str) -> None: ...

    def get(self, key: str) -> str | None: ...


class InMemoryResultStore:
    """A bounded LRU in process memory.

    ``max_entries``: capacity (``get`` refreshes recency); ``None`` means unbounded.
    Raises ``ContextConfigError`` (a ``ValueError``) for a non-positive or non-int size.
    """

    def __init__(self, max_entries: int | None = 1_024) -> None:
        if max_entries is not None:
            check_count("max_entries", max_entries, minimum=1)
        self.max_entries = max_entries
        self._items: OrderedDict[str, str] = OrderedDict()

    def put(self, key: str, content: str) -> None:
        """Store ``content`` under ``key`` (evicting the least recently used entry)."""
        self._items[key] = content
        self._items.move_to_end(key)
        if self.max_entries is not None:
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def get(self, key: str) -> str | None:
        """The content for ``key``, or ``None``."""
        content = self._items.get(key)
        if content is not None:
            self._items.move_to_end(key)
        return content

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"InMemoryResultStore(max_entries={self.max_entries!r})"


_SAFE_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")


class FileResultStore:
    """One UTF-8 file per result under ``directory`` (created on first write).

    Writes are atomic (a temp file in the same directory, then a rename; the temp file is
    removed on failure). Keys map to file names injectively: a plain key (letters, digits,
    ``_``, ``-``) keeps its name, anything else is hex-encoded under a different prefix.
    There is no eviction: retention is the owner's.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, key: str) -> Path:
        """The file that holds ``key``."""
        if _SAFE_KEY.fullmatch(key):
            name = f"k-{key}.txt"
        else:
            name = f"x-{key.encode('utf-8', 'surrogatepass').hex()}.txt"
        return self.directory / name

    def put(self, key: str, content: str) -> None:
        """Write ``content`` atomically."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass", newline="") as fh:
                fh.write(content)
            os.replace(tmp, self.path_for(key))
        except BaseException:
            # Clean up and re-raise: no temp file survives a failed write.
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> str | None:
        """The content for ``key``, or ``None`` when absent."""
        try:
            # newline="" keeps the content byte-exact (no newline translation).
            with open(
                self.path_for(key), encoding="utf-8", errors="surrogatepass", newline=""
            ) as fh:
                return fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                return None  # no such key could ever have been stored
            raise

    def __repr__(self) -> str:
        return f"FileResultStore({str(self.directory)!r})"
