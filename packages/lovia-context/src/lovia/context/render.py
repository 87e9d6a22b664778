"""Rendering: the pure ``render_view(transcript, state)`` and the pieces it is made of.

Invariants this module owns:

* ``render_view`` is a pure function of the transcript and the sticky state: the same
  inputs give equal views, and it never mutates either.
* Markers keep the ``call_id`` and ``is_error`` of the result they replace, so a view never
  holds an orphan call or result. Markers mention ``recall_tool_result`` only when the
  agent has that tool.
* ``protected_tail_start`` and ``pair_safe_cuts`` only return cuts that split no
  call/result pair (a parallel group is one block; duplicate ids pair like parentheses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lovia.parts import TextPart
from lovia.tools.recall import RECALL_TOOL_NAME
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    leading_system_count,
)

from .prompts import SUMMARY_WRAPPER
from .state import CompactionState, OffloadRecord

__all__ = [
    "clear_marker",
    "has_image",
    "offload_marker",
    "omission_marker",
    "pair_safe_cuts",
    "protected_tail_start",
    "render_entry",
    "render_view",
    "rendered_frontier",
    "summary_entry",
]


def _recall_line(ref: str) -> str:
    return f'\n Call {RECALL_TOOL_NAME}("{ref}") to retrieve the full output.'


def clear_marker(entry: ToolResultEntry, *, recall: bool = True) -> ToolResultEntry:
    """The marker a cleared result renders as (same ``call_id`` and ``is_error``)."""
    text = "[Earlier tool result cleared to save context."
    text += (_recall_line(entry.call_id) if recall else "") + "]"
    return ToolResultEntry(call_id=entry.call_id, output=text, is_error=entry.is_error)


def offload_marker(
    entry: ToolResultEntry, record: OffloadRecord, *, recall: bool = True
) -> ToolResultEntry:
    """The marker an offloaded result renders as: a preview plus the recall reference
    (the content digest)."""
    text = (
        f"[Tool output offloaded to save context ({record.chars} chars). Preview:\n"
        f"{record.preview}\n..."
    )
    text += (_recall_line(record.digest) if recall else "") + "]"
    return ToolResultEntry(call_id=entry.call_id, output=text, is_error=entry.is_error)


def summary_entry(text: str) -> InputEntry:
    """The user entry that carries the running summary, framed as background reference."""
    return InputEntry(role="user", content=SUMMARY_WRAPPER.format(summary=text))


def omission_marker(left_out: Sequence[TranscriptEntry]) -> InputEntry:
    """The user entry that stands in for a span the last resort left out of the view: what
    was left out, and that the record still holds it."""
    users = sum(1 for e in left_out if isinstance(e, InputEntry) and e.role == "user")
    calls = sum(1 for e in left_out if isinstance(e, ToolCallEntry))
    replies = sum(1 for e in left_out if isinstance(e, AssistantTextEntry))
    parts = [
        f"{n} {noun}{'' if n == 1 else 's'}"
        for n, noun in ((users, "user message"), (replies, "assistant reply"), (calls, "tool call"))
        if n
    ]
    what = ", ".join(parts) or "earlier entries"
    return InputEntry(
        role="user",
        content=(
            f"[{len(left_out)} earlier entries ({what}) are left out of this view to fit "
            "the context window. The conversation record still holds them; this is not a "
            "new request, continue from the messages that follow.]"
        ),
    )


def rendered_frontier(state: CompactionState, body_len: int) -> tuple[int, int]:
    """``(covered, lead)`` of a view: how many body entries the summary and the left-out
    span stand in for, and how many synthetic entries (summary, marker) replace them."""
    s, o = _frontiers(state, body_len)
    return max(s, o), (1 if s else 0) + (1 if o > s else 0)


def _frontiers(state: CompactionState, body_len: int) -> tuple[int, int]:
    """The summary's and the left-out span's coverage (0 when absent or out of range)."""
    summary, omitted = state.summary, state.omitted
    s = summary.covered if summary is not None and 0 < summary.covered <= body_len else 0
    o = omitted.covered if omitted is not None and 0 < omitted.covered <= body_len else 0
    return s, o


def render_entry(
    entry: TranscriptEntry, state: CompactionState, *, recall: bool
) -> TranscriptEntry:
    """One entry as the view shows it (markers for decided results, else the entry)."""
    if not isinstance(entry, ToolResultEntry):
        return entry
    if entry.call_id in state.cleared:
        return clear_marker(entry, recall=recall)
    record = state.offloaded.get(entry.call_id)
    if record is not None:
        return offload_marker(entry, record, recall=recall)
    return entry


def render_view(
    transcript: Sequence[TranscriptEntry], state: CompactionState, *, recall: bool = True
) -> list[TranscriptEntry]:
    """The view of ``transcript`` under ``state``: the system head, the summary (when one
    covers part of the body), the marker of a left-out span (when one reaches past the
    summary) and the rest of the body with markers. Pure."""
    head = leading_system_count(transcript)
    out: list[TranscriptEntry] = list(transcript[:head])
    summarised, omitted = _frontiers(state, len(transcript) - head)
    if state.summary is not None and summarised:
        out.append(summary_entry(state.summary.text))
    if omitted > summarised:
        out.append(omission_marker(transcript[head + summarised : head + omitted]))
    start = head + max(summarised, omitted)
    if not state.cleared and not state.offloaded:
        out.extend(transcript[start:])
        return out
    out.extend(render_entry(e, state, recall=recall) for e in transcript[start:])
    return out


def pair_safe_cuts(body: Sequence[TranscriptEntry]) -> list[int]:
    """Every ``i`` in ``0..len(body)`` where ``body[:i]`` / ``body[i:]`` splits no pair.

    Calls open, results close the latest open call with their id (parentheses), so a
    parallel group and nested duplicate ids are kept whole. A result with no earlier call
    closes nothing.
    """
    open_ids: dict[str, int] = {}
    depth = 0
    cuts = [0]
    for i, e in enumerate(body):
        if isinstance(e, ToolCallEntry):
            open_ids[e.call_id] = open_ids.get(e.call_id, 0) + 1
            depth += 1
        elif isinstance(e, ToolResultEntry) and open_ids.get(e.call_id, 0) > 0:
            open_ids[e.call_id] -= 1
            depth -= 1
        if depth == 0:
            cuts.append(i + 1)
    return cuts


def _safe_cut_at_or_before(body: Sequence[TranscriptEntry], start: int) -> int:
    """The latest pair-safe cut ``<= start``, walking back from the end (O(len - cut))."""
    pending: dict[str, int] = {}
    depth = 0
    cut = len(body)
    for i in range(len(body) - 1, -1, -1):
        e = body[i]
        if isinstance(e, ToolResultEntry):
            pending[e.call_id] = pending.get(e.call_id, 0) + 1
            depth += 1
        elif isinstance(e, ToolCallEntry) and pending.get(e.call_id, 0) > 0:
            pending[e.call_id] -= 1
            depth -= 1
        if depth == 0:
            cut = i
            if cut <= start:
                return cut
    # Results whose calls are missing entirely never close; cut before all of them.
    return 0


def protected_tail_start(
    body: Sequence[TranscriptEntry],
    tokens_of: Callable[[int], int],
    keep_tokens: int,
    *,
    anchor_limit: int | None = None,
) -> int:
    """Where the verbatim tail of ``body`` starts.

    Walks back from the end while the tail fits ``keep_tokens`` (``tokens_of(i)`` is the
    rendered cost of ``body[i]``), always keeping the last entry; extends to the most recent
    user input when the tail from there costs at most ``anchor_limit``; then moves to a
    pair-safe cut so whole call/result pairs stay in the tail.
    """
    n = len(body)
    if n == 0:
        return 0
    start = n - 1
    used = tokens_of(start)
    last_user: int | None = None
    while start > 0:
        cost = tokens_of(start - 1)
        if used + cost > keep_tokens:
            break
        start -= 1
        used += cost
    for i in range(n - 1, -1, -1):
        e = body[i]
        if isinstance(e, InputEntry) and e.role == "user":
            last_user = i
            break
    if last_user is not None and last_user < start and anchor_limit is not None:
        extra = sum(tokens_of(i) for i in range(last_user, start))
        if used + extra <= anchor_limit:
            start = last_user
    return _safe_cut_at_or_before(body, start)


def has_image(entry: ToolResultEntry) -> bool:
    """Whether a result carries image parts (cheap to project, costly on the wire)."""
    return entry.parts is not None and any(not isinstance(p, TextPart) for p in entry.parts)
