"""Entry-point groups through which core reaches the other distributions and third parties.

Groups are read lazily (never at import time: ``importlib.metadata`` costs tens of
milliseconds) and cached for the process. ``clear_entry_point_cache()`` exists for tests
that install a distribution at run time.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "COMMANDS",
    "CONTEXT_POLICIES",
    "PLUGINS",
    "PROVIDERS",
    "STORES",
    "clear_entry_point_cache",
    "entry_points_of",
]

PROVIDERS = "lovia.providers"
PLUGINS = "lovia.plugins"
STORES = "lovia.stores"
CONTEXT_POLICIES = "lovia.context_policies"
COMMANDS = "lovia.commands"
"""``lovia <name>`` subcommands: entry points naming ``main(argv, prog) -> int``."""


@cache
def entry_points_of(group: str) -> dict[str, EntryPoint]:
    """The entry points registered in ``group``, by name (cached)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=group)}


def clear_entry_point_cache() -> None:
    """Forget cached entry points (after installing a distribution at run time)."""
    entry_points_of.cache_clear()
