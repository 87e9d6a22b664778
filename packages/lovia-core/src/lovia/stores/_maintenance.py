"""Store-level session maintenance, planned as pure functions so every backend agrees.

The backends read a session's segments inside one write transaction, ask these functions
what to change (the database stores get it as row updates: ``trim_rows``, ``rewind_rows``)
and apply the plan in that same transaction (so an error rolls it all back). Both
operations keep the transcript tool-consistent: trimming only shortens result text, and a
rewind never leaves a call without its result.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..exceptions import UserError
from ..transcript import ToolResultEntry, TranscriptEntry, drop_dangling_tool_calls
from ._rows import ROW_VERSION, SessionRow, decode_entries, encode_entries

_TRIM_MARKER = "\n[... {n} chars trimmed from this stored tool result]"
_TRIM_MARKER_RE = re.compile(r"\n\[\.\.\. \d+ chars trimmed from this stored tool result\]\Z")


def check_trim_args(keep_chars: int, keep_runs: int) -> None:
    """Refuse negative or non-integer trim arguments."""
    hint = "e.g. trim_tool_results(session_id, keep_chars=400, keep_runs=1)"
    _check_count("keep_chars", keep_chars, hint=hint)
    _check_count("keep_runs", keep_runs, hint=hint)


def check_rewind_args(keep_entries: int) -> None:
    """Refuse a negative or non-integer ``keep_entries``."""
    _check_count(
        "keep_entries",
        keep_entries,
        hint="it counts entries of the flat load(); 0 empties the session",
    )


def _check_count(name: str, value: int, *, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{name} must be an int >= 0, got {value!r}", hint=hint)


def trim_segment(
    entries: Sequence[TranscriptEntry], keep_chars: int
) -> list[TranscriptEntry] | None:
    """``entries`` with long result outputs cut to ``keep_chars``, or ``None`` if unchanged.

    A trimmed output ends with a marker saying how much was cut; an output already carrying
    the marker is left alone, so trimming twice changes nothing. ``raw`` is dropped from a
    trimmed result (it is the large value); ``call_id``, ``is_error`` and parts are kept.
    """
    out: list[TranscriptEntry] = []
    changed = False
    for e in entries:
        if (
            isinstance(e, ToolResultEntry)
            and len(e.output) > keep_chars
            and not _TRIM_MARKER_RE.search(e.output)
        ):
            cut = len(e.output) - keep_chars
            text = e.output[:keep_chars] + _TRIM_MARKER.format(n=cut)
            e = dataclasses.replace(e, output=text, raw=None)
            changed = True
        out.append(e)
    return out if changed else None


_Update = tuple[str, int, int]  # a session_runs row's new (entries, version) and its id


def trim_rows(
    rows: Sequence[SessionRow], keep_chars: int, keep_runs: int
) -> tuple[list[_Update], int]:
    """``trim_segment`` over every row but the last ``keep_runs`` (those are not decoded):
    the updates for the rows that change, and how many tool results were cut."""
    updates: list[_Update] = []
    trimmed = 0
    for row_id, run_id, entries, _meta, version in rows[: max(0, len(rows) - keep_runs)]:
        old = decode_entries(entries, version, run_id=run_id, row=row_id)
        new = trim_segment(old, keep_chars)
        if new is not None:
            trimmed += count_trimmed(old, new)
            updates.append((encode_entries(new), ROW_VERSION, row_id))
    return updates, trimmed


def count_trimmed(old: Sequence[TranscriptEntry], new: Sequence[TranscriptEntry]) -> int:
    """How many entries ``trim_segment`` replaced (it keeps the others as they were)."""
    return sum(a is not b for a, b in zip(old, new, strict=True))


@dataclass(frozen=True, slots=True)
class RewindPlan:
    """What a rewind keeps: whole segments, then at most one truncated segment."""

    keep_segments: int
    """How many leading segments stay untouched."""
    truncated: list[TranscriptEntry] | None
    """New entries of the segment right after them (its meta is cleared), or ``None``."""
    removed: int
    """How many entries the rewind removes from the flat transcript."""


def plan_rewind(segments: Sequence[Sequence[TranscriptEntry]], keep_entries: int) -> RewindPlan:
    """Keep the first ``keep_entries`` entries of the flat transcript, tool-consistently.

    Later segments go; the segment the cut lands in keeps its prefix minus any call left
    without a result (so slightly fewer than ``keep_entries`` may remain); a truncated
    segment left empty is deleted. ``0`` empties the session; a cut past the end changes
    nothing.
    """
    total = sum(len(s) for s in segments)
    if keep_entries == 0:
        return RewindPlan(0, None, total)
    seen = 0
    for i, entries in enumerate(segments):
        if seen + len(entries) >= keep_entries:
            cut = keep_entries - seen
            if cut == len(entries):
                return RewindPlan(i + 1, None, total - keep_entries)
            prefix = drop_dangling_tool_calls(entries[:cut])
            return RewindPlan(i, prefix, total - seen - len(prefix))
        seen += len(entries)
    return RewindPlan(len(segments), None, 0)


def rewind_rows(
    rows: Sequence[SessionRow], keep_entries: int
) -> tuple[_Update | None, list[int], int]:
    """``plan_rewind`` over a session's rows (in ``id`` order): the update for the row the
    cut lands in (its meta is to be cleared) or ``None``, the ids of the rows that go, and
    how many entries the rewind removes."""
    plan = plan_rewind(
        [
            decode_entries(entries, version, run_id=run_id, row=row_id)
            for row_id, run_id, entries, _meta, version in rows
        ],
        keep_entries,
    )
    first_gone = plan.keep_segments
    truncate = None
    if plan.truncated:  # an empty prefix is not kept: its row is deleted
        truncate = (encode_entries(plan.truncated), ROW_VERSION, rows[first_gone][0])
        first_gone += 1
    return truncate, [row[0] for row in rows[first_gone:]], plan.removed
