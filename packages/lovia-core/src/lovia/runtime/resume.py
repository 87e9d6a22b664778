"""Resume and replay of a checkpointed run (``Runner.run(..., checkpoint=CheckpointOptions)``).

``open_checkpoint`` applies ``if_run_exists`` to what the checkpointer holds for the run:

=============  ===========  ====================  ===================  ==========
policy         nothing      running/interrupted   completed            failed
=============  ===========  ====================  ===================  ==========
resume         fresh run    resume                replay               UserError
resume_only    UserError    resume                replay               UserError
restart        fresh run    fresh run (deleted)   fresh run (deleted)  fresh run
fail           fresh run    UserError             UserError            UserError
=============  ===========  ====================  ===================  ==========

A crashed process leaves its last head ``running``: that is resumable like ``interrupted``.

**Resume** rebuilds the run exactly where it stopped. The active agent is the snapshot's
``agent_name`` looked up in the entry agent's handoff graph (transitive, cycle-safe;
unreachable is a ``UserError``: renaming an agent breaks resume of its in-flight runs). The
transcript is the session history plus the snapshot's entries (the new input is ignored),
under a freshly rendered system head. ``plan_resume`` then says how to finish the
interrupted turn at the **same turn number**: calls left without a result (a crash, a
cancel, a budget trip) are executed again, completed results never are (at-least-once); a
handoff accepted but not yet applied is applied; a final reply stored before the crash is
settled without calling the model. Input guardrails ran when the run started and do not run
again; the turn count, usage and context-policy state continue from the head.

**Replay** of a completed run returns its stored result without calling the model: only the
terminal event is emitted, hooks and guardrails do not run again, the usage folds into the
caller, ``finish_reason`` is ``None`` and structured output is rebuilt from its JSON. The
session append is re-applied (skipped when the segment is there), which heals a crash
between the checkpoint finalisation and the session append. An agent that can no longer
be reached degrades to the entry agent, with a warning.

Stored tool calls whose arguments were malformed JSON were rewritten to ``{}`` in memory
when they were rejected, after they had been checkpointed; ``restored_entries`` applies the
same rewrite to every call that has a result, so a resumed transcript is provider-valid.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..checkpointer import CheckpointOptions, RunHead, RunSnapshot
from ..exceptions import InvalidToolArguments, OutputValidationError, UserError
from ..handoff import Handoff, as_handoff
from ..messages import ToolCall
from ..tools.base import parse_tool_arguments
from ..transcript import (
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)
from .checkpoint import CheckpointWriter, record_in_session, segment_meta
from .result import build_result
from .run_state import reply_start

if TYPE_CHECKING:
    from ..agent import Agent
    from ..events import Event, HandoffOccurred
    from ..messages import Usage
    from .config import RunConfig
    from .result import RunResult
    from .run_state import RunState
    from .tool_calls import PlannedCall

__all__ = [
    "Opening",
    "ResumePlan",
    "TurnPhases",
    "agent_to_resume",
    "catch_up",
    "open_checkpoint",
    "plan_resume",
    "rehydrate_output",
    "replay",
    "resolve_resume_agent",
    "restore_head",
    "restored_entries",
]

_log = logging.getLogger("lovia.runtime")


# -- opening ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Opening:
    """What a checkpointed run starts from."""

    snapshot: RunSnapshot | None
    """The run to resume (``running``/``interrupted``) or replay (``completed``);
    ``None`` for a fresh run."""
    writer: CheckpointWriter | None
    """Where the run saves itself (``None`` when resuming from a snapshot without a store)."""


async def open_checkpoint(
    options: CheckpointOptions, *, in_session: bool = False, session_id: str | None = None
) -> Opening:
    """Apply ``options.if_run_exists`` to the stored run (see the module docstring).

    ``in_session``: the run's session already holds a segment for this ``run_id``. Only a
    replay may proceed then (any other run would end in a conflicting session append), so
    the others raise ``UserError`` before anything is deleted or any token is spent.

    Raises ``UserError`` (with a hint) when the policy refuses, and ``StoreError`` when the
    stored run is unreadable.
    """
    run_id = options.run_id
    assert run_id is not None  # CheckpointOptions fills it in
    store = options.checkpointer
    stored = await store.load(run_id) if store is not None else None
    policy = options.if_run_exists
    current = options.resume_from or stored
    if in_session and (
        policy == "restart" or current is None or current.head.status != "completed"
    ):
        raise UserError(
            f"run {run_id!r} already completed in session {session_id!r}",
            hint="a run_id is an idempotency key: pass a new run_id for a new run",
        )
    if policy == "restart":
        if stored is not None and store is not None:
            await store.delete(run_id)
        return Opening(None, _writer(options, saved=0))
    if policy == "fail" and stored is not None:
        raise UserError(
            f"run {run_id!r} already exists (status {stored.head.status!r})",
            hint="pass a new run_id, or if_run_exists='resume' to continue or replay it",
        )
    snapshot = current
    if snapshot is None:
        if policy == "resume_only":
            raise UserError(
                f"nothing is checkpointed for run {run_id!r}, so it cannot be resumed",
                hint="check the run_id and the checkpointer, or use if_run_exists='resume'",
            )
        return Opening(None, _writer(options, saved=0))
    if snapshot.head.status == "failed":
        error = snapshot.head.error or {}
        raise UserError(
            f"run {run_id!r} failed ({error.get('type', 'error')}: {error.get('message', '')}) "
            "and cannot be resumed",
            hint="use if_run_exists='restart' to run it again from the new input",
        )
    return Opening(snapshot, _writer(options, saved=_saved_count(options, stored)))


def _saved_count(options: CheckpointOptions, stored: RunSnapshot | None) -> int:
    """How many of the resumed run's entries the store already holds.

    ``resume_from`` must match what the store holds (or the store must hold nothing).
    """
    if stored is None:
        return 0
    if options.resume_from is not None and stored.entries != options.resume_from.entries:
        raise UserError(
            f"resume_from does not match what the checkpointer holds for run {options.run_id!r}",
            hint="resume from checkpointer.load(run_id), or pass a checkpointer that does "
            "not hold this run",
        )
    return len(stored.entries)


def _writer(options: CheckpointOptions, *, saved: int) -> CheckpointWriter | None:
    if options.checkpointer is None:
        return None
    assert options.run_id is not None
    return CheckpointWriter(
        options.checkpointer,
        options.run_id,
        saved=saved,
        delete_on_success=options.delete_on_success,
    )


# -- agents and entries -------------------------------------------------------------------


def resolve_resume_agent(entry: Agent[Any], name: str) -> Agent[Any] | None:
    """The agent called ``name`` among ``entry`` and every agent its handoffs reach.

    Breadth-first from ``entry``, so the nearest match wins; cycles are visited once.
    ``None`` when no reachable agent has that name.
    """
    seen = {id(entry)}
    queue: deque[Agent[Any]] = deque([entry])
    while queue:
        agent = queue.popleft()
        if agent.name == name:
            return agent
        for item in agent.handoffs:
            target = as_handoff(item).target
            if id(target) not in seen:
                seen.add(id(target))
                queue.append(target)
    return None


def agent_to_resume(entry: Agent[Any], snapshot: RunSnapshot) -> Agent[Any]:
    """The agent that was active when the run stopped, found from ``entry``.

    Raises ``UserError`` when no agent of that name is reachable through handoffs.
    """
    name = snapshot.head.agent_name
    agent = resolve_resume_agent(entry, name)
    if agent is None:
        raise UserError(
            f"run {snapshot.run_id!r} stopped in agent {name!r}, which is not reachable "
            f"from {entry.name!r} through handoffs",
            hint="resume with the same entry agent; renaming or removing an agent breaks "
            "resume of its in-flight runs (if_run_exists='restart' starts over)",
        )
    return agent


def restore_head(state: RunState, head: RunHead) -> None:
    """Carry the stored turn count, usage, last input tokens, policy state and compaction
    notices into ``state``."""
    state.turn = head.turns
    state.notices.extend(head.notices)
    state.usage.add(head.usage)
    state.resumed_usage = head.usage.copy()
    state.last_input_tokens = head.last_input_tokens
    if head.context_state:
        state.context_scratch = dict(head.context_state)


def restored_entries(snapshot: RunSnapshot) -> list[TranscriptEntry]:
    """The snapshot's entries with malformed arguments of answered calls rewritten to ``{}``."""
    answered = _answered_calls(snapshot.entries)
    out = list(snapshot.entries)
    for i in answered:
        call = out[i]
        assert isinstance(call, ToolCallEntry)
        try:
            parse_tool_arguments(call.arguments)
        except InvalidToolArguments:
            out[i] = ToolCallEntry(call.call_id, call.name, "{}")
    return out


