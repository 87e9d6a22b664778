"""The archive seams: KeywordIndex (FTS5, CJK bigrams, LIKE fallback), VectorIndex, HybridIndex."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from lovia.exceptions import StoreError, UserError
from lovia.plugins import ArchiveError, Doc, Hit, HybridIndex, Index, KeywordIndex, VectorIndex
from lovia.plugins.memory import index as index_module

from .memory_support import HashEmbedder


@pytest.fixture(params=["fts5", "like"])
def keyword(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> KeywordIndex:
    if request.param == "like":
        monkeypatch.setattr(index_module, "_fts5_available", lambda conn: False)
    return KeywordIndex(tmp_path / "archive.db")


async def test_keyword_search_ranks_matches_and_round_trips_meta_and_when(
    keyword: KeywordIndex,
) -> None:
    await keyword.add(
        [
            Doc(
                "a",
                "The user prefers green tea in the morning",
                {"role": "user", "n": 1},
                "2026-01-02T03:04:05+00:00",
            ),
            Doc("b", "Deploys go out on Fridays", {"role": "assistant"}),
            Doc("c", "Green tea and green apples, green everything"),
        ]
    )
    hits = await keyword.search("green tea", k=5)
    assert {h.doc.id for h in hits} == {"a", "c"}
    a = next(h.doc for h in hits if h.doc.id == "a")
    assert a == Doc(
        "a",
        "The user prefers green tea in the morning",
        {"role": "user", "n": 1},
        "2026-01-02T03:04:05+00:00",
    )
    assert all(isinstance(h, Hit) and h.score > 0 for h in hits)
    assert [h.doc.id for h in await keyword.search("fridays deploys", k=1)] == ["b"]
    assert await keyword.search("", k=5) == []
    assert await keyword.search("nothing-matches-zzz", k=5) == []


@pytest.mark.parametrize(
    "query",
    ['tea" OR *', "NEAR(tea green)", "-tea", "tea:green", "^tea", "(tea", "AND OR NOT", "100% tea"],
)
async def test_query_syntax_is_never_interpreted(keyword: KeywordIndex, query: str) -> None:
    await keyword.add([Doc("a", "green tea"), Doc("b", "and or not")])
    hits = await keyword.search(query)  # never an FTS5 syntax error
    assert hits and all(isinstance(h, Hit) for h in hits)


async def test_keyword_upserts_by_id_and_removes(keyword: KeywordIndex) -> None:
    await keyword.add([Doc("x", "first version about kayaks")])
    await keyword.add([Doc("x", "second version about canoes")])
    assert await keyword.search("kayaks") == []
    assert [h.doc.text for h in await keyword.search("canoes")] == ["second version about canoes"]
    await keyword.remove(["x", "never-there"])
    assert await keyword.search("canoes") == []


async def test_cjk_words_inside_sentences_are_found(keyword: KeywordIndex) -> None:
    await keyword.add(
        [
            Doc("zh", "我喜欢在早上喝绿茶"),
            Doc("ja", "東京で寿司を食べました"),
            Doc("en", "plain english text"),
        ]
    )
    assert [h.doc.id for h in await keyword.search("绿茶")] == ["zh"]
    assert [h.doc.id for h in await keyword.search("寿司")] == ["ja"]
    assert [h.doc.id for h in await keyword.search("茶")] == ["zh"]  # a lone character


async def test_like_fallback_escapes_wildcards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "_fts5_available", lambda conn: False)
    index = KeywordIndex(tmp_path / "a.db")
    await index.add([Doc("1", "snake_case names"), Doc("2", "snakeXcase names")])
    assert [h.doc.id for h in await index.search("snake_case")] == ["1"]
    assert index.fts is False


async def test_the_archive_persists_across_instances(tmp_path: Path) -> None:
    await KeywordIndex(tmp_path / "a.db").add([Doc("1", "persistent fact about llamas")])
    assert [h.doc.id for h in await KeywordIndex(tmp_path / "a.db").search("llamas")] == ["1"]


async def test_a_corrupt_archive_raises_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    path.write_bytes(b"this is not a sqlite database at all" * 100)
    index = KeywordIndex(path)
    with pytest.raises(ArchiveError) as info:
        await index.search("anything")
    assert isinstance(info.value, StoreError) and "move it aside" in str(info.value)
    with pytest.raises(ArchiveError):
        await index.add([Doc("1", "x")])


# -- vectors -----------------------------------------------------------------------------------


async def test_vector_search_finds_the_nearest_and_skips_embedding_when_pointless(
    tmp_path: Path,
) -> None:
    embedder = HashEmbedder()
    index = VectorIndex(tmp_path / "a.db", embedder)
    assert await index.search("anything") == []  # empty index: no embedding call
    assert embedder.batches == []
    await index.add(
        [
            Doc("tea", "green tea every morning", {"k": 1}, "2026-02-01"),
            Doc("dev", "deploys on fridays"),
        ]
    )
    hits = await index.search("morning tea", k=1)
    assert [h.doc for h in hits] == [Doc("tea", "green tea every morning", {"k": 1}, "2026-02-01")]
    calls = len(embedder.batches)
    assert await index.search("   ") == [] and len(embedder.batches) == calls
    await index.remove(["tea"])
    assert [h.doc.id for h in await index.search("morning tea")] == ["dev"]


async def test_all_zero_vectors_do_not_crash(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "a.db", HashEmbedder())
    await index.add([Doc("z", "!!! ???")])  # no words: the zero vector
    hits = await index.search("??")
    assert [(h.doc.id, h.score) for h in hits] == [("z", 0.0)]


async def test_a_changed_embedder_wipes_the_vectors(tmp_path: Path) -> None:
    await VectorIndex(tmp_path / "a.db", HashEmbedder("one")).add([Doc("1", "green tea")])
    assert len(await VectorIndex(tmp_path / "a.db", HashEmbedder("one")).search("tea")) == 1
    assert await VectorIndex(tmp_path / "a.db", HashEmbedder("two")).search("tea") == []


# -- hybrid ------------------------------------------------------------------------------------


class Fixed:
    """An index that returns fixed hits, or fails."""

    def __init__(self, ids: Sequence[str], fail: bool = False, label: str = "") -> None:
        self.ids, self.fail, self.label = list(ids), fail, label
        self.added: list[str] = []

    async def add(self, docs: Sequence[Doc]) -> None:
        self.added.extend(d.id for d in docs)
        if self.fail:
            raise RuntimeError(f"{self.label} add failed")

    async def remove(self, ids: Sequence[str]) -> None:
        if self.fail:
            raise RuntimeError(f"{self.label} remove failed")

    async def search(self, query: str, k: int = 5) -> list[Hit]:
        if self.fail:
            raise RuntimeError(f"{self.label} search failed")
        return [Hit(Doc(i, f"{self.label}:{i}"), 1.0) for i in self.ids[:k]]


async def test_rrf_fuses_ranks_dedups_keeping_the_first_arms_doc_and_truncates() -> None:
    hybrid = HybridIndex(Fixed(["a", "b", "c"], label="L"), Fixed(["c", "b", "d"], label="R"), k=1)
    hits = await hybrid.search("q", k=3)
    # k=1: a=1/2, b=1/3+1/3, c=1/4+1/2, d=1/4
    assert [h.doc.id for h in hits] == ["c", "b", "a"]
    assert hits[0].doc.text == "L:c" and hits[0].score == pytest.approx(0.75)
    assert isinstance(hybrid, Index)


async def test_the_or_operator_builds_a_hybrid_and_keeps_a_custom_k(tmp_path: Path) -> None:
    keyword = KeywordIndex(tmp_path / "a.db")
    vector = VectorIndex(tmp_path / "a.db", HashEmbedder())
    hybrid = keyword | vector
    assert isinstance(hybrid, HybridIndex) and hybrid.arms == (keyword, vector) and hybrid.k == 60
    three = HybridIndex(keyword, k=7) | vector
    assert three.k == 7 and three.arms == (keyword, vector)
    await hybrid.add([Doc("1", "green tea at dawn"), Doc("2", "fridays are for deploys")])
    assert (await hybrid.search("green tea", k=1))[0].doc.id == "1"


async def test_reads_fail_open_per_arm_and_raise_only_when_all_fail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ok = Fixed(["a"], label="ok")
    assert [
        h.doc.id for h in await HybridIndex(Fixed([], fail=True, label="bad"), ok).search("q")
    ] == ["a"]
    assert "bad search failed" in caplog.text
    with pytest.raises(RuntimeError, match="one search failed"):
        await HybridIndex(
            Fixed([], fail=True, label="one"), Fixed([], fail=True, label="two")
        ).search("q")


async def test_writes_reach_every_arm_then_propagate_the_first_failure() -> None:
    first, second, third = (
        Fixed([], fail=True, label="first"),
        Fixed([]),
        Fixed([], fail=True, label="third"),
    )
    with pytest.raises(RuntimeError, match="first add failed"):
        await HybridIndex(first, second, third).add([Doc("1", "x")])
    assert first.added == second.added == third.added == ["1"]


def test_a_hybrid_needs_an_arm() -> None:
    with pytest.raises(UserError, match="at least one"):
        HybridIndex()
