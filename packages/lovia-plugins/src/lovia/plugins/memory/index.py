"""The cold tier's seam (``Index`` over plain ``Doc``s) and two implementations.

``KeywordIndex`` is SQLite FTS5 ranked by bm25. FTS5's tokenizer keeps a run of CJK
characters as one token, so a two-character word inside a sentence would never match; the
indexed text and the query therefore spell every CJK run as overlapping bigrams. When the
SQLite build lacks FTS5, the index falls back to ``LIKE`` matching (with ``%``, ``_`` and
``\\`` escaped) ranked by how many query terms a document contains.

``HybridIndex`` fuses several indexes with reciprocal-rank fusion (RRF): each arm ranks
independently and a document scores ``sum(1 / (k + rank))``. ``a | b`` builds one, and
fusing a hybrid keeps its ``k``. Reads fail open per arm and raise only when every arm
failed; writes go to every arm and then re-raise the first failure, so one broken arm
never leaves the others behind.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from lovia.exceptions import UserError

from ._db import ArchiveDB, storable

__all__ = ["Doc", "Fusable", "Hit", "HybridIndex", "Index", "KeywordIndex", "search_terms"]

_log = logging.getLogger("lovia.plugins.memory")

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_WORD = re.compile(r"\w+")
MAX_QUERY_TERMS = 64
"""A query searches its first terms only: SQLite caps an expression's depth (1,000), and a
pasted page of words would only dilute the ranking anyway."""


@dataclass(frozen=True, slots=True)
class Doc:
    """One archived document. Adding a doc with an existing ``id`` replaces it."""

    id: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    when: str | None = None
    """An ISO-8601 timestamp, when known."""


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the doc and its score (higher is better; scales differ per index)."""

    doc: Doc
    score: float


@runtime_checkable
class Index(Protocol):
    """Add (upsert by id), remove and search documents."""

    async def add(self, docs: Sequence[Doc]) -> None: ...

    async def remove(self, ids: Sequence[str]) -> None: ...

    async def search(self, query: str, k: int = 5) -> list[Hit]: ...


class Fusable:
    """Mixin: ``a | b`` is a ``HybridIndex`` over both."""

    def __or__(self, other: Index) -> HybridIndex:
        left = self.arms if isinstance(self, HybridIndex) else (self,)
        right = other.arms if isinstance(other, HybridIndex) else (other,)
        k = self.k if isinstance(self, HybridIndex) else _RRF_K
        return HybridIndex(*left, *right, k=k)


def _bigrams(run: str, *, indexing: bool) -> str:
    if len(run) == 1:
        return run
    grams = [run[i : i + 2] for i in range(len(run) - 1)]
    if indexing:
        # Every character starts a bigram but the last, so it is indexed alone too: a
        # one-character query (matched as a prefix) then finds any character of the run.
        grams.append(run[-1])
    return " ".join(grams)


def _spell_cjk(text: str, *, indexing: bool = False) -> str:
    return _CJK.sub(lambda m: f" {_bigrams(m.group(), indexing=indexing)} ", text)


def search_terms(query: str) -> list[str]:
    """The query's terms: words, and CJK runs as bigrams (a lone CJK character as itself)."""
    return list(dict.fromkeys(t.lower() for t in _WORD.findall(_spell_cjk(query))))


