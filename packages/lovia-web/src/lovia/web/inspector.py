"""The context inspector: for one turn of a run, what the record holds and what is known of
what the model saw, computed from what the server already keeps (never by re-running).

Sources, all already stored:

* the run's event log (``run_events``): turn boundaries, the entries each turn produced,
  tool calls and results, approvals asked, compactions (with their token counts before and
  after), the run's usage totals in ``done``;
* the chat's stored transcript (completed runs), for the history before the run;
* the agent as served: its instructions (when they are a string), its declared tools, the
  provider's context window (when it knows it).

Token counts are ``lovia.context.TokenCounter`` estimates (UTF-8 bytes / 4 plus a per-entry
overhead), split by part. What the server does not keep is listed in ``missing`` rather
than guessed: the exact view sent (view injectors' reminders are transient), the
provider's per-turn input and cached tokens, results cleared or offloaded at view time,
and workspace permission decisions with their rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from lovia.agent import Agent
from lovia.transcript import (
    InputEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
)
from pydantic import BaseModel

from .errors import NotFound
from .eventlog import EventRecord
from .store.base import ChatStore

__all__ = [
    "ApprovalSeen",
    "CompactionSeen",
    "PartTokens",
    "RunUsage",
    "ToolCallSeen",
    "TurnContext",
    "turn_context",
]

NOT_RECORDED = {
    "view": "the exact view sent to the provider (after compaction and view injectors)",
    "reminders": "injected reminders (view injectors run per turn and are not stored)",
    "usage": "the provider's input and cached tokens per turn (only the run's totals are kept)",
    "cleared": "tool results cleared or offloaded at view time, and their recall handles",
    "permissions": "workspace permission decisions and the rule that decided each",
}


class PartTokens(BaseModel):
    name: Literal["system", "history", "tool_results", "reminders", "tool_schemas"]
    tokens: int | None
    """Estimated tokens; ``None`` when the part is not recorded."""
    entries: int = 0


class RunUsage(BaseModel):
    """The run's totals from its ``done`` record (the server keeps no per-turn usage)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    scope: Literal["run"] = "run"


class CompactionSeen(BaseModel):
    reason: str
    tokens_before: int
    tokens_after: int
    entries_before: int
    entries_after: int
    detail: list[str]


class ApprovalSeen(BaseModel):
    call_id: str
    name: str
    arguments: str
    decision: Literal["approved", "denied", "pending"]
    output: str | None = None


class ToolCallSeen(BaseModel):
    call_id: str
    name: str
    is_error: bool | None
    output_tokens: int | None
    """The estimated tokens of its result, as the record holds it."""


class TurnContext(BaseModel):
    """``GET /api/sessions/{id}/turns/{n}/context``."""

    session_id: str
    run_id: str
    turn: int
    turns: list[int]
    """The turns this run has logged."""
    window: int | None
    """The model's context window in tokens, when the provider knows it."""
    parts: list[PartTokens]
    record_tokens: int
    """The estimated size of the record up to this turn (the recorded parts)."""
    seen_tokens: int | None
    """The view's size after the turn's last compaction, when one happened (its estimate)."""
    usage: RunUsage | None
    compactions: list[CompactionSeen]
    approvals: list[ApprovalSeen]
    tool_calls: list[ToolCallSeen]
    produced: list[dict[str, Any]]
    """The transcript entries this turn produced, as JSON."""
    missing: list[str]


def _turn_spans(records: Sequence[EventRecord]) -> dict[int, tuple[int, int]]:
    """turn -> (index of its turn_started, index of the next turn_started or the end)."""
    starts = [
        (i, int(r.data.get("turn", 0))) for i, r in enumerate(records) if r.type == "turn_started"
    ]
    spans: dict[int, tuple[int, int]] = {}
    for k, (index, turn) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(records)
        spans.setdefault(turn, (index, end))
    return spans


def _entries_of(records: Sequence[EventRecord]) -> list[TranscriptEntry]:
    """The transcript entries the records describe, in log order."""
    out: list[TranscriptEntry] = []
    for record in records:
        if record.type == "message_completed":
            for data in record.data.get("entries", []):
                try:
                    out.append(entry_from_dict(data))
                except ValueError:
                    continue
        elif record.type == "tool_result":
            out.append(
                ToolResultEntry(
                    call_id=str(record.data.get("call_id", "")),
                    output=str(record.data.get("output", "")),
                    is_error=bool(record.data.get("is_error", False)),
                )
            )
        elif record.type == "user_injected":
            content = record.data.get("content")
            out.append(
                InputEntry(
                    role="user", content=content if isinstance(content, str) else str(content)
                )
            )
    return out


def _window(agent: Agent[Any]) -> int | None:
    configured = getattr(agent.context_policy, "context_window", None)
    if isinstance(configured, int) and not isinstance(configured, bool) and configured > 0:
        return configured
    window = getattr(agent.model, "context_window", None)
    if callable(window):
        try:
            value = window()
        except Exception:  # noqa: BLE001 - a provider that cannot say: unknown
            return None
        return value if isinstance(value, int) and value > 0 else None
    return None


