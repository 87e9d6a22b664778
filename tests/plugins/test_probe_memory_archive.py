"""Only a corrupt archive is called corrupt: a locked or otherwise failing archive.db gets a
hint that does not tell the user to move a healthy file aside."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from lovia.plugins import ArchiveError, Doc, KeywordIndex
from lovia.plugins.memory import _db


async def test_a_locked_archive_is_not_called_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_db, "_BUSY_TIMEOUT_SECONDS", 0.05)
    path = tmp_path / "archive.db"
    index = KeywordIndex(path)
    await index.add([Doc("a", "green tea")])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process in the middle of a long write
    try:
        with pytest.raises(ArchiveError) as info:
            await index.add([Doc("b", "black coffee")])
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "locked" in str(info.value)
    assert "corrupt" not in (info.value.hint or "")
    assert "another process" in (info.value.hint or "")
    index.close()


async def test_a_corrupt_archive_still_says_to_move_it_aside(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ArchiveError) as info:
        await KeywordIndex(path).search("tea")
    assert "move it aside" in (info.value.hint or "")
