"""The context inspector: for one turn of a run, what the model was sent, next to what the
record holds, computed from what the server already keeps (never by re-running).

Sources, all already stored:

* the run's event log (``run_events``): turn boundaries, the entries each turn produced,
  tool calls and results, approvals asked, compactions, the run's usage totals in
  ``done``, and the recorder's ``context_view`` / ``context_permissions`` records
  (``lovia.web.recorder``): per model call, the view sent as segments of the record plus
  the literals that are not in it, the provider's reported usage, the tool schemas; per
  turn, the workspace's permission decisions with the rule that decided;
* the chat's stored transcript (``read_segments``: the history before the run and the
  run's own segment) or, for a run still going, its checkpoint: the record the segments
  point into;
* the agent as served: the context window (when the policy or the provider knows it).

A recorded turn answers with the exact view: every entry marked ``system``, ``record``,
``summary``, ``cleared``, ``offloaded``, ``omitted``, ``reminder`` (a view injector's),
``replaced`` or ``injected``; its token estimate by part (``lovia.context.TokenCounter``:
UTF-8 bytes / 4 plus a per-entry overhead) against the window; the provider's input and
cached tokens for that call; the markers' recall handles; the permission decisions. The
last call of the turn is shown (a retried call is counted in ``attempts``).

A run logged before the recorder existed gets the old estimate from the record
(``source="estimated"``), and ``missing`` lists what is not known. A recording whose
record no longer lines up (the chat was rewound or edited since) keeps its literals and
usage but not the record entries, and says so. A row edited by hand or cut short is read
field by field: a value of the wrong type or out of range is left out and named in
``missing``; record entries past the call's record (``n``) or past the record stored now
are named there once, not listed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from lovia.agent import Agent
from lovia.transcript import (
    InputEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
)
from pydantic import BaseModel, ValidationError

from .errors import NotFound
from .eventlog import EventRecord
from .recorder import CONTEXT_PERMISSIONS, CONTEXT_VIEW, entry_mark, record_digest
from .store.base import ChatStore

__all__ = [
    "ApprovalSeen",
    "CallUsage",
    "ClearedSeen",
    "CompactionSeen",
    "PartTokens",
    "PermissionSeen",
    "RunUsage",
    "ToolCallSeen",
    "TurnContext",
    "ViewEntry",
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
    """Estimated tokens; ``None`` when the part is not known."""
    entries: int = 0


ViewSource = Literal[
    "system",
    "record",
    "summary",
    "cleared",
    "offloaded",
    "omitted",
    "reminder",
    "replaced",
    "injected",
]


class ViewEntry(BaseModel):
    """One entry of the view sent."""

    source: ViewSource
    """``system`` (the head) and ``record`` are the record's own entries; the rest are not
    in the record: the context policy's (``summary``, ``cleared``, ``offloaded``,
    ``omitted``, ``replaced``) or a view injector's (``reminder``, ``injected``)."""
    index: int | None
    """The entry's position in the record (the system head is 0); for a marker, the
    position of the result it stands for; ``None`` when unknown."""
    tokens: int | None
    entry: dict[str, Any] | None
    """The entry as sent (``lovia.transcript`` JSON); ``None`` when the record no longer
    holds it."""
    recall: str | None = None
    """For a cleared or offloaded result: the handle ``recall_tool_result`` takes."""


class CallUsage(BaseModel):
    """What the provider reported for the turn's model call."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    scope: Literal["call"] = "call"


class ClearedSeen(BaseModel):
    """A result the view showed as a marker instead of its output."""

    call_id: str
    kind: Literal["cleared", "offloaded", "replaced"]
    recall: str | None
    index: int | None
    """The position of the full result in the record."""
    tokens: int | None
    """The marker's estimated tokens."""
    original_tokens: int | None
    """The full result's estimated tokens (what the marker saved, with ``tokens``)."""