def _answered_calls(entries: Sequence[TranscriptEntry]) -> list[int]:
    """Indexes of the calls that have a result (duplicate ids pair by occurrence)."""
    calls = {i for i, e in enumerate(entries) if isinstance(e, ToolCallEntry)}
    return sorted(calls - set(_dangling_calls(entries)))


def _dangling_calls(entries: Sequence[TranscriptEntry]) -> list[int]:
    """Indexes of the calls without a result, in request order (pairing by occurrence)."""
    open_calls: dict[str, deque[int]] = {}
    for i, entry in enumerate(entries):
        if isinstance(entry, ToolCallEntry):
            open_calls.setdefault(entry.call_id, deque()).append(i)
        elif isinstance(entry, ToolResultEntry):
            pending = open_calls.get(entry.call_id)
            if pending:
                pending.popleft()
    return sorted(i for pending in open_calls.values() for i in pending)


# -- finishing the interrupted turn -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """How a resumed run finishes the turn it was interrupted in (indexes are into the
    run's own entries)."""

    pending: tuple[int, ...] = ()
    """Calls without a result, to execute again in request order."""
    handoff: Handoff | None = None
    """A handoff of the last turn that was accepted (it has a result) but not yet applied."""
    final_reply: tuple[TranscriptEntry, ...] = ()
    """The last turn's reply when it had no tool calls: settle it, do not call the model."""