def _approvals(records: Sequence[EventRecord]) -> list[ApprovalSeen]:
    results = {r.data.get("call_id"): r.data for r in records if r.type == "tool_result"}
    found: list[ApprovalSeen] = []
    for record in records:
        if record.type != "approval_required":
            continue
        call_id = str(record.data.get("call_id", ""))
        result = results.get(call_id)
        decision: Literal["approved", "denied", "pending"] = "pending"
        output = None
        if result is not None:
            output = str(result.get("output", ""))
            denied = bool(result.get("is_error")) and "denied" in output.lower()
            decision = "denied" if denied else "approved"
        found.append(
            ApprovalSeen(
                call_id=call_id,
                name=str(record.data.get("name", "")),
                arguments=str(record.data.get("arguments", "")),
                decision=decision,
                output=output,
            )
        )
    return found


async def turn_context(
    store: ChatStore,
    agents: dict[str, Agent[Any]],
    session_id: str,
    turn: int,
    *,
    run_id: str | None = None,
) -> TurnContext:
    """The inspector's answer for ``turn`` of ``run_id`` (default: the chat's latest run)."""
    from lovia.context import TokenCounter
    from lovia.transcript import entry_to_dict

    meta = await store.get_session(session_id)
    if meta is None:
        raise NotFound(f"unknown session {session_id!r}")
    if run_id is None:
        run_id = meta.active_run_id or await store.latest_run(session_id)
    elif not await store.has_run(session_id, run_id):
        raise NotFound(f"session {session_id!r} has no run {run_id!r}")
    if run_id is None:
        raise NotFound(f"session {session_id!r} has no run to inspect")
    records = await store.read_events(run_id)
    spans = _turn_spans(records)
    if turn not in spans:
        known = ", ".join(map(str, sorted(spans))) or "none (its events were pruned)"
        raise NotFound(f"run {run_id!r} has no turn {turn}", hint=f"its turns: {known}")
    start, end = spans[turn]
    agent = agents.get(meta.agent)
    counter = TokenCounter()

    stored = await store.session.load(session_id)
    run_entries = _entries_of(records)
    finished = any(r.type == "done" for r in records)
    missing = list(NOT_RECORDED.values())
    if finished and len(stored) >= len(run_entries):
        prior = stored[: len(stored) - len(run_entries)]  # ends with the run's own input
    else:
        prior = list(stored)
        missing.append("the run's input message (stored when the run ends)")
    record = prior + _entries_of(records[:start])

    history = [e for e in record if not isinstance(e, ToolResultEntry)]
    results = [e for e in record if isinstance(e, ToolResultEntry)]
    instructions = getattr(agent, "instructions", None) if agent is not None else None
    system_tokens: int | None
    if isinstance(instructions, str):
        system_tokens = counter.count_text(instructions)
    else:
        system_tokens = None
        missing.append("the system prompt (the agent's instructions are dynamic)")
    schema_tokens = counter.count_tools(list(agent.tools)) if agent is not None else None
    parts = [
        PartTokens(name="system", tokens=system_tokens, entries=1 if system_tokens else 0),
        PartTokens(name="history", tokens=counter.count(history), entries=len(history)),
        PartTokens(name="tool_results", tokens=counter.count(results), entries=len(results)),
        PartTokens(name="reminders", tokens=None),
        PartTokens(
            name="tool_schemas", tokens=schema_tokens, entries=len(agent.tools) if agent else 0
        ),
    ]
    previous_start = max((s for s, _ in spans.values() if s < start), default=0)
    compactions = [
        CompactionSeen(
            reason=str(r.data.get("reason", "")),
            tokens_before=int(r.data.get("tokens_before", 0)),
            tokens_after=int(r.data.get("tokens_after", 0)),
            entries_before=int(r.data.get("entries_before", 0)),
            entries_after=int(r.data.get("entries_after", 0)),
            detail=[str(d) for d in r.data.get("detail", [])],
        )
        for r in records[previous_start:end]
        if r.type == "context_compacted"
    ]
    done = next((r for r in records if r.type == "done"), None)
    usage_data = done.data.get("usage") if done is not None else None
    usage = RunUsage(**usage_data) if isinstance(usage_data, dict) else None
    turn_records = records[start:end]
    calls = [r for r in turn_records if r.type == "tool_call"]
    results_by_id = {r.data.get("call_id"): r.data for r in turn_records if r.type == "tool_result"}
    tool_calls = [
        ToolCallSeen(
            call_id=str(c.data.get("call_id", "")),
            name=str(c.data.get("name", "")),
            is_error=(
                bool(results_by_id[c.data.get("call_id")].get("is_error"))
                if c.data.get("call_id") in results_by_id
                else None
            ),
            output_tokens=(
                counter.count_text(str(results_by_id[c.data.get("call_id")].get("output", "")))
                if c.data.get("call_id") in results_by_id
                else None
            ),
        )
        for c in calls
    ]
    produced = [
        entry_to_dict(e)
        for e in _entries_of([r for r in turn_records if r.type == "message_completed"])
    ]
    recorded = sum(p.tokens or 0 for p in parts)
    return TurnContext(
        session_id=session_id,
        run_id=run_id,
        turn=turn,
        turns=sorted(spans),
        window=_window(agent) if agent is not None else None,
        parts=parts,
        record_tokens=recorded,
        seen_tokens=compactions[-1].tokens_after if compactions else None,
        usage=usage,
        compactions=compactions,
        approvals=_approvals(turn_records),
        tool_calls=tool_calls,
        produced=produced,
        missing=missing,
    )
