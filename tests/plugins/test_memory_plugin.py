"""Memory end to end inside Runner.run: notes in the prompt, the tools, curation and dreaming."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, InMemorySession, Runner
from lovia.events import RunCompleted
from lovia.exceptions import UserError
from lovia.plugins import Doc, FileNotesStore, Hit, HybridIndex, KeywordIndex, Memory, Note
from lovia.plugins.memory.notes import this_month
from lovia.providers.base import ModelDelta
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry

from .memory_support import HashEmbedder

WORKER = Path(__file__).with_name("memory_worker.py")
MONTH = this_month()


def system_of(model: ScriptedProvider, n: int = 0) -> str:
    return str(model.calls[n][0].content)


def outputs(entries: Sequence[TranscriptEntry]) -> dict[str, str]:
    return {e.call_id: e.output for e in entries if isinstance(e, ToolResultEntry)}


def digest(remember: Sequence[str] = (), retire: Sequence[str] = (), summary: str = "") -> Any:
    return text(
        json.dumps({"remember": list(remember), "retire": list(retire), "summary": summary})
    )


async def test_notes_are_in_the_prompt_with_a_budget_meter_and_the_tools_edit_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "MEMORY.md").write_text("- [2025-01] Prefers tea\n", encoding="utf-8")
    memory = Memory(tmp_path, auto_curate=False, notes_budget=1000)
    model = ScriptedProvider(
        [
            call("remember", {"fact": "Works at Acme."}, call_id="r1"),
            call("remember", {"fact": "works at acme"}, call_id="r2"),
            call("forget", {"fact": "Prefers tea"}, call_id="f"),
            call("remember", {"fact": "y" * 501}, call_id="long"),
            text("ok"),
        ]
    )
    result = await Runner.run(Agent("a", instructions="Base.", model=model, plugins=[memory]), "hi")
    system = system_of(model)
    assert system.startswith("Base.") and "- [2025-01] Prefers tea" in system
    assert "(24 / 1,000 characters)" in system and "`recall`" in system
    assert outputs(result.entries) == {
        "r1": "Remembered.",
        "r2": "Already in your notes.",
        "f": "Forgot 1 note(s).",
        "long": "Not saved: keep a note under 500 characters.",
    }
    assert (tmp_path / "MEMORY.md").read_text(encoding="utf-8") == f"- [{MONTH}] Works at Acme\n"
    assert "Works at Acme" not in system_of(model, 4)  # instructions are static per run


async def test_over_budget_notes_say_so(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("- [2025-01] " + "x" * 200 + "\n", encoding="utf-8")
    model = ScriptedProvider([text("ok")])
    memory = Memory(tmp_path, auto_curate=False, notes_budget=100, index=None)
    await Runner.run(Agent("a", model=model, plugins=[memory]), "hi")
    assert "over budget" in system_of(model)
    assert "`recall`" not in system_of(model) and "recall" not in model.tools[0]


async def test_recall_works_across_two_sessions(tmp_path: Path) -> None:
    session = InMemorySession()
    memory = Memory(tmp_path, auto_curate=False, expand_query=False, summarize_recall=False)
    agent = Agent("a", plugins=[memory])
    first = ScriptedProvider([text("Got it: the spare key is under the blue flowerpot.")])
    await Runner.run(
        agent.clone(model=first),
        "The spare key is under the blue flowerpot",
        session=session,
        session_id="one",
    )
    second = ScriptedProvider(
        [call("recall", {"query": "where is the spare key"}, call_id="q"), text("found")]
    )
    result = await Runner.run(
        agent.clone(model=second), "Where did I put the key?", session=session, session_id="two"
    )
    found = outputs(result.entries)["q"]
    assert "(user) The spare key is under the blue flowerpot" in found
    assert "(assistant) Got it" in found


async def test_recall_works_across_two_processes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(WORKER), "chat", str(tmp_path), "bicycle"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    memory = Memory(tmp_path, auto_curate=False, expand_query=False, summarize_recall=False)
    model = ScriptedProvider([call("recall", {"query": "bicycle parked"}, call_id="q"), text("ok")])
    result = await Runner.run(Agent("a", model=model, plugins=[memory]), "where is my bike?")
    assert "my bicycle is parked in bay 42" in outputs(result.entries)["q"]


async def test_messages_are_archived_as_run_id_seq_upserts_skipping_tool_and_system_entries(
    tmp_path: Path,
) -> None:
    memory = Memory(tmp_path, auto_curate=False)
    model = ScriptedProvider([call("remember", {"fact": "zebra facts"}), text("Stored the zebra.")])
    events: list[RunCompleted] = []
    handle = Runner.stream(
        Agent("a", instructions="SYSTEM zebra", model=model, plugins=[memory]),
        "Tell me about zebras",
    )
    async for event in handle:
        if isinstance(event, RunCompleted):
            events.append(event)
    result = await handle.result()
    assert memory.index is not None
    hits = await memory.index.search("zebra zebras", k=10)
    assert sorted(h.doc.id for h in hits) == [f"{result.run_id}:0", f"{result.run_id}:3"]
    assert {h.doc.meta["role"] for h in hits} == {"user", "assistant"}
    # Re-ingesting the same run upserts instead of duplicating.
    await memory._after_run(events[0].result, [], None)
    assert len(await memory.index.search("zebra zebras", k=10)) == 2


class CountingStore(FileNotesStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.saves = 0

    def save(self, notes: list[Note]) -> None:
        self.saves += 1
        super().save(notes)


async def test_curation_admits_strictly_retires_in_one_save_and_archives_a_summary(
    tmp_path: Path,
) -> None:
    store = CountingStore(tmp_path / "MEMORY.md")
    store.save([Note("Lives in Paris", "2024-01"), Note("Has a cat", "2024-02")])
    store.saves = 0
    curator = ScriptedProvider(
        [
            digest(
                remember=[
                    "Lives in Lisbon",
                    "has a cat",
                    "What is the user's name?",
                    "x" * 300,
                    "Line one\nline two",
                    "Prefers dark mode",
                ],
                retire=["lives in paris"],
                summary="The user moved to Lisbon and asked for dark mode.",
            )
        ]
    )
    memory = Memory(
        tmp_path, notes=store, model=curator, expand_query=False, summarize_recall=False
    )
    model = ScriptedProvider([text("Noted.")])
    result = await Runner.run(
        Agent("a", model=model, plugins=[memory]), "I moved to Lisbon. Use dark mode."
    )
    assert [n.fact for n in store.load()] == ["Has a cat", "Lives in Lisbon", "Prefers dark mode"]
    assert store.saves == 1
    assert curator.settings[0] is not None and curator.settings[0].temperature == 0
    assert curator.tools == [()]  # the side query has no tools
    assert "I moved to Lisbon" in str(curator.calls[0][-1].content)  # it read the transcript
    assert memory.index is not None
    summary = [
        h
        for h in await memory.index.search("moved Lisbon dark mode", k=10)
        if h.doc.id.endswith(":summary")
    ]
    assert (
        summary
        and summary[0].doc.id == f"{result.run_id}:summary"
        and summary[0].doc.meta["kind"] == "episode"
    )


async def test_a_failed_digest_still_ingests_and_a_failed_ingest_still_curates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = Memory(tmp_path / "a", model=ScriptedProvider([text("this is not json")]))
    await Runner.run(
        Agent("a", model=ScriptedProvider([text("sure")]), plugins=[memory]), "platypus question"
    )
    assert memory.index is not None
    assert len(await memory.index.search("platypus")) == 1
    assert "curating run" in caplog.text

    class BrokenIndex:
        async def add(self, docs: Sequence[Doc]) -> None:
            raise RuntimeError("disk gone")

        async def remove(self, ids: Sequence[str]) -> None: ...

        async def search(self, query: str, k: int = 5) -> list[Hit]:
            return []

    memory = Memory(
        tmp_path / "b",
        index=BrokenIndex(),
        model=ScriptedProvider([digest(["Owns a kayak"], summary="s")]),
    )
    await Runner.run(
        Agent("a", model=ScriptedProvider([text("ok")]), plugins=[memory]), "I own a kayak"
    )
    assert [n.fact for n in memory.notes.load()] == ["Owns a kayak"]
    assert "ingesting run" in caplog.text


async def test_auto_curate_off_still_ingests_and_asks_no_model(tmp_path: Path) -> None:
    curator = ScriptedProvider([])
    memory = Memory(tmp_path, auto_curate=False, model=curator)
    await Runner.run(Agent("a", model=ScriptedProvider([text("ok")]), plugins=[memory]), "narwhal")
    assert curator.calls == []
    assert memory.index is not None and len(await memory.index.search("narwhal")) == 1


async def test_the_run_model_is_used_for_curation_when_no_model_is_set(tmp_path: Path) -> None:
    model = ScriptedProvider([text("hello"), digest(["Speaks Portuguese"])])
    await Runner.run(Agent("a", model=model, plugins=[Memory(tmp_path)]), "Olá, falo português")
    assert [n.fact for n in FileNotesStore(tmp_path / "MEMORY.md").load()] == ["Speaks Portuguese"]
    model.assert_consumed()


async def test_background_curation_settles_on_drain(tmp_path: Path) -> None:
    gate = asyncio.Event()
    curator = GatedProvider(gate, [digest(["Runs marathons"])])
    memory = Memory(tmp_path, model=curator, curate_in_background=True)
    result = await Runner.run(
        Agent("a", model=ScriptedProvider([text("ok")]), plugins=[memory]), "I run marathons"
    )
    assert result.output == "ok"
    assert memory.notes.load() == []  # the run ended before curation
    gate.set()
    await memory.drain()
    assert [n.fact for n in memory.notes.load()] == ["Runs marathons"]
    await memory.drain()  # nothing pending: returns at once


class GatedProvider(ScriptedProvider):
    """A ScriptedProvider whose replies wait for ``gate``; ``entered`` is set on each call."""

    def __init__(self, gate: asyncio.Event, script: Sequence[Any]) -> None:
        super().__init__(list(script))
        self.gate = gate
        self.entered = asyncio.Event()

    async def stream(
        self, entries: Sequence[TranscriptEntry], **kwargs: Any
    ) -> AsyncIterator[ModelDelta]:
        self.entered.set()
        await self.gate.wait()
        async for delta in super().stream(entries, **kwargs):
            yield delta


def dream_reply(*facts: tuple[str, str]) -> Any:
    return text(json.dumps({"notes": [{"month": m, "fact": f} for m, f in facts]}))


async def test_dream_consolidates_backs_up_and_keeps_a_concurrent_remember(tmp_path: Path) -> None:
    memory = Memory(tmp_path, index=None)
    memory.replace_notes(
        "- [2024-01] Likes tea\n- [2024-06] Likes green tea\n- [2024-02] Has a cat\n"
    )
    original = (tmp_path / "MEMORY.md").read_text(encoding="utf-8")
    gate = asyncio.Event()
    model = GatedProvider(
        gate, [dream_reply(("2024-06", "Likes green tea"), ("2024-02", "Has a cat"))]
    )
    dreaming = asyncio.create_task(memory.dream(model))
    await model.entered.wait()
    assert (tmp_path / "MEMORY.md.bak").read_text(encoding="utf-8") == original  # backed up first
    await asyncio.to_thread(memory.remember, "Adopted a dog")  # lands mid-dream
    await asyncio.to_thread(memory.forget, "Has a cat")
    gate.set()
    assert await dreaming == (3, 2)
    assert [n.fact for n in memory.notes.load()] == ["Likes green tea", "Adopted a dog"]
    assert (tmp_path / ".dreamed").exists()


async def test_dream_edge_cases(tmp_path: Path) -> None:
    memory = Memory(tmp_path, index=None)
    with pytest.raises(UserError, match="needs a model"):
        await memory.dream()
    idle = ScriptedProvider([])
    assert await memory.dream(idle) == (0, 0) and idle.calls == []  # empty notes: no model call
    memory.remember("Keeps bees")
    assert await memory.dream(ScriptedProvider([dream_reply()])) == (1, 1)  # empty rewrite keeps
    assert [n.fact for n in memory.notes.load()] == ["Keeps bees"]


def _age(path: Path, days: float) -> None:
    past = time.time() - days * 86400
    os.utime(path, (past, past))


async def _one_run(memory: Memory) -> None:
    await Runner.run(Agent("a", model=ScriptedProvider([text("ok")]), plugins=[memory]), "hi")


async def test_dream_cadence_first_contact_unchanged_notes_and_budget(tmp_path: Path) -> None:
    curator = ScriptedProvider(
        [dream_reply(("2025-01", "Merged fact")), dream_reply(("2025-01", "Short"))]
    )
    memory = Memory(tmp_path, index=None, auto_curate=False, model=curator, dream_every_days=3)
    memory.remember("Fact one")
    await _one_run(memory)  # first contact: only starts the clock
    assert (tmp_path / ".dreamed").exists() and curator.calls == []

    _age(tmp_path / "MEMORY.md", 10)
    _age(tmp_path / ".dreamed", 5)  # cadence elapsed, but the notes did not change since
    await _one_run(memory)
    assert curator.calls == []

    memory.remember("Fact two")  # now they changed
    await _one_run(memory)
    assert len(curator.calls) == 1 and [n.fact for n in memory.notes.load()] == ["Merged fact"]
    assert (tmp_path / "MEMORY.md.bak").read_text(encoding="utf-8").count("\n") == 2

    await _one_run(memory)  # just dreamed: nothing to do
    assert len(curator.calls) == 1
    memory.notes_budget = 10
    memory.remember("A fact long enough to overflow the tiny budget")
    await _one_run(memory)  # over budget: dreams regardless of the cadence
    assert len(curator.calls) == 2 and [n.fact for n in memory.notes.load()] == ["Short"]


async def test_a_corrupt_archive_gives_a_typed_error_and_the_notes_still_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "MEMORY.md").write_text("- [2025-01] Has a corrupt archive\n", encoding="utf-8")
    (tmp_path / "archive.db").write_bytes(b"garbage" * 1000)
    memory = Memory(tmp_path, auto_curate=False, expand_query=False, summarize_recall=False)
    model = ScriptedProvider([call("recall", {"query": "anything"}, call_id="q"), text("ok")])
    with caplog.at_level(logging.WARNING, logger="lovia.plugins.memory"):
        result = await Runner.run(Agent("a", model=model, plugins=[memory]), "hi")
    assert "- [2025-01] Has a corrupt archive" in system_of(model)
    assert outputs(result.entries)["q"].startswith("Error: memory archive")
    assert "ArchiveError" in caplog.text  # the failed ingest was logged, not raised
    assert result.output == "ok"


async def test_recall_expands_the_query_and_summarises_failing_open(tmp_path: Path) -> None:
    memory = Memory(tmp_path, auto_curate=False)
    assert memory.index is not None and memory.expand_query is True  # auto: a lexical-only index
    await memory.index.add(
        [Doc("d1", "The user's automobile is a red Volvo", {"role": "user"}, "2025-03-01T00:00:00")]
    )
    side = ScriptedProvider(
        [text("automobile vehicle"), text("Your car is a red Volvo (March 2025).")]
    )
    assert await memory.recall("car", model=side) == "Your car is a red Volvo (March 2025)."
    assert "car" in str(side.calls[0][-1].content)

    broken = ScriptedProvider([text("")] * 0)  # every side query fails: raw query and raw hits
    assert (
        await memory.recall("automobile", model=broken)
        == "- [2025-03-01] (user) The user's automobile is a red Volvo"
    )
    assert await memory.recall("submarine", model=None) == "No memories found for 'submarine'."
    assert await memory.recall("  ") == "Give a query to search your memories."


def test_constructor_rules(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="embedder"):
        Memory(tmp_path, index=KeywordIndex(tmp_path / "x.db"), embedder=HashEmbedder())
    hybrid = Memory(tmp_path, embedder=HashEmbedder())
    assert isinstance(hybrid.index, HybridIndex) and hybrid.expand_query is False
    assert Memory(tmp_path, index=None).index is None
    with pytest.raises(UserError):
        Memory(tmp_path, recall_k=0)


async def test_hybrid_memory_recalls_through_both_arms(tmp_path: Path) -> None:
    memory = Memory(tmp_path, embedder=HashEmbedder(), auto_curate=False, summarize_recall=False)
    await _one_run(memory)
    model = ScriptedProvider([text("ok")])
    await Runner.run(Agent("a", model=model, plugins=[memory]), "My favourite colour is teal")
    assert "teal" in await memory.recall("favourite colour")


async def test_the_digest_reads_the_complete_transcript_history_included(tmp_path: Path) -> None:
    session = InMemorySession()
    curator = ScriptedProvider([digest(), digest()])
    memory = Memory(tmp_path, model=curator)
    agent = Agent("a", plugins=[memory])
    first = agent.clone(model=ScriptedProvider([text("ok")]))
    await Runner.run(first, "My locker code is 7319", session=session, session_id="s")
    second = agent.clone(model=ScriptedProvider([text("ok")]))
    await Runner.run(second, "Anything else?", session=session, session_id="s")
    prompt = str(curator.calls[1][-1].content)
    assert "user: My locker code is 7319" in prompt and "user: Anything else?" in prompt