class PermissionSeen(BaseModel):
    """A workspace permission decision of the turn, with the rule that decided."""

    kind: Literal["path", "command"]
    subject: str
    op: Literal["read", "write", "run"]
    decision: Literal["allow", "ask", "deny"]
    rule: str
    pattern: str | None
    enforced: bool
    """Whether the operation itself was gated (``False``: the check ahead of it only)."""


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
    source: Literal["recorded", "estimated"]
    """``recorded``: from what the model was sent; ``estimated``: from the record only."""
    window: int | None
    """The model's context window in tokens, when the provider knows it."""
    parts: list[PartTokens]
    """The view's estimated tokens by part (``estimated``: the record's up to the turn)."""
    record_tokens: int
    """The estimated size of the record up to this turn's call."""
    seen_tokens: int | None
    """The estimated size of the view sent (``estimated``: after the turn's last
    compaction, when one happened)."""
    model: str | None = None
    """``provider:model`` of the recorded call."""
    response_format: dict[str, Any] | None = None
    """The structured-output schema sent with the call (an ``output_type`` on a provider
    with native JSON schema); ``None`` when none was sent."""
    attempts: int = 0
    """Model calls recorded for the turn (more than one after a retry); the last is shown."""
    side_calls: int = 0
    """Other calls on the run's provider during the turn, not the turn's own: a
    summariser's folds (``SummarizeHistory``). Their bytes count in ``stored_bytes``."""
    call_usage: CallUsage | None = None
    """The provider's report for the call shown (input and cached tokens)."""
    view: list[ViewEntry] = []
    cleared: list[ClearedSeen] = []
    permissions: list[PermissionSeen] = []
    stored_bytes: int = 0
    """Bytes the recorder logged for this turn (the compact form, not the view)."""
    usage: RunUsage | None
    compactions: list[CompactionSeen]
    approvals: list[ApprovalSeen]
    tool_calls: list[ToolCallSeen]
    produced: list[dict[str, Any]]
    """The transcript entries this turn produced, as JSON."""
    missing: list[str]


def _int(value: object, default: int) -> int:
    """``value`` when the log holds a real integer there, else ``default`` (a row edited by
    hand: ``int()`` would raise on ``None`` or ``"x"``, and ``True`` is no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _turn_spans(records: Sequence[EventRecord]) -> dict[int, tuple[int, int]]:
    """turn -> (index of its turn_started, index of the next turn_started or the end)."""
    starts = [
        (i, _int(r.data.get("turn"), 0)) for i, r in enumerate(records) if r.type == "turn_started"
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


_REFUSALS = ("Tool error: the call was denied (", "Tool error: the approval check failed (")
"""How lovia-core's tool runner words the result of a call it refused (``_reject``): an
approved call whose own error merely says "denied" (a remote's "access denied") is not one
(``test_workspace_decisions_with_their_rules`` and the approval tests pin the wording
with real denials)."""


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
            denied = bool(result.get("is_error")) and output.startswith(_REFUSALS)
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


@dataclass(slots=True)
class _Call:
    """One recorded model call, decoded."""

    turn: int
    segs: list[Any]
    lits: dict[int, dict[str, Any]]
    system: str | None
    tools: dict[str, Any] | None
    model: str | None
    response_format: dict[str, Any] | None
    n: int
    last: str | None
    digest: str | None
    usage: dict[str, Any] | None
    status: str
    size: int
    aside: bool


@dataclass(slots=True)
class _Recording:
    calls: list[_Call] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    garbled: list[str] = field(default_factory=list)
    """What could not be read (a row edited by hand), for ``missing``."""


def _decode(records: Sequence[EventRecord]) -> _Recording:
    """Replay the recorder's records: each call's full segment list and the literals then
    known (a ``start`` record begins a new recorder: a resumed run)."""
    out = _Recording()
    lits: dict[int, dict[str, Any]] = {}
    segs: list[Any] = []
    system: str | None = None
    tools: dict[str, Any] | None = None
    model: str | None = None
    response_format: dict[str, Any] | None = None
    for record in records:
        data = record.data
        if record.type == CONTEXT_PERMISSIONS:
            decisions = data.get("decisions")
            for d in decisions if isinstance(decisions, list) else [decisions]:
                if isinstance(d, dict):
                    out.decisions.append(d)
                else:
                    out.garbled.append(f"a permission decision of seq {record.seq} (garbled)")
            continue
        if record.type != CONTEXT_VIEW:
            continue
        if data.get("start"):
            lits, segs, system, tools, model = {}, [], None, None, None
            response_format = None
        else:
            lits = dict(lits)  # a call keeps the literals known at its time
        found_lits = data.get("lits", [])
        for lit in found_lits if isinstance(found_lits, list) else []:
            if isinstance(lit, dict) and _int(lit.get("id"), -1) >= 0:
                lits[lit["id"]] = lit
        found_segs = data.get("segs", [])
        segs = segs[: max(0, _int(data.get("keep"), 0))] + [
            s for s in (found_segs if isinstance(found_segs, list) else []) if _is_seg(s)
        ]
        if "system" in data:
            system = _str(data["system"])
        if "tools" in data:
            tools = data["tools"] if isinstance(data["tools"], dict) else None
        if "model" in data:
            model = _str(data["model"])
        if "response_format" in data:  # logged when it changes, like the tools
            found = data["response_format"]
            response_format = found if isinstance(found, dict) else None
        usage = data.get("usage")
        out.calls.append(
            _Call(
                turn=_int(data.get("turn"), -1),  # unknown: shown for no turn
                segs=segs,
                lits=lits,
                system=system,
                tools=tools,
                model=model,
                response_format=response_format,
                n=max(0, _int(data.get("n"), 0)),
                last=_str(data.get("last")),
                digest=_str(data.get("digest")),
                usage=usage if isinstance(usage, dict) else None,
                status=str(data.get("status", "")),
                size=len(json.dumps(data, separators=(",", ":"), ensure_ascii=False)),
                aside=data.get("aside") is True,
            )
        )
    return out


def _is_seg(seg: object) -> bool:
    """A literal's number or a range ``[a, b]`` with ``0 <= a <= b`` (what the recorder
    writes); anything else is a hand-edited row's and is left out."""
    if isinstance(seg, list):
        return len(seg) == 2 and all(_int(x, -1) >= 0 for x in seg) and seg[0] <= seg[1]
    return _int(seg, -1) >= 0


