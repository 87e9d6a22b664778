"""``Skills``: the plugin that puts a ``SkillCatalog`` in front of an agent.

The index is rendered once per run in ``setup()`` (plugin instructions are static per run),
so a skill added mid-run is loadable at once but appears in the index only on the next run.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from lovia.exceptions import UserError
from lovia.plugin import PluginInstance

from .catalog import SkillCatalog, SkillFilter
from .source import DirectorySkillSource, SkillSource

if TYPE_CHECKING:
    from lovia.run_context import RunContext

__all__ = ["Skills"]


class Skills:
    """Progressive-disclosure skills from directories, a ``SkillSource`` or a catalog.

    ``Skills("./skills", "~/.agents/skills")``, ``Skills(my_source, filter=...)`` or
    ``Skills(SkillCatalog(...))``. Directories and a source cannot be mixed, a prebuilt
    catalog takes no options, and at least one source is required (``UserError``).
    """

    def __init__(
        self,
        *dirs_or_source: str | os.PathLike[str] | SkillSource | SkillCatalog,
        usage_rules: str | None = None,
        filter: SkillFilter | None = None,
        name: str = "skills",
    ) -> None:
        self.name = name
        self.catalog = _build_catalog(dirs_or_source, usage_rules, filter)

    def __repr__(self) -> str:
        return f"Skills({self.catalog.source!r}, name={self.name!r})"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        instructions = await asyncio.to_thread(self.catalog.instructions)
        return PluginInstance(tools=self.catalog.tools(), instructions=instructions)


def _build_catalog(
    args: tuple[str | os.PathLike[str] | SkillSource | SkillCatalog, ...],
    usage_rules: str | None,
    filter: SkillFilter | None,
) -> SkillCatalog:
    if not args:
        raise UserError(
            "Skills() needs at least one skills directory or a SkillSource",
            hint="e.g. Skills('./.agents/skills')",
        )
    catalogs = [a for a in args if isinstance(a, SkillCatalog)]
    if catalogs:
        if len(args) > 1 or usage_rules is not None or filter is not None:
            raise UserError(
                "a prebuilt SkillCatalog cannot be combined with other sources or options",
                hint="pass usage_rules=/filter= to SkillCatalog(...) itself",
            )
        return catalogs[0]
    dirs = [a for a in args if isinstance(a, (str, os.PathLike))]
    sources = [a for a in args if not isinstance(a, (str, os.PathLike))]
    if sources and (dirs or len(sources) > 1):
        raise UserError(
            "Skills() takes either directories or one SkillSource, not a mix",
            hint="wrap several directories in one DirectorySkillSource(*dirs)",
        )
    if sources:
        source = sources[0]
        if not isinstance(source, SkillSource):
            raise UserError(
                f"Skills() got {type(source).__name__}, which is not a directory or SkillSource",
                hint="a SkillSource has list_skills() and load_skill(name)",
            )
    else:
        source = DirectorySkillSource(*dirs)
    return SkillCatalog(source, usage_rules=usage_rules, filter=filter)
