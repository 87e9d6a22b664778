"""The lovia.plugins surface: lazy, cheap to import, and reachable through the lovia facade."""

from __future__ import annotations

import json
import subprocess
import sys

import lovia.plugins
import pytest

MINE = [
    "ArchiveError", "DirectorySkillSource", "Doc", "Embedder", "FileNotesStore", "Fusable",
    "Hit", "HybridIndex", "Index", "KeywordIndex", "Memory", "Note", "NotesStore",
    "OpenAIEmbedder", "Skill", "SkillCatalog", "SkillMetadata", "SkillNotFoundError",
    "SkillSource", "Skills", "SkillsError", "Todo", "TodoItem", "TodoList", "VectorIndex",
    "render_todos", "todos_from_entries",
]  # fmt: skip


def test_importing_the_portion_loads_no_plugin_module_or_heavy_dependency() -> None:
    code = (
        "import sys, json, lovia.plugins\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('lovia.plugins.')"
        " or m in ('yaml', 'sqlite3', 'httpx', 'pydantic', 'mcp'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_every_name_resolves_and_all_lists_the_present_ones() -> None:
    assert set(MINE) <= set(lovia.plugins.__all__)
    for name in lovia.plugins.__all__:
        assert getattr(lovia.plugins, name) is not None
    assert set(MINE) <= set(dir(lovia.plugins))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = lovia.plugins.Nope


def test_the_facade_resolves_the_plugins_in_a_fresh_process() -> None:
    code = (
        "from lovia import Memory, Skills, Todo\n"
        "import lovia.plugins as p\n"
        "assert (Memory, Skills, Todo) == (p.Memory, p.Skills, p.Todo)\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