async def _stored_record(
    store: ChatStore, session_id: str, run_id: str, records: Sequence[EventRecord]
) -> list[TranscriptEntry]:
    """The run's record without its system head: the history it started from and its
    own entries (its stored segment, else its checkpoint, else what its log shows)."""
    from lovia.runtime.resume import restored_entries
    from lovia.session import read_segments

    segments = await read_segments(store.session, session_id)
    mine = next((i for i, seg in enumerate(segments) if seg.run_id == run_id), None)
    if mine is not None:
        history = [e for seg in segments[:mine] for e in seg.entries]
        return history + list(segments[mine].entries)
    history = [e for seg in segments for e in seg.entries]
    snapshot = await store.checkpointer.load(run_id)
    if snapshot is not None:
        return history + restored_entries(snapshot)
    return history + _entries_of(records)


async def turn_context(
    store: ChatStore,
    agents: dict[str, Agent[Any]],
    session_id: str,
    turn: int,
    *,
    run_id: str | None = None,
) -> TurnContext:
    """The inspector's answer for ``turn`` of ``run_id`` (default: the chat's latest run)."""
    meta = await store.get_session(session_id)
    if meta is None:
        raise NotFound(f"unknown session {session_id!r}", hint="list chats: GET /api/sessions")
    if run_id is None:
        run_id = meta.active_run_id or await store.latest_run(session_id)
    elif not await store.has_run(session_id, run_id):
        raise NotFound(
            f"session {session_id!r} has no run {run_id!r}",
            hint="omit run_id for the chat's latest run",
        )
    if run_id is None:
        raise NotFound(f"session {session_id!r} has no run to inspect", hint="send a message first")
    records = await store.read_events(run_id)
    spans = _turn_spans(records)
    if turn not in spans:
        known = ", ".join(map(str, sorted(spans))) or "none (its events were pruned)"
        raise NotFound(f"run {run_id!r} has no turn {turn}", hint=f"its turns: {known}")
    agent = agents.get(meta.agent)
    recording = _decode(records)
    calls = [c for c in recording.calls if c.turn == turn]
    if not calls:
        return await _estimated(store, agent, session_id, run_id, turn, records, spans)
    return await _recorded(store, agent, session_id, run_id, turn, records, spans, recording)


