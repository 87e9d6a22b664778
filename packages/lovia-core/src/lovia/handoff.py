"""Multi-agent handoffs: ``Handoff`` and the ``transfer_to_<name>`` tools.

A handoff is a sentinel, not control flow: the ``transfer_to_<slug>`` tool returns a
``_HandoffSignal``; the tool phase records it as the run's pending handoff and writes a
plain text result; the loop swaps agents at the *end* of the turn, after the turn's other
results. Handoff tools always run as barriers, and the tool phase rejects a second handoff
of the same turn *before* its ``on_handoff`` fires: the first handoff of a turn wins.

This module depends on the tool layer only (the runtime imports it); agents as tools, which
start a sub-run, live in ``lovia.agent_tool``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from .exceptions import InvalidToolArguments
from .tools.base import Tool

if TYPE_CHECKING:
    from .agent import Agent
    from .run_context import RunContext

__all__ = ["Handoff", "OnHandoff", "as_handoff", "build_handoff_tool", "tool_slug"]

OnHandoff = Callable[[dict[str, Any], "RunContext[Any]"], Union[None, Awaitable[None]]]
"""``on_handoff(args, ctx)``: a side effect run when a handoff is accepted (sync or async)."""

_MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class Handoff:
    """A handoff target with an optional custom tool name, description and side effect.

    ``name=None`` gives ``transfer_to_<slug of the agent name>``; ``description=None`` a
    thin default naming the agent. ``on_handoff(args, ctx)`` runs only for an accepted
    handoff (never for the rejected second handoff of a turn).
    """

    target: Agent[Any]
    name: str | None = None
    description: str | None = None
    on_handoff: OnHandoff | None = None

    @property
    def tool_name(self) -> str:
        """The name of the tool the model calls to hand off."""
        return self.name or tool_slug(self.target.name, prefix="transfer_to_")


@dataclass(frozen=True, slots=True)
class _HandoffSignal:
    """What a handoff tool returns: the accepted handoff and the model's ``reason``."""

    handoff: Handoff
    reason: str | None = None


def as_handoff(item: Agent[Any] | Handoff) -> Handoff:
    """``item`` as a ``Handoff`` (an agent gets the defaults)."""
    return item if isinstance(item, Handoff) else Handoff(item)


def build_handoff_tool(handoff: Handoff) -> Tool:
    """The ``transfer_to_<slug>`` tool for ``handoff`` (always a barrier)."""

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> _HandoffSignal:
        reason = args.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise InvalidToolArguments("`reason` must be a string")
        if handoff.on_handoff is not None:
            outcome = handoff.on_handoff(args, ctx)
            if inspect.isawaitable(outcome):
                await outcome
        return _HandoffSignal(handoff, reason)

    target = handoff.target
    return Tool(
        name=handoff.tool_name,
        description=handoff.description or f"Hand the conversation over to {target.name}.",
        parameters={
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "Why the conversation is handed over."}
            },
        },
        invoke=invoke,
        parallel=False,
    )


def tool_slug(name: str, *, prefix: str = "") -> str:
    """A tool-safe name: ``prefix`` + ASCII slug, at most 64 chars.

    Non-ASCII characters are lossy, so a name that had any (or that must be truncated)
    gets a stable 8-hex digest suffix; a name with nothing ASCII left is digest only.
    """
    slug = _UNSAFE.sub("_", name.lower()).strip("_")
    lossy = not name.isascii()
    room = _MAX_TOOL_NAME - len(prefix)
    if not lossy and slug and len(slug) <= room:
        return prefix + slug
    import hashlib

    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    if not slug:
        return f"{prefix}agent_{digest}"[:_MAX_TOOL_NAME]
    keep = max(room - len(digest) - 1, 0)
    return f"{prefix}{slug[:keep].rstrip('_')}_{digest}"
