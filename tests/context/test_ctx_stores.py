from __future__ import annotations

from pathlib import Path

import pytest
from lovia.context import FileResultStore, InMemoryResultStore


def test_in_memory_store_is_an_lru_where_get_refreshes() -> None:
    store = InMemoryResultStore(max_entries=2)
    store.put("a", "1")
    store.put("b", "2")
    assert store.get("a") == "1"
    store.put("c", "3")
    assert store.get("b") is None and store.get("a") == "1" and store.get("c") == "3"
    unbounded = InMemoryResultStore(max_entries=None)
    for i in range(3_000):
        unbounded.put(str(i), "x")
    assert len(unbounded) == 3_000
    assert InMemoryResultStore().max_entries == 1_024


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_in_memory_store_rejects_bad_sizes(size: object) -> None:
    with pytest.raises(ValueError):
        InMemoryResultStore(max_entries=size)  # type: ignore[arg-type]


def test_file_store_is_byte_exact_and_injective(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path / "results")
    assert store.get("missing") is None
    content = "line1\r\nline2\rline3\n漢字 \ud800"
    store.put("abc", content)
    store.put("a/b", "slash")
    store.put("a%2Fb", "percent")
    assert store.get("abc") == content
    assert (store.get("a/b"), store.get("a%2Fb")) == ("slash", "percent")
    names = {p.name for p in (tmp_path / "results").iterdir()}
    assert len(names) == 3 and not any(n.startswith(".tmp-") for n in names)


def test_file_store_leaves_no_temp_file_on_failure(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path)
    (tmp_path / store.path_for("k").name).mkdir()  # the rename target is a directory: fails
    with pytest.raises(OSError):
        store.put("k", "data")
    assert [p.name for p in tmp_path.iterdir()] == [store.path_for("k").name]


def test_file_store_treats_an_impossibly_long_key_as_absent(tmp_path: Path) -> None:
    # A model can pass any reference to recall; one too long for a file name is a miss.
    store = FileResultStore(tmp_path)
    assert store.get("é" * 400) is None
