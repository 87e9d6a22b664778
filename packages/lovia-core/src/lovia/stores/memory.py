"""In-process stores: ``InMemorySession`` and ``InMemoryCheckpointer``.

For tests, notebooks and single-process apps. They keep the same contracts as the database
stores (append-only, idempotent per run id, differing re-append refused) and isolate
callers from their state: entries are immutable, and ``meta``, the head's usage and its
context state are copied in and out, so mutating what you passed or got back changes
nothing stored. Nothing survives the process.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, overload

from ..checkpointer import Checkpointer, RunHead, RunSnapshot
from ..session import Segment, Session
from ..transcript import TranscriptEntry
from . import _maintenance, _rows
from ._lease import Leases
from ._url import query_params

__all__ = ["InMemoryCheckpointer", "InMemorySession", "from_url"]


@dataclass(slots=True)
class _Stored:
    run_id: str
    entries: tuple[TranscriptEntry, ...]
    encoded: str
    meta: dict[str, Any]


class InMemorySession:
    """A ``Session`` held in a dict; every instance is a separate, empty store."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[_Stored]] = {}
        self._leases = Leases("session")

    async def segments(self, session_id: str) -> list[Segment]:
        """Every segment of ``session_id`` in insertion order (copies)."""
        _rows.check_session_id(session_id)
        return [
            Segment(s.run_id, s.entries, copy.deepcopy(s.meta))
            for s in self._sessions.get(session_id, ())
        ]

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        """The flat history of ``session_id``."""
        _rows.check_session_id(session_id)
        return [e for s in self._sessions.get(session_id, ()) for e in s.entries]

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Add one segment; idempotent per ``run_id`` (see ``Session.append``)."""
        # Encoded like the database stores: the same checks, and re-appends compare alike.
        run_id, encoded, _meta = _rows.encode_segment(session_id, entries, run_id, meta)
        stored = self._sessions.setdefault(session_id, [])
        for s in stored:
            if s.run_id == run_id:
                _rows.check_reappend(session_id, run_id, s.encoded, encoded)
                return run_id
        stored.append(_Stored(run_id, tuple(entries), encoded, copy.deepcopy(meta or {})))
        return run_id

    async def clear(self, session_id: str) -> None:
        """Forget every segment of ``session_id``."""
        _rows.check_session_id(session_id)
        self._sessions.pop(session_id, None)

    def lease(
        self, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``session_id`` for one run (in-process only; see ``Session.lease``)."""
        return self._leases.hold(session_id, wait=wait, timeout=timeout)

    async def trim_tool_results(
        self, session_id: str, *, keep_chars: int = 400, keep_runs: int = 1
    ) -> int:
        """Cut stored tool outputs to ``keep_chars`` in all but the last ``keep_runs`` runs.

        Returns how many results were trimmed. Idempotent; pairing and ``is_error`` are kept.
        Raises ``UserError`` for negative arguments.
        """
        _maintenance.check_trim_args(keep_chars, keep_runs)
        stored = self._sessions.get(session_id, [])
        older = stored[: max(0, len(stored) - keep_runs)]
        plans = [(s, _maintenance.trim_segment(s.entries, keep_chars)) for s in older]
        count = 0
        for s, new in plans:
            if new is not None:
                count += _maintenance.count_trimmed(s.entries, new)
                s.entries = tuple(new)
                s.encoded = _rows.encode_entries(new)
        return count

    async def rewind(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the first ``keep_entries`` entries of the history; returns how many went.

        Later runs are deleted; the run the cut lands in is truncated tool-consistently and
        loses its ``meta``. ``0`` empties the session; a cut past the end is a no-op.
        """
        _maintenance.check_rewind_args(keep_entries)
        stored = self._sessions.get(session_id, [])
        plan = _maintenance.plan_rewind([s.entries for s in stored], keep_entries)
        if plan.truncated:
            cut = stored[plan.keep_segments]
            cut.entries = tuple(plan.truncated)
            cut.encoded = _rows.encode_entries(plan.truncated)
            cut.meta = {}
            del stored[plan.keep_segments + 1 :]
        else:
            del stored[plan.keep_segments :]
        return plan.removed


class InMemoryCheckpointer:
    """A ``Checkpointer`` held in a dict; every instance is a separate, empty store."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[list[TranscriptEntry], RunHead]] = {}
        self._leases = Leases("run")

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Add ``entries`` and replace the head (frozen by copy)."""
        _rows.encode_checkpoint(run_id, entries, head)  # same validation as the database stores
        frozen = _frozen(head)
        stored = self._runs.get(run_id)
        if stored is None:
            self._runs[run_id] = (list(entries), frozen)
        else:
            stored[0].extend(entries)
            self._runs[run_id] = (stored[0], frozen)

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The snapshot of ``run_id`` (a copy), or ``None``."""
        _rows.check_run_id(run_id)
        stored = self._runs.get(run_id)
        if stored is None:
            return None
        return RunSnapshot(run_id, tuple(stored[0]), _frozen(stored[1]))

    async def delete(self, run_id: str) -> None:
        """Forget ``run_id`` (idempotent)."""
        _rows.check_run_id(run_id)
        self._runs.pop(run_id, None)

    def lease(
        self, run_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold ``run_id`` for one run (in-process only; see ``Checkpointer``)."""
        return self._leases.hold(run_id, wait=wait, timeout=timeout)


def _frozen(head: RunHead) -> RunHead:
    return dataclasses.replace(
        head,
        usage=head.usage.copy(),
        output=copy.deepcopy(head.output),
        error=copy.deepcopy(head.error),
        context_state=copy.deepcopy(head.context_state),
        notices=copy.deepcopy(head.notices),
    )


@overload
def from_url(url: str, *, kind: Literal["session"]) -> Session: ...
@overload
def from_url(url: str, *, kind: Literal["checkpointer"]) -> Checkpointer: ...
def from_url(url: str, *, kind: Literal["session", "checkpointer"]) -> Session | Checkpointer:
    """A fresh in-memory store for ``memory://`` (the ``lovia.stores`` entry point); it
    takes no query parameters."""
    query_params(url, url.partition("?")[2], valid=())
    if kind == "session":
        return InMemorySession()
    return InMemoryCheckpointer()
