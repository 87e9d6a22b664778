"""Skills: ``SKILL.md`` folders disclosed progressively (index, body, files).

See ``format`` (the file format and its rules), ``source`` (where skills come from),
``catalog`` (the index and the two tools) and ``plugin`` (the ``Skills`` plugin).
"""

from __future__ import annotations

from .catalog import SkillCatalog, SkillFilter
from .format import Skill, SkillMetadata, SkillsError
from .plugin import Skills
from .source import DirectorySkillSource, SkillNotFoundError, SkillSource

__all__ = [
    "DirectorySkillSource",
    "Skill",
    "SkillCatalog",
    "SkillFilter",
    "SkillMetadata",
    "SkillNotFoundError",
    "SkillSource",
    "Skills",
    "SkillsError",
]