def _fts5_available(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp._fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp._fts5_probe")
    return True


_DOCS = (
    "CREATE TABLE IF NOT EXISTS memory_docs ("
    "rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, "
    "meta TEXT NOT NULL, when_ TEXT)"
)


def _doc_of(row: Sequence[Any]) -> Doc:
    return Doc(row[0], row[1], json.loads(row[2]), row[3])


class KeywordIndex(Fusable):
    """A lexical index in one SQLite file (FTS5 bm25, or ``LIKE`` without FTS5)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.fts = True
        self.db = ArchiveDB(path, self._setup)

    def __repr__(self) -> str:
        return f"KeywordIndex({str(self.db.path)!r})"

    def _setup(self, conn: sqlite3.Connection) -> None:
        conn.execute(_DOCS)
        self.fts = _fts5_available(conn)
        if self.fts:
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts "
                "USING fts5(body, tokenize='porter unicode61')"
            )

    async def add(self, docs: Sequence[Doc]) -> None:
        if docs:
            await self.db.write(lambda conn: self._add(conn, docs))

    def _add(self, conn: sqlite3.Connection, docs: Sequence[Doc]) -> None:
        for doc in docs:
            text, meta = storable(doc.text), storable(json.dumps(doc.meta, ensure_ascii=False))
            row = conn.execute("SELECT rowid FROM memory_docs WHERE id = ?", (doc.id,)).fetchone()
            if row is None:
                cur = conn.execute(
                    "INSERT INTO memory_docs (id, text, meta, when_) VALUES (?, ?, ?, ?)",
                    (doc.id, text, meta, doc.when),
                )
                rowid = cur.lastrowid
            else:
                rowid = row[0]
                conn.execute(
                    "UPDATE memory_docs SET text = ?, meta = ?, when_ = ? WHERE rowid = ?",
                    (text, meta, doc.when, rowid),
                )
                if self.fts:
                    conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (rowid,))
            if self.fts:
                conn.execute(
                    "INSERT INTO memory_fts (rowid, body) VALUES (?, ?)",
                    (rowid, _spell_cjk(text, indexing=True)),
                )

    async def remove(self, ids: Sequence[str]) -> None:
        if ids:
            await self.db.write(lambda conn: self._remove(conn, ids))

    def _remove(self, conn: sqlite3.Connection, ids: Sequence[str]) -> None:
        for doc_id in ids:
            row = conn.execute("SELECT rowid FROM memory_docs WHERE id = ?", (doc_id,)).fetchone()
            if row is not None:
                if self.fts:
                    conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
                conn.execute("DELETE FROM memory_docs WHERE rowid = ?", (row[0],))

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        terms = search_terms(query)[:MAX_QUERY_TERMS]
        if not terms or k <= 0:
            return []
        return await self.db.read(lambda conn: self._search(conn, terms, k))

    def _search(self, conn: sqlite3.Connection, terms: list[str], k: int) -> list[Hit]:
        if self.fts:
            # A lone CJK character matches as a prefix of the bigrams that start with it.
            match = " OR ".join(
                f'"{t}"*' if _CJK.fullmatch(t) and len(t) == 1 else f'"{t}"' for t in terms
            )
            rows = conn.execute(
                "SELECT d.id, d.text, d.meta, d.when_, bm25(memory_fts) FROM memory_fts "
                "JOIN memory_docs d ON d.rowid = memory_fts.rowid "
                "WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts) LIMIT ?",
                (match, k),
            ).fetchall()
            return [Hit(_doc_of(r), -float(r[4])) for r in rows]
        cases = " + ".join("(text LIKE ? ESCAPE '\\')" for _ in terms)
        rows = conn.execute(
            f"SELECT id, text, meta, when_, {cases} AS score FROM memory_docs "
            "WHERE score > 0 ORDER BY score DESC, rowid DESC LIMIT ?",
            (*(f"%{_escape_like(t)}%" for t in terms), k),
        ).fetchall()
        return [Hit(_doc_of(r), float(r[4])) for r in rows]

    def close(self) -> None:
        self.db.close()


def _escape_like(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_RRF_K = 60


class HybridIndex(Fusable):
    """Reciprocal-rank fusion over several indexes (at least one)."""

    def __init__(self, *arms: Index, k: int = _RRF_K) -> None:
        if not arms:
            raise UserError("HybridIndex needs at least one index", hint="e.g. keyword | vector")
        self.arms: tuple[Index, ...] = arms
        self.k = k

    def __repr__(self) -> str:
        return " | ".join(repr(a) for a in self.arms)

    async def add(self, docs: Sequence[Doc]) -> None:
        await self._broadcast("add", docs)

    async def remove(self, ids: Sequence[str]) -> None:
        await self._broadcast("remove", ids)

    async def _broadcast(self, method: str, items: Sequence[Any]) -> None:
        first: Exception | None = None
        for arm in self.arms:
            try:
                await getattr(arm, method)(items)
            except Exception as exc:  # noqa: BLE001 - every arm runs; the first failure re-raises
                first = first or exc
        if first is not None:
            raise first

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        scores: dict[str, float] = {}
        docs: dict[str, Doc] = {}
        failures: list[Exception] = []
        for arm in self.arms:
            try:
                hits = await arm.search(query, k)
            except Exception as exc:  # noqa: BLE001 - reads fail open per arm
                _log.warning("memory index %r failed to search: %s", arm, exc)
                failures.append(exc)
                continue
            for rank, hit in enumerate(hits, start=1):
                docs.setdefault(hit.doc.id, hit.doc)  # the first arm's doc wins
                scores[hit.doc.id] = scores.get(hit.doc.id, 0.0) + 1.0 / (self.k + rank)
        if failures and len(failures) == len(self.arms):
            raise failures[0]
        ranked = sorted(scores, key=lambda i: scores[i], reverse=True)[:k]
        return [Hit(docs[i], scores[i]) for i in ranked]
