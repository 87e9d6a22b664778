"""Row encoding shared by the stores: versioned JSON text, strict and loud on decode.

Every stored row carries ``ROW_VERSION``. Decoding a row that is newer, truncated, not JSON
or holds an unknown entry type raises ``StoreError`` naming the run and the row; nothing is
repaired or skipped, so a bad row never silently shortens a transcript.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import uuid4

from ..checkpointer import RunHead, RunSnapshot
from ..exceptions import StoreError, UserError
from ..session import Segment
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
    entry_to_dict,
    to_json_safe,
)

ROW_VERSION = 1
"""The version written into every row; rows with a higher one are refused."""

SessionRow = tuple[int, str, str, str, Any]
"""A ``session_runs`` row as the database stores select it: id, run_id, entries, meta, version."""

# What decoding stored data may raise: a malformed entry is a ValueError, but a part that
# breaks its own invariants (an image with no source, bad base64) raises UserError.
_MALFORMED = (ValueError, TypeError, UserError)

_ENTRY_CLASSES = (InputEntry, AssistantTextEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry)


def _reason(exc: Exception) -> str:
    """An exception's message without a hint meant for the original caller."""
    return exc.message if isinstance(exc, UserError) else str(exc)


def new_run_id(run_id: str | None) -> str:
    """``run_id`` validated, or a fresh uuid hex when ``None``."""
    if run_id is None:
        return uuid4().hex
    check_run_id(run_id)
    return run_id


def check_id(name: str, value: str, *, hint: str) -> None:
    """Refuse an id that is not a non-empty string, or that no database can store.

    PostgreSQL text cannot hold NUL and neither driver encodes a lone surrogate, so both
    are refused on every store alike, before any SQL runs (a usage mistake, not a store
    failure).
    """
    if not isinstance(value, str) or not value:
        raise UserError(f"{name} must be a non-empty string, got {value!r}", hint=hint)
    if "\x00" in value or not value.isascii() and not _encodes(value):
        raise UserError(
            f"{name} {value[:60]!r} holds a NUL or a lone surrogate, which no store can keep",
            hint=f"{hint}; encode binary or arbitrary keys first (hex, base64)",
        )


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_run_id(run_id: str) -> None:
    """Refuse a run id that is not a non-empty string (a usage mistake)."""
    check_id(
        "run_id",
        run_id,
        hint="use a stable id such as a request id (or None where one is generated)",
    )


def check_session_id(session_id: str) -> None:
    """Refuse a session id that is not a non-empty string (a usage mistake)."""
    check_id(
        "session_id",
        session_id,
        hint="use one stable id per conversation, e.g. a user or thread id",
    )


def encode_segment(
    session_id: str,
    entries: Sequence[TranscriptEntry],
    run_id: str | None,
    meta: dict[str, Any] | None,
) -> tuple[str, str, str]:
    """A session append checked and encoded: ``(run_id, entries, meta)``, the run id
    generated when ``None``. ``UserError`` for a bad id or data that is not JSON-safe."""
    check_session_id(session_id)
    run_id = new_run_id(run_id)
    return run_id, encode_entries(entries), encode_meta(meta)


def encode_checkpoint(
    run_id: str, entries: Sequence[TranscriptEntry], head: RunHead
) -> tuple[str | None, str]:
    """A checkpoint append checked and encoded: ``(entries, head)``, entries ``None`` when
    there are none (no row is written for them). ``UserError`` as for ``encode_segment``."""
    check_run_id(run_id)
    encoded = encode_entries(entries) if entries else None
    return encoded, encode_head(head)


def encode_entries(entries: Sequence[TranscriptEntry]) -> str:
    """Entries as compact JSON text (non-ASCII kept verbatim).

    ``UserError`` for an item that is not a transcript entry, or one holding data that is
    not JSON-safe (a reasoning entry's ``metadata``).
    """
    for e in entries:
        if not isinstance(e, _ENTRY_CLASSES):
            raise UserError(
                f"stores keep transcript entries, got {type(e).__name__}",
                hint="pass lovia.transcript entries (InputEntry, ToolResultEntry, ...), "
                "e.g. from input_to_entries(...) or a run result's entries",
            )
    try:
        return _dumps([entry_to_dict(e) for e in entries])
    except TypeError as exc:
        raise UserError(
            f"a transcript entry is not JSON-safe: {exc}",
            hint="entry metadata must be plain dicts, lists, str and numbers",
        ) from exc


def encode_meta(meta: dict[str, Any] | None) -> str:
    """Segment meta as JSON text; ``None`` stores ``{}``. Non-JSON-safe meta is a UserError."""
    try:
        return _dumps(to_json_safe(meta or {}))
    except TypeError as exc:
        raise UserError(
            f"session meta must be JSON-safe: {exc}", hint="store plain dicts, lists, str, numbers"
        ) from exc


