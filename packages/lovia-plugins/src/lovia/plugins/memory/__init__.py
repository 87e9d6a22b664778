"""Memory: hot notes always in the prompt, a searchable archive, curation at run end.

See ``plugin`` (the ``Memory`` policy), ``notes`` (the hot tier), ``index`` (the archive
seam, ``KeywordIndex``, ``HybridIndex``), ``vector`` (the ``Embedder`` seam,
``VectorIndex``), ``embedder`` (``OpenAIEmbedder``) and ``curation`` (the side queries).
"""

from __future__ import annotations

from ._db import ArchiveError
from .embedder import OpenAIEmbedder
from .index import Doc, Fusable, Hit, HybridIndex, Index, KeywordIndex
from .notes import FileNotesStore, Note, NotesStore
from .plugin import Memory
from .vector import Embedder, VectorIndex

__all__ = [
    "ArchiveError",
    "Doc",
    "Embedder",
    "FileNotesStore",
    "Fusable",
    "Hit",
    "HybridIndex",
    "Index",
    "KeywordIndex",
    "Memory",
    "Note",
    "NotesStore",
    "OpenAIEmbedder",
    "VectorIndex",
]
