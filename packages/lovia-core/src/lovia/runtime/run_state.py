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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..messages import Usage
from ..transcript import AssistantTextEntry, InputEntry, ReasoningEntry, TranscriptEntry

if TYPE_CHECKING:
    from ..agent import Agent
    from ..guardrails import InputGuardrail, OutputGuardrail
    from ..handoff import Handoff, _HandoffSignal
    from ..hooks import AgentHooks
    from ..plugin import ViewInjector
    from ..providers.base import Provider
    from ..tools.base import Tool

__all__ = ["ActiveAgent", "RunState", "reply_start"]


def reply_start(entries: Sequence[TranscriptEntry], floor: int = 0) -> int:
    """Where the trailing model reply (text and reasoning, no calls) of ``entries`` begins.

    A paused turn (``pause_turn``) and its continuation are contiguous, so the trailing
    reply is the whole answer. ``floor`` bounds the walk (a run's first own entry).
    """
    start = len(entries)
    while start > floor and isinstance(entries[start - 1], (AssistantTextEntry, ReasoningEntry)):
        start -= 1
    return start


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
    resumed_usage: Usage | None = None
    """The usage a resumed run carried in; budgets count only what is spent after it."""
    reply_floor: int = 0
    """Where the current reply began, relative to ``run_start`` (a paused turn's, when the
    previous turn paused: the answer is the paused text plus its continuation)."""
    call_ids: dict[str, int] = field(default_factory=dict)
    """Every tool-call id of this run (to its next free suffix): a new reply's ids are made
    unique against it (``model_turn.unique_call_id``)."""

    def budget_usage(self) -> Usage:
        """What this run's budget is charged: the usage since the run (re)started.

        A resumed run keeps reporting its whole usage, but a fresh budget passed to the
        resume gets its whole allowance (the spent part tripped the previous budget).
        """
        base = self.resumed_usage
        if base is None:
            return self.usage
        usage = self.usage
        return Usage(
            input_tokens=usage.input_tokens - base.input_tokens,
            output_tokens=usage.output_tokens - base.output_tokens,
            cache_read_tokens=usage.cache_read_tokens - base.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens - base.cache_write_tokens,
            requests=usage.requests - base.requests,
        )

    def trailing_reply(self) -> list[TranscriptEntry]:
        """The run's last model reply, a paused turn's text included (see ``reply_start``)."""
        transcript = self.transcript
        return transcript[reply_start(transcript, self.run_start + self.reply_floor) :]

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