def plan_resume(entries: Sequence[TranscriptEntry], handoffs: Mapping[str, Handoff]) -> ResumePlan:
    """Plan the catch-up for a run whose own entries are ``entries``.

    ``handoffs`` are the resumed agent's handoff tools by name: a successful result of one
    of them in the last turn means the crash came before the swap at turn end.
    """
    pending = tuple(_dangling_calls(entries))
    tail = len(entries)
    while tail and isinstance(entries[tail - 1], (ToolCallEntry, ToolResultEntry)):
        tail -= 1
    if tail == len(entries):
        return ResumePlan(pending, None, tuple(entries[reply_start(entries) :]))
    handoff = _accepted_handoff(entries[tail:], handoffs)
    return ResumePlan(pending, handoff, ())


def _accepted_handoff(
    group: Sequence[TranscriptEntry], handoffs: Mapping[str, Handoff]
) -> Handoff | None:
    ok = {e.call_id for e in group if isinstance(e, ToolResultEntry) and not e.is_error}
    for entry in group:
        if isinstance(entry, ToolCallEntry) and entry.call_id in ok:
            handoff = handoffs.get(entry.name)
            if handoff is not None:
                return handoff
    return None


class TurnPhases(Protocol):
    """The phases of a turn that ``catch_up`` drives (``RunLoop`` implements them)."""

    def run_tools(self, state: RunState, calls: list[PlannedCall]) -> AsyncGenerator[Event, None]:
        """The tool phase for ``calls``, yielding its events."""
        ...

    async def apply_handoff(self, state: RunState) -> HandoffOccurred | None:
        """Apply the pending handoff, if any."""
        ...

    async def final_output(
        self, state: RunState, entries: Sequence[TranscriptEntry]
    ) -> tuple[bool, Any]:
        """Settle a final reply: ``(True, output)``, or ``(False, None)`` after a repair prompt."""
        ...

    async def finish(self, state: RunState, output: Any) -> None:
        """End the run successfully on ``output`` (result built, run persisted)."""
        ...