def encode_head(head: RunHead) -> str:
    """A run head as JSON text; a non-JSON-safe output or state is a UserError."""
    try:
        return _dumps(head.to_dict())
    except TypeError as exc:
        raise UserError(
            f"the run head is not JSON-safe: {exc}",
            hint="checkpointed outputs and context state must be JSON-safe values",
        ) from exc


def decode_entries(text: Any, version: Any, *, run_id: str, row: object) -> list[TranscriptEntry]:
    """Entries from a stored row, or ``StoreError`` naming ``run_id`` and ``row``."""
    data = _load(text, version, run_id=run_id, row=row)
    if not isinstance(data, list):
        raise _corrupt(run_id, row, "entries are not a JSON array")
    try:
        return [entry_from_dict(item) for item in data]
    except _MALFORMED as exc:
        raise _corrupt(run_id, row, _reason(exc)) from exc


def decode_meta(text: Any, version: Any, *, run_id: str, row: object) -> dict[str, Any]:
    """Segment meta from a stored row, or ``StoreError``."""
    data = _load(text, version, run_id=run_id, row=row)
    if not isinstance(data, dict):
        raise _corrupt(run_id, row, "meta is not a JSON object")
    return data


def decode_head(text: Any, version: Any, *, run_id: str, row: object) -> RunHead:
    """A run head from a stored row, or ``StoreError``."""
    data = _load(text, version, run_id=run_id, row=row)
    try:
        return RunHead.from_dict(data)
    except _MALFORMED as exc:
        raise _corrupt(run_id, row, _reason(exc)) from exc


def decode_segments(rows: Sequence[SessionRow]) -> list[Segment]:
    """The segments stored in ``rows``, in their order; ``StoreError`` for a bad row."""
    return [
        Segment(
            run_id,
            tuple(decode_entries(entries, version, run_id=run_id, row=row_id)),
            decode_meta(meta, version, run_id=run_id, row=row_id),
        )
        for row_id, run_id, entries, meta, version in rows
    ]


def decode_history(rows: Sequence[SessionRow]) -> list[TranscriptEntry]:
    """The entries stored in ``rows``, concatenated (their meta is not read)."""
    out: list[TranscriptEntry] = []
    for row_id, run_id, entries, _meta, version in rows:
        out.extend(decode_entries(entries, version, run_id=run_id, row=row_id))
    return out


def build_snapshot(
    run_id: str, head_row: Sequence[Any] | None, turn_rows: Sequence[Sequence[Any]]
) -> RunSnapshot | None:
    """A snapshot from its head row ``(head, version)`` and turn rows ``(id, entries, version)``.

    ``None`` when nothing is stored; entries without a head are reported as corrupt.
    """
    if head_row is None:
        if not turn_rows:
            return None
        raise _corrupt(run_id, "head", "checkpointed entries have no head row")
    head = decode_head(head_row[0], head_row[1], run_id=run_id, row="head")
    entries: list[TranscriptEntry] = []
    for row_id, text, version in turn_rows:
        entries.extend(decode_entries(text, version, run_id=run_id, row=row_id))
    return RunSnapshot(run_id, tuple(entries), head)


def _same_entries(stored_text: str, new_text: str) -> bool:
    """Whether two encoded entry lists hold the same entries (formatting aside)."""
    if stored_text == new_text:
        return True
    try:
        return bool(json.loads(stored_text) == json.loads(new_text))
    except ValueError:
        return False


def check_reappend(session_id: str, run_id: str, stored: str | None, encoded: str) -> None:
    """Accept a re-append of a stored ``run_id`` only with the entries already stored.

    ``stored`` is the encoded entries of the existing row; ``StoreError`` when they differ
    from ``encoded`` (or the row is gone).
    """
    if stored is None or not _same_entries(stored, encoded):
        raise _conflict(session_id, run_id)


def _conflict(session_id: str, run_id: str) -> StoreError:
    return StoreError(
        f"session {session_id!r} already holds run {run_id!r} with different entries",
        run_id=run_id,
        hint="a run_id identifies one run: re-append the same entries, or use a new run_id",
    )


def _dumps(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from broken tool output) cannot be stored as UTF-8 text;
        # \u escapes can, and decode back to the same string.
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text


def _load(text: Any, version: Any, *, run_id: str, row: object) -> Any:
    if not isinstance(version, int) or version > ROW_VERSION:
        raise StoreError(
            f"run {run_id!r} (row {row!r}) has schema version {version!r}, newer than "
            f"this lovia understands ({ROW_VERSION})",
            run_id=run_id,
            row=row,
            hint="upgrade lovia to read rows written by a newer version",
        )
    if not isinstance(text, str):
        raise _corrupt(run_id, row, f"expected JSON text, got {type(text).__name__}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _corrupt(run_id, row, f"invalid or truncated JSON ({exc})") from exc


def _corrupt(run_id: str, row: object, why: str) -> StoreError:
    return StoreError(
        f"run {run_id!r} (row {row!r}) cannot be read: {why}",
        run_id=run_id,
        row=row,
        hint="restore the row from a backup, or delete that run; other rows are untouched",
    )
