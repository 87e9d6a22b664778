"""lovia.plugins (distribution lovia-plugins): the built-in plugins.

``Todo`` (a checklist with a per-turn reminder), ``Skills`` (``SKILL.md`` progressive
disclosure), ``Memory`` (long-term notes and a searchable archive), ``MCP`` (tools from
Model Context Protocol servers) and ``Subagents`` (background child runs). Every one is
built on core's ``lovia.plugin`` seam, the same one a user's own plugin implements.

Importing this package is cheap: each name resolves lazily on first access, so
``import lovia.plugins`` loads neither pyyaml nor sqlite3 nor the MCP client.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

# name -> defining module
_EXPORTS: dict[str, str] = {
    "Todo": "lovia.plugins.todo",
    "TodoItem": "lovia.plugins.todo",
    "TodoList": "lovia.plugins.todo",
    "render_todos": "lovia.plugins.todo",
    "todos_from_entries": "lovia.plugins.todo",
    "DirectorySkillSource": "lovia.plugins.skills",
    "Skill": "lovia.plugins.skills",
    "SkillCatalog": "lovia.plugins.skills",
    "SkillMetadata": "lovia.plugins.skills",
    "SkillNotFoundError": "lovia.plugins.skills",
    "SkillSource": "lovia.plugins.skills",
    "Skills": "lovia.plugins.skills",
    "SkillsError": "lovia.plugins.skills",
    "Doc": "lovia.plugins.memory",
    "Embedder": "lovia.plugins.memory",
    "FileNotesStore": "lovia.plugins.memory",
    "Fusable": "lovia.plugins.memory",
    "Hit": "lovia.plugins.memory",
    "HybridIndex": "lovia.plugins.memory",
    "Index": "lovia.plugins.memory",
    "KeywordIndex": "lovia.plugins.memory",
    "Memory": "lovia.plugins.memory",
    "ArchiveError": "lovia.plugins.memory",
    "Note": "lovia.plugins.memory",
    "NotesStore": "lovia.plugins.memory",
    "OpenAIEmbedder": "lovia.plugins.memory",
    "VectorIndex": "lovia.plugins.memory",
    # Built in parallel in their own modules; listed once those modules exist.
    "MCP": "lovia.plugins.mcp",
    "MCPConnection": "lovia.plugins.mcp",
    "MCPServerStdio": "lovia.plugins.mcp",
    "MCPServerStreamableHTTP": "lovia.plugins.mcp",
    "ChildSpec": "lovia.plugins.subagents",
    "Subagents": "lovia.plugins.subagents",
}


# A spec lookup costs a few stat calls and never imports the module; a name whose module
# is absent (a sibling plugin not installed yet) stays out of __all__.
_PRESENT = {m for m in set(_EXPORTS.values()) if importlib.util.find_spec(m) is not None}

__all__ = sorted(n for n, m in _EXPORTS.items() if m in _PRESENT)

if TYPE_CHECKING:
    from lovia.plugins.memory import ArchiveError as ArchiveError
    from lovia.plugins.memory import Doc as Doc
    from lovia.plugins.memory import Embedder as Embedder
    from lovia.plugins.memory import FileNotesStore as FileNotesStore
    from lovia.plugins.memory import Fusable as Fusable
    from lovia.plugins.memory import Hit as Hit
    from lovia.plugins.memory import HybridIndex as HybridIndex
    from lovia.plugins.memory import Index as Index
    from lovia.plugins.memory import KeywordIndex as KeywordIndex
    from lovia.plugins.memory import Memory as Memory
    from lovia.plugins.memory import Note as Note
    from lovia.plugins.memory import NotesStore as NotesStore
    from lovia.plugins.memory import OpenAIEmbedder as OpenAIEmbedder
    from lovia.plugins.memory import VectorIndex as VectorIndex
    from lovia.plugins.skills import DirectorySkillSource as DirectorySkillSource
    from lovia.plugins.skills import Skill as Skill
    from lovia.plugins.skills import SkillCatalog as SkillCatalog
    from lovia.plugins.skills import SkillMetadata as SkillMetadata
    from lovia.plugins.skills import SkillNotFoundError as SkillNotFoundError
    from lovia.plugins.skills import Skills as Skills
    from lovia.plugins.skills import SkillsError as SkillsError
    from lovia.plugins.skills import SkillSource as SkillSource
    from lovia.plugins.todo import Todo as Todo
    from lovia.plugins.todo import TodoItem as TodoItem
    from lovia.plugins.todo import TodoList as TodoList
    from lovia.plugins.todo import render_todos as render_todos
    from lovia.plugins.todo import todos_from_entries as todos_from_entries


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lovia.plugins' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: __getattr__ is not called again for this name
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
