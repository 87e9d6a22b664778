"""``RunContext``: the one live object tools, hooks, guardrails, instruction fragments and
view injectors receive.

The run loop owns every field and updates them in place (``turn``, ``agent`` on a handoff,
``usage`` as replies arrive); receivers read them. ``cancel_token`` and ``mailbox`` are
always present. ``turn`` is 1-based and 0 before the first turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .messages import Message, Usage
from .transcript import TranscriptEntry, entries_to_messages

if TYPE_CHECKING:
    from .agent import Agent
    from .budget import RunBudget
    from .cancellation import CancelToken
    from .steering import Mailbox
    from .tracing import Tracer

__all__ = ["RunContext"]

DepsT = TypeVar("DepsT")


@dataclass(slots=True, kw_only=True, eq=False)
class RunContext(Generic[DepsT]):
    """The live state of one run, as its participants see it."""

    deps: DepsT
    """The caller's ``context=`` value (dependencies for tools)."""
    agent: Agent[Any]
    """The active agent; changes on a handoff."""
    cancel_token: CancelToken
    """The run's cooperative cancel token (always present; sub-runs share it)."""
    mailbox: Mailbox
    """Steering messages drained at each turn start (always present; sub-runs get their own)."""
    entries: list[TranscriptEntry] = field(default_factory=list)
    """The full transcript so far (history and this run); read-only for receivers."""
    usage: Usage = field(default_factory=Usage)
    """The run's usage so far (live; sub-runs fold into it)."""
    turn: int = 0
    """The current turn, 1-based; 0 before the first turn."""
    session_id: str | None = None
    """The run's ``session_id``, or ``None`` without a session."""
    run_id: str | None = None
    """The run's id (the checkpoint's ``run_id`` when checkpointed)."""
    budget: RunBudget | None = None
    """The run's ``RunBudget``, or ``None`` for no limits."""
    workspace: Any = None
    """The active workspace session (``lovia.workspace``), or ``None``."""
    system_prompt: str = ""
    """Base instructions + fragments + the run's ``extra_instructions`` for the active agent."""
    tracer: Tracer | None = None
    """The run's tracer (sub-runs inherit it); the loop always sets one."""

    @property
    def context(self) -> DepsT:
        """Alias of ``deps``."""
        return self.deps

    @property
    def messages(self) -> list[Message]:
        """The lossy chat view of ``entries`` (computed on access)."""
        return entries_to_messages(self.entries)

    def tail(self, n: int) -> Sequence[TranscriptEntry]:
        """The last ``n`` entries."""
        return self.entries[-n:] if n > 0 else []