def _common(
    agent: Agent[Any] | None,
    records: Sequence[EventRecord],
    spans: dict[int, tuple[int, int]],
    turn: int,
) -> dict[str, Any]:
    """The fields both answers share: compactions, approvals, tool calls, produced entries,
    the run's usage totals."""
    from lovia.context import TokenCounter
    from lovia.transcript import entry_to_dict

    counter = TokenCounter()
    start, end = spans[turn]
    previous_start = max((s for s, _ in spans.values() if s < start), default=0)
    compactions = [
        CompactionSeen(
            reason=str(r.data.get("reason", "")),
            tokens_before=_int(r.data.get("tokens_before"), 0),
            tokens_after=_int(r.data.get("tokens_after"), 0),
            entries_before=_int(r.data.get("entries_before"), 0),
            entries_after=_int(r.data.get("entries_after"), 0),
            detail=[str(d) for d in detail] if isinstance(detail, list) else [],
        )
        for r in records[previous_start:end]
        if r.type == "context_compacted"
        for detail in (r.data.get("detail"),)
    ]
    done = next((r for r in records if r.type == "done"), None)
    usage_data = done.data.get("usage") if done is not None else None
    try:
        run_usage = RunUsage.model_validate(usage_data) if isinstance(usage_data, dict) else None
    except ValidationError:  # a hand-edited row: the totals are not known
        run_usage = None
    turn_records = records[start:end]
    results_by_id = {r.data.get("call_id"): r.data for r in turn_records if r.type == "tool_result"}
    tool_calls = []
    for c in (r for r in turn_records if r.type == "tool_call"):
        result = results_by_id.get(c.data.get("call_id"))
        tool_calls.append(
            ToolCallSeen(
                call_id=str(c.data.get("call_id", "")),
                name=str(c.data.get("name", "")),
                is_error=bool(result.get("is_error")) if result is not None else None,
                output_tokens=(
                    counter.count_text(str(result.get("output", "")))
                    if result is not None
                    else None
                ),
            )
        )
    produced = [
        entry_to_dict(e)
        for e in _entries_of([r for r in turn_records if r.type == "message_completed"])
    ]
    return {
        "turns": sorted(spans),
        "window": _window(agent) if agent is not None else None,
        "usage": run_usage,
        "compactions": compactions,
        "approvals": _approvals(turn_records),
        "tool_calls": tool_calls,
        "produced": produced,
    }


_MARKERS = frozenset({"cleared", "offloaded", "replaced"})
_SOURCES = frozenset(get_args(ViewSource))


