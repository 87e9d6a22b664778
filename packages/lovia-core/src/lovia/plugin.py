"""The plugin seam: the one extension axis for bundled capabilities.

A ``Plugin`` is set up once per run (and once per agent a handoff reaches); the
``PluginInstance`` it returns contributes to fixed loop slots and holds no control flow of
its own. Instances' ``aclose`` callbacks run in LIFO order when the run ends.

``ViewInjector``s are the per-turn seam: after the context policy built a call's view, each
injector may append transient entries to the *tail of that view only*. Injected entries
never reach the transcript or the session, so they neither accumulate nor disturb the
cached prompt prefix. Injectors are fail-open: one that raises is logged and skipped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .transcript import TranscriptEntry

if TYPE_CHECKING:
    from .guardrails import InputGuardrail, OutputGuardrail
    from .hooks import AgentHooks
    from .run_context import RunContext
    from .tools.base import Tool

__all__ = ["Plugin", "PluginInstance", "ViewInjector"]

ViewInjector = Callable[
    ["RunContext[Any]"],
    "Sequence[TranscriptEntry] | Awaitable[Sequence[TranscriptEntry]]",
]
"""``(ctx) -> entries`` appended to the tail of one call's view (sync or async)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginInstance:
    """What one plugin contributes to one run of one agent."""

    tools: tuple[Tool, ...] = ()
    instructions: str = ""
    """Appended to the system prompt after the agent's own instructions."""
    view_injectors: tuple[ViewInjector, ...] = ()
    hooks: AgentHooks | None = None
    input_guardrails: tuple[InputGuardrail, ...] = ()
    output_guardrails: tuple[OutputGuardrail, ...] = ()
    aclose: Callable[[], Awaitable[None]] | None = None
    """Called once when the run ends (LIFO across plugins)."""


class Plugin(Protocol):
    """A bundled capability (MCP, skills, todos, memory, ...)."""

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance: ...