async def catch_up(
    phases: TurnPhases, state: RunState, plan: ResumePlan
) -> AsyncGenerator[Event, None]:
    """Finish the interrupted turn (same turn number); calls ``phases.finish`` if it ends.

    Emits the drained calls' tool events and a ``HandoffOccurred`` for an applied handoff.
    """
    from ..handoff import _HandoffSignal
    from .tool_calls import PlannedCall

    if plan.handoff is not None:
        # Set before the drain, so a dangling second handoff is rejected (first one wins).
        state.pending_handoff = _HandoffSignal(plan.handoff)
    if plan.pending:
        own = state.run_start
        calls = []
        for i in plan.pending:
            entry = state.transcript[own + i]
            assert isinstance(entry, ToolCallEntry)
            calls.append(PlannedCall(ToolCall(entry.call_id, entry.name, entry.arguments), own + i))
        async with aclosing(phases.run_tools(state, calls)) as events:
            async for event in events:
                yield event
    handoff = await phases.apply_handoff(state)
    if handoff is not None:
        yield handoff
        return
    if plan.final_reply and not plan.pending:
        done, output = await phases.final_output(state, plan.final_reply)
        if done:
            await phases.finish(state, output)


# -- replay -------------------------------------------------------------------------------


async def replay(
    config: RunConfig,
    snapshot: RunSnapshot,
    *,
    usage: Usage,
    writer: CheckpointWriter | None,
    heal: bool,
) -> RunResult[Any]:
    """The stored result of a completed run (see the module docstring).

    ``usage`` is the run's live usage (the stored usage folds into it). ``heal``: the
    session lacks the run's segment (a crash after the checkpoint was finalised), so append
    it now.
    """
    head = snapshot.head
    entry = config.agent
    agent = resolve_resume_agent(entry, head.agent_name)
    if agent is None:
        _log.warning(
            "replay: agent %r of run %s is no longer reachable from %r; using the entry agent",
            head.agent_name,
            snapshot.run_id,
            entry.name,
        )
        agent = entry
    output_type = config.output_type if config.output_type is not None else agent.output_type
    output = rehydrate_output(head.output, output_type, run_id=snapshot.run_id)
    entries = restored_entries(snapshot)
    usage.add(head.usage)
    session = config.session if heal else None
    if session is not None:
        _log.info("replay: run %s was missing from its session; appended", snapshot.run_id)
    await record_in_session(
        session,
        config.session_id,
        entries,
        run_id=snapshot.run_id,
        meta=segment_meta(head.context_state, head.notices, head.last_input_tokens),
        writer=writer,
    )
    _log.info("run.replayed: run_id=%s agent=%s", snapshot.run_id, agent.name)
    return build_result(
        output,
        entries,
        agent=agent,
        usage=usage,
        turns=head.turns,
        finish_reason=None,
        last_input_tokens=head.last_input_tokens,
        run_id=snapshot.run_id,
        session_id=config.session_id,
    )


def rehydrate_output(value: Any, output_type: Any, *, run_id: str = "") -> Any:
    """Rebuild a completed run's output from its stored JSON as ``output_type``.

    Text output comes back as is. Raises ``OutputValidationError`` when the stored value no
    longer fits the type (the type changed since the run completed).
    """
    from ..output import is_text_output

    if is_text_output(output_type):
        return value
    from pydantic import ValidationError

    from ..schema import coerce_output

    try:
        return coerce_output(output_type, value)
    except ValidationError as exc:
        name = getattr(output_type, "__name__", repr(output_type))
        raise OutputValidationError(
            f"the stored output of run {run_id!r} does not fit {name}: {exc.error_count()} "
            "validation error(s)",
            raw=repr(value)[:500],
            output_type_name=str(name),
            hint="the output type changed since the run completed; replay with the original "
            "type, or use if_run_exists='restart'",
        ) from exc
