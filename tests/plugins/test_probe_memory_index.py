"""A query with thousands of distinct words (a pasted page, a runaway expansion) still searches,
on FTS5 and on the LIKE fallback, instead of hitting SQLite's expression depth limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from lovia.plugins import Doc, KeywordIndex
from lovia.plugins.memory import index as index_module


@pytest.mark.parametrize("fts5", [True, False], ids=["fts5", "like"])
async def test_a_query_of_thousands_of_words_still_finds_its_first_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fts5: bool
) -> None:
    if not fts5:
        monkeypatch.setattr(index_module, "_fts5_available", lambda conn: False)
    index = KeywordIndex(tmp_path / "archive.db")
    await index.add([Doc("a", "Prefers green tea"), Doc("b", "Deploys on Fridays")])
    query = "green tea " + " ".join(f"filler{i}" for i in range(3000))
    hits = await index.search(query)
    assert [h.doc.id for h in hits] == ["a"]
    index.close()
