"""``RunState`` (the mutable state of one run) and ``ActiveAgent`` (one agent, resolved).

Only ``RunLoop`` mutates a ``RunState``. Everything a turn needs is kept incrementally here
(the transcript, where this run's own entries start, the size of the system head, the
usage), so no per-turn code re-walks the transcript.

Layout of ``transcript`` (which is also ``ctx.entries``, the live list)::

    [system head (0 or 1 entry)] [history from the session] [this run's entries ...]
                                                            ^ run_start

The system head is the only entry ever replaced (instructions re-render each turn, and a
handoff swaps it for the target's prompt); everything after it is append-only, except that
a rejected call's malformed arguments are rewritten wire-safe in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..messages import Usage
from ..transcript import InputEntry, TranscriptEntry

if TYPE_CHECKING:
    from ..agent import Agent
    from ..guardrails import InputGuardrail, OutputGuardrail
    from ..handoff import Handoff, _HandoffSignal
    from ..hooks import AgentHooks
    from ..plugin import ViewInjector
    from ..providers.base import Provider
    from ..tools.base import Tool

__all__ = ["ActiveAgent", "RunState"]


@dataclass(slots=True, eq=False, kw_only=True)
class ActiveAgent:
    """An agent resolved for one run: provider, merged tools and plugin contributions.

    Built once per agent per run; a handoff back to an agent reuses its activation.
    """

    agent: Agent[Any]
    provider: Provider
    tools: dict[str, Tool]
    """Every tool the agent can call, by name."""
    tool_names: frozenset[str]
    offered: tuple[Tool, ...]
    """The tools sent to the provider (``returns_images`` bundle tools dropped for
    non-vision providers)."""
    handoffs: dict[str, Handoff]
    """Handoff tools by tool name."""
    prompt_suffix: str
    """Workspace text, plugin text and the output contract, appended to ``ctx.system_prompt``."""
    output_type: Any
    text_output: bool
    response_format: dict[str, Any] | None
    view_injectors: tuple[ViewInjector, ...]
    hooks: tuple[AgentHooks, ...]
    input_guardrails: tuple[InputGuardrail, ...]
    output_guardrails: tuple[OutputGuardrail, ...]
    workspace_session: Any = None
    static_prompt: str | None = None
    """The rendered prompt when it cannot change between turns (no callables)."""


@dataclass(slots=True, eq=False, kw_only=True)
class RunState:
    """The mutable state of one run (owned by ``RunLoop``)."""

    active: ActiveAgent
    transcript: list[TranscriptEntry]
    head_count: int = 0
    """Entries of the runner-owned system head at the start of ``transcript`` (0 or 1)."""
    run_start: int = 0
    """Index of this run's first own entry."""
    usage: Usage = field(default_factory=Usage)
    turn: int = 0
    last_input_tokens: int | None = None
    finish_reason: str | None = None
    pending_handoff: _HandoffSignal | None = None
    activations: dict[int, ActiveAgent] = field(default_factory=dict)
    context_scratch: dict[str, Any] = field(default_factory=dict)
    notices: list[dict[str, Any]] = field(default_factory=list)
    """Compaction notices of this run (JSON-safe), stored with the session segment."""
    system_text: str = ""
    repair_attempts: int = 0

    def own_entries(self) -> list[TranscriptEntry]:
        """This run's entries (no system head, no history)."""
        return self.transcript[self.run_start :]

    def append(self, entry: TranscriptEntry) -> int:
        """Append ``entry``; returns its index."""
        self.transcript.append(entry)
        return len(self.transcript) - 1

    def set_system_head(self, text: str) -> None:
        """Make the runner-owned system head say ``text`` (removed when ``text`` is empty)."""
        if text == self.system_text and (self.head_count == 1) == bool(text):
            return
        self.system_text = text
        if text:
            entry = InputEntry("system", text)
            if self.head_count:
                self.transcript[0] = entry
            else:
                self.transcript.insert(0, entry)
                self.head_count = 1
                self.run_start += 1
        elif self.head_count:
            del self.transcript[0]
            self.head_count = 0
            self.run_start -= 1

    def activate(self, active: ActiveAgent) -> None:
        """Make ``active`` the running agent (a handoff swap)."""
        self.active = active
        self.activations[id(active.agent)] = active
