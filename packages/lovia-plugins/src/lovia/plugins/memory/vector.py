"""The ``Embedder`` seam and ``VectorIndex``, a stdlib cosine-similarity index in SQLite.

Vectors are only comparable when one embedder made them, so the table remembers the
embedder's ``id``: opening it with a different embedder wipes the vectors, which then
re-accumulate as documents are added again. Search is a linear scan, fine for a personal
archive (tens of thousands of docs); an empty query or an empty index costs no embedding
call, and an all-zero vector simply scores 0.
"""

from __future__ import annotations

import array
import json
import math
import os
import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ._db import ArchiveDB, storable
from .index import Doc, Fusable, Hit, _doc_of

__all__ = ["Embedder", "VectorIndex"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors, one per text, in order."""

    @property
    def id(self) -> str:
        """Names the model (and dimensions): vectors from different ids never mix."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def _pack(vector: Sequence[float]) -> bytes:
    return array.array("f", vector).tobytes()


def _unpack(blob: bytes) -> array.array[float]:
    out = array.array("f")
    out.frombytes(blob)
    return out


def _cosine(a: Sequence[float], b: Sequence[float], b_norm: float) -> float:
    a_norm = math.sqrt(math.fsum(x * x for x in a))
    if a_norm == 0.0 or b_norm == 0.0:
        return 0.0
    return math.fsum(
        x * y for x, y in zip(a, b, strict=False)
    )  # a stale vector of another width scores low, never raises / (a_norm * b_norm)


class VectorIndex(Fusable):
    """Semantic search over embeddings kept in a SQLite file."""

    def __init__(self, path: str | os.PathLike[str], embedder: Embedder) -> None:
        self.embedder = embedder
        self.db = ArchiveDB(path, self._setup)

    def __repr__(self) -> str:
        return f"VectorIndex({str(self.db.path)!r}, {self.embedder.id!r})"

    def _setup(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memory_vectors (id TEXT PRIMARY KEY, text TEXT NOT NULL,"
            " meta TEXT NOT NULL, when_ TEXT, norm REAL NOT NULL, vector BLOB NOT NULL)"
        )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memory_vector_meta (key TEXT PRIMARY KEY, value TEXT)"
        )
        row = conn.execute("SELECT value FROM memory_vector_meta WHERE key = 'embedder'").fetchone()
        if row is None or row[0] != self.embedder.id:
            conn.execute("DELETE FROM memory_vectors")
            conn.execute(
                "INSERT OR REPLACE INTO memory_vector_meta (key, value) VALUES ('embedder', ?)",
                (self.embedder.id,),
            )

    async def add(self, docs: Sequence[Doc]) -> None:
        if not docs:
            return
        vectors = await self.embedder.embed([d.text for d in docs])
        rows = [
            (
                d.id,
                storable(d.text),
                storable(json.dumps(d.meta, ensure_ascii=False)),
                d.when,
                math.sqrt(math.fsum(x * x for x in v)),
                _pack(v),
            )
            for d, v in zip(docs, vectors, strict=True)
        ]
        await self.db.write(
            lambda conn: conn.executemany(
                "INSERT OR REPLACE INTO memory_vectors VALUES (?, ?, ?, ?, ?, ?)", rows
            )
        )

    async def remove(self, ids: Sequence[str]) -> None:
        if ids:
            await self.db.write(
                lambda conn: conn.executemany(
                    "DELETE FROM memory_vectors WHERE id = ?", [(i,) for i in ids]
                )
            )

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        if not query.strip() or k <= 0:
            return []
        count = await self.db.read(
            lambda conn: conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0]
        )
        if not count:
            return []
        (vector,) = await self.embedder.embed([query])
        return await self.db.read(lambda conn: _scan(conn, vector, k))

    def close(self) -> None:
        self.db.close()


def _scan(conn: sqlite3.Connection, query: Sequence[float], k: int) -> list[Hit]:
    scored: list[tuple[float, Any]] = []
    for row in conn.execute("SELECT id, text, meta, when_, norm, vector FROM memory_vectors"):
        scored.append((_cosine(query, _unpack(row[5]), row[4]), row))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    return [Hit(_doc_of(r), score) for score, r in scored[:k]]