async def _recorded(
    store: ChatStore,
    agent: Agent[Any] | None,
    session_id: str,
    run_id: str,
    turn: int,
    records: Sequence[EventRecord],
    spans: dict[int, tuple[int, int]],
    recording: _Recording,
) -> TurnContext:
    from lovia.context import TokenCounter
    from lovia.transcript import entry_to_dict

    calls = [c for c in recording.calls if c.turn == turn]
    own = [c for c in calls if not c.aside] or calls  # (only asides: show what there is)
    call = own[-1]
    counter = TokenCounter()
    missing: list[str] = []
    body = await _stored_record(store, session_id, run_id, records)
    head = [InputEntry("system", call.system)] if call.system is not None else []
    record: list[TranscriptEntry] = head + body
    aligned = call.n <= len(record) and (
        call.n == 0 or call.last is None or entry_mark(record[call.n - 1]) == call.last
    )
    if aligned and call.digest is not None:  # (absent in a recording older than it)
        # Same places, same kinds of entry, yet other text: a rewind and a new message.
        aligned = record_digest(record[len(head) : call.n]) == call.digest
    if not aligned:
        missing.append(
            "the record entries of the view: the stored chat no longer lines up with the "
            "recording (it was rewound or edited since)"
        )
    results_at = {
        e.call_id: i for i, e in enumerate(record[: call.n]) if isinstance(e, ToolResultEntry)
    }
    view: list[ViewEntry] = []
    cleared: list[ClearedSeen] = []
    sums: dict[str, list[int]] = {name: [0, 0] for name in ("system", "history", "results")}
    sums["reminders"] = [0, 0]

    def add(part: str, tokens: int | None) -> None:
        sums[part][0] += tokens or 0
        sums[part][1] += 1

    missing.extend(recording.garbled)
    # The recorder never points past the record it saw (``n``); what lies past the record
    # stored now (a rewind, a hand-edited row) is named once, not listed entry by entry.
    known = min(call.n, len(record))
    for seg in call.segs:
        if isinstance(seg, list):
            if seg[1] > known:
                missing.append(
                    f"record entries {max(seg[0], known)} to {seg[1] - 1} of the view "
                    "(past the record stored or the call's own)"
                )
            for pos in range(seg[0], min(seg[1], known)):
                source: ViewSource = "system" if head and pos == 0 else "record"
                entry = record[pos] if aligned and pos < len(record) else None
                tokens = counter.count_entry(entry) if entry is not None else None
                view.append(
                    ViewEntry(
                        source=source,
                        index=pos,
                        tokens=tokens,
                        entry=entry_to_dict(entry) if entry is not None else None,
                    )
                )
                if source == "system":
                    add("system", tokens)
                elif isinstance(entry, ToolResultEntry):
                    add("results", tokens)
                else:
                    add("history", tokens)
            continue
        lit = call.lits.get(seg)
        if lit is None:  # a log trimmed by hand: say so rather than guess
            missing.append(f"literal {seg} of the view (its record was not found)")
            continue
        found_kind = str(lit.get("kind"))
        kind = cast("ViewSource", found_kind if found_kind in _SOURCES else "injected")
        try:
            literal: TranscriptEntry | None = entry_from_dict(lit.get("entry"))
        except ValueError:
            literal = None
            missing.append(f"literal {seg} of the view (its entry is garbled)")
        tokens = counter.count_entry(literal) if literal is not None else None
        recall = _str(lit.get("recall"))
        index = None
        if isinstance(literal, ToolResultEntry):
            index = results_at.get(literal.call_id) if aligned else None
        view.append(
            ViewEntry(
                source=kind,
                index=index,
                tokens=tokens,
                entry=entry_to_dict(literal) if literal is not None else None,
                recall=recall,
            )
        )
        if kind in _MARKERS and isinstance(literal, ToolResultEntry):
            original = record[index] if index is not None else None
            cleared.append(
                ClearedSeen(
                    call_id=literal.call_id,
                    kind=kind,  # type: ignore[arg-type]  # one of _MARKERS
                    recall=recall,
                    index=index,
                    tokens=tokens,
                    original_tokens=counter.count_entry(original) if original else None,
                )
            )
        if kind == "reminder":
            add("reminders", tokens)
        elif isinstance(literal, ToolResultEntry):
            add("results", tokens)
        else:
            add("history", tokens)
    tools = call.tools or {}
    tool_tokens = tools.get("tokens")
    tool_names = tools.get("names")
    parts = [
        PartTokens(name="system", tokens=sums["system"][0], entries=sums["system"][1]),
        PartTokens(name="history", tokens=sums["history"][0], entries=sums["history"][1]),
        PartTokens(name="tool_results", tokens=sums["results"][0], entries=sums["results"][1]),
        PartTokens(name="reminders", tokens=sums["reminders"][0], entries=sums["reminders"][1]),
        PartTokens(
            name="tool_schemas",
            tokens=tool_tokens if isinstance(tool_tokens, int) else None,
            entries=len(tool_names) if isinstance(tool_names, list) else 0,
        ),
    ]
    call_usage = None
    if call.usage is None:
        missing.append("the provider's usage for this call (the provider reported none)")
    else:
        try:
            call_usage = CallUsage.model_validate(call.usage)
        except ValidationError:
            missing.append("the provider's usage for this call (its record is garbled)")
    record_tokens = counter.count(record[: call.n]) if aligned else 0
    # The check ahead of an operation and the operation's own gate are one decision here,
    # shown where it first happened; it was enforced when either of the pair was (the
    # check alone says "checked only", which the gate that followed it proves wrong).
    shown: dict[tuple[Any, ...], PermissionSeen] = {}
    for d in recording.decisions:
        if d.get("turn") != turn:
            continue
        key = (d.get("kind"), d.get("subject"), d.get("op"), d.get("decision"), d.get("rule"))
        try:
            decision = PermissionSeen.model_validate(d)
        except ValidationError:
            missing.append("a permission decision of this turn (its record is garbled)")
            continue
        first = shown.setdefault(key, decision)
        first.enforced = first.enforced or decision.enforced
    permissions = list(shown.values())
    return TurnContext(
        session_id=session_id,
        run_id=run_id,
        turn=turn,
        source="recorded",
        parts=parts,
        record_tokens=record_tokens,
        seen_tokens=sum(p.tokens or 0 for p in parts),
        model=call.model,
        response_format=call.response_format,
        attempts=len(own),
        side_calls=len(calls) - len(own),
        call_usage=call_usage,
        view=view,
        cleared=cleared,
        permissions=permissions,
        stored_bytes=sum(c.size for c in calls),
        missing=missing,
        **_common(agent, records, spans, turn),
    )


async def _estimated(
    store: ChatStore,
    agent: Agent[Any] | None,
    session_id: str,
    run_id: str,
    turn: int,
    records: Sequence[EventRecord],
    spans: dict[int, tuple[int, int]],
) -> TurnContext:
    """A turn with no recording (a run from before the recorder): the record's estimate."""
    from lovia.context import TokenCounter

    start, _ = spans[turn]
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
    common = _common(agent, records, spans, turn)
    compactions: list[CompactionSeen] = common["compactions"]
    return TurnContext(
        session_id=session_id,
        run_id=run_id,
        turn=turn,
        source="estimated",
        parts=parts,
        record_tokens=sum(p.tokens or 0 for p in parts),
        seen_tokens=compactions[-1].tokens_after if compactions else None,
        missing=missing,
        **common,
    )
