"""The hot tier: MEMORY.md parsing, normalising, atomic writes and two processes at once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lovia.plugins import FileNotesStore, Memory, Note
from lovia.plugins.memory.notes import parse_notes, render_notes, this_month

WORKER = Path(__file__).with_name("memory_worker.py")


def test_hand_edits_are_tolerated_and_non_bullet_lines_ignored() -> None:
    body = (
        "# My memory\n\nSome prose the user typed.\n"
        "- [2025-03] Prefers green tea\n"
        "  * [2025-04]   Lives in   Lisbon.  \n"
        "- an undated bullet\n"
        "-not a bullet\n"
        "- [2026-01] prefers GREEN tea.\n"  # the same fact, another month: deduplicated
        "- [2026-01]\n"
    )
    assert parse_notes(body) == [
        Note("Prefers green tea", "2025-03"),
        Note("Lives in Lisbon", "2025-04"),
        Note("an undated bullet", ""),
    ]


def test_render_writes_one_dated_bullet_per_fact() -> None:
    text = render_notes([Note("a", "2025-01"), Note("b"), Note("A.", "2026-02")])
    assert text == f"- [2025-01] a\n- [{this_month()}] b\n"


def test_the_store_round_trips_and_writes_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileNotesStore(tmp_path / "mem" / "MEMORY.md")
    assert store.load() == []
    store.save([Note("one", "2025-01")])
    assert store.path.read_text(encoding="utf-8") == "- [2025-01] one\n"

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.save([Note("two", "2025-02")])
    monkeypatch.undo()
    assert store.load() == [Note("one", "2025-01")]  # the old file is intact
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["MEMORY.md"]  # no temp left


def test_remember_forget_and_replace(tmp_path: Path) -> None:
    memory = Memory(tmp_path, index=None)
    assert memory.remember("Likes  tea.") is True
    assert memory.remember("likes tea") is False  # normalised duplicate
    assert memory.remember("Works at Acme") is True
    assert (
        memory.notes_body() == f"- [{this_month()}] Likes tea\n- [{this_month()}] Works at Acme\n"
    )
    assert memory.forget("acme") == 1  # no exact match: the notes containing it
    assert memory.forget("nothing like this") == 0
    (tmp_path / "MEMORY.md").write_text(
        "# edited by hand\n- [2024-12] Has a cat\n", encoding="utf-8"
    )
    assert memory.notes_body() == "- [2024-12] Has a cat\n"
    assert (
        memory.replace_notes("junk line\n* [2025-05] Has a dog\n- Has a dog")
        == "- [2025-05] Has a dog\n"
    )
    assert (tmp_path / "MEMORY.md").read_text(encoding="utf-8") == "- [2025-05] Has a dog\n"


def test_two_processes_remembering_at_once_lose_nothing(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "remember", str(tmp_path), label],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for label in ("A", "B")
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:  # release both only once both are ready, so they really overlap
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            assert p.wait(timeout=60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for pipe in (p.stdin, p.stdout):
                if pipe is not None:
                    pipe.close()
    facts = {n.fact for n in FileNotesStore(tmp_path / "MEMORY.md").load()}
    expected = {f"fact {i} from worker {w}" for i in range(40) for w in ("A", "B")}
    assert facts == expected


async def test_concurrent_remembers_in_one_process_are_serialised(tmp_path: Path) -> None:
    memory = Memory(tmp_path, index=None)
    await asyncio.gather(*(asyncio.to_thread(memory.remember, f"fact {i}") for i in range(60)))
    assert {n.fact for n in memory.notes.load()} == {f"fact {i}" for i in range(60)}
