"""Text a model or a web form can hand memory that UTF-8 files and SQLite cannot store as is:
lone surrogates (half an emoji escaped in JSON) and control characters."""

from __future__ import annotations

from pathlib import Path

from lovia import Agent, Runner
from lovia.plugins import Memory
from lovia.plugins.memory import Doc, KeywordIndex
from lovia.testing import ScriptedProvider, text


def plain_memory(root: Path) -> Memory:
    return Memory(root, auto_curate=False, expand_query=False, summarize_recall=False)


def test_a_fact_with_a_lone_surrogate_or_control_characters_is_saved_printable(
    tmp_path: Path,
) -> None:
    memory = plain_memory(tmp_path)
    assert memory.remember("Likes \ud83d cats") is True
    assert memory.remember("Bell\x07 and NUL\x00 and escape\x1b[31m red") is True
    body = (tmp_path / "MEMORY.md").read_text(encoding="utf-8")
    facts = [line.split("] ", 1)[1] for line in body.splitlines()]
    assert facts == ["Likes \ufffd cats", "Bell and NUL and escape[31m red"]
    assert memory.remember("Likes \ud83d cats") is False  # the same fact, deduplicated
    assert memory.forget("escape[31m") == 1


async def test_a_run_with_a_lone_surrogate_in_a_message_is_still_archived(tmp_path: Path) -> None:
    memory = plain_memory(tmp_path)
    model = ScriptedProvider([text("Zebras \ud83d are striped.")])
    agent = Agent("a", model=model, plugins=[memory])
    await Runner.run(agent, "Tell me about zebras \udc00 please")
    recalled = await memory.recall("zebras")
    assert "(user) Tell me about zebras \ufffd please" in recalled
    assert "(assistant) Zebras \ufffd are striped" in recalled


async def test_the_keyword_index_stores_a_doc_with_surrogates_in_text_and_meta(
    tmp_path: Path,
) -> None:
    index = KeywordIndex(tmp_path / "archive.db")
    await index.add([Doc("d1", "broken \ud800 text", {"who": "\udfff"})])
    [hit] = await index.search("broken")
    assert (hit.doc.text, hit.doc.meta) == ("broken \ufffd text", {"who": "\ufffd"})
    index.close()


def test_a_hand_edit_saved_with_a_bom_keeps_its_first_note(tmp_path: Path) -> None:
    # Windows Notepad writes a byte-order mark and CRLF line ends.
    (tmp_path / "MEMORY.md").write_bytes(
        "\ufeff- [2025-01] First fact\r\n- [2025-02] Second fact\r\n".encode()
    )
    memory = plain_memory(tmp_path)
    memory.remember("Third fact")
    lines = (tmp_path / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["- [2025-01] First fact", "- [2025-02] Second fact"]
    assert lines[2].endswith("] Third fact")


def test_a_hand_edit_in_a_legacy_encoding_keeps_its_accents(tmp_path: Path) -> None:
    # One line typed in a Windows-1252 editor, one in UTF-8: neither is mangled on save.
    (tmp_path / "MEMORY.md").write_bytes(
        "- [2025-01] Likes café\n".encode("cp1252") + "- [2025-02] Lives in Zürich\n".encode()
    )
    memory = plain_memory(tmp_path)
    memory.remember("Third fact")
    lines = (tmp_path / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["- [2025-01] Likes café", "- [2025-02] Lives in Zürich"]
