"""The ``Checkpointer`` seam: the append-only log of the in-flight run, keyed by ``run_id``.

Invariants every store keeps (the shared test suite checks them on each backend):

* ``run_id`` is the sole, global key: a checkpointed run need not belong to a session, so
  callers sharing one checkpointer keep run ids unique across sessions.
* Append-only entries plus a small mutable head. ``append(run_id, entries, head)`` adds the
  entries produced since the previous append (one stored batch; an empty batch adds no row)
  and replaces the head, atomically: a failed append leaves the previous state intact.
* A snapshot holds the run's **own** entries, never the session history it started from.
  The full transcript of a resumed run is ``session.load()`` + ``snapshot.entries``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from .exceptions import StoreError, UserError
from .messages import Usage
from .transcript import TranscriptEntry, entry_from_dict, entry_to_dict, to_json_safe

__all__ = [
    "CheckpointOptions",
    "Checkpointer",
    "IfRunExists",
    "RunHead",
    "RunSnapshot",
    "RunStatus",
    "SNAPSHOT_VERSION",
]

SNAPSHOT_VERSION = 1
"""The version of the stored snapshot format; a newer one is refused with ``StoreError``."""

RunStatus = Literal["running", "interrupted", "completed", "failed"]
"""Where a checkpointed run stands: ``interrupted`` runs are resumable, ``failed`` are not."""

IfRunExists = Literal["resume", "restart", "fail", "resume_only"]
"""What a run does when its ``run_id`` is already checkpointed (see ``CheckpointOptions``)."""

_STATUSES = frozenset(get_args(RunStatus))
_IF_RUN_EXISTS = frozenset(get_args(IfRunExists))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunHead:
    """The small, replaced-on-every-append state of a checkpointed run."""

    agent_name: str
    """The active agent: after a handoff, the target, not the entry agent."""
    usage: Usage = field(default_factory=Usage)
    """Usage accumulated so far. Stores keep their own copy."""
    turns: int = 0
    """Completed turns (model calls)."""
    status: RunStatus = "running"
    """``running`` while in flight (or after a crash), else how the run ended."""
    output: Any = None
    """The final output as JSON-safe data once ``completed`` (arbitrary by design)."""
    error: dict[str, Any] | None = None
    """For a ``failed`` or ``interrupted`` run: a JSON-safe error payload (type, message)."""
    last_input_tokens: int | None = None
    """The provider-reported input tokens of the last call (``None``: not reported yet)."""
    context_state: dict[str, Any] = field(default_factory=dict)
    """The context policy's JSON-safe scratch state."""
    notices: list[dict[str, Any]] = field(default_factory=list)
    """The run's compaction notices so far (JSON-safe), so a resumed run still stores
    every notice with its session segment."""
    updated_at: float = field(default_factory=time.time)
    """When this head was written, in seconds since the epoch."""

    def to_dict(self) -> dict[str, Any]:
        """The head as JSON-safe data; raises ``TypeError`` if ``output`` is not JSON-safe."""
        return {
            "agent_name": self.agent_name,
            "usage": self.usage.to_dict(),
            "turns": self.turns,
            "status": self.status,
            "output": to_json_safe(self.output),
            "error": to_json_safe(self.error),
            "last_input_tokens": self.last_input_tokens,
            "context_state": to_json_safe(self.context_state),
            "notices": to_json_safe(self.notices),
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, data: Any) -> RunHead:
        """Rebuild a head; missing optional fields take their defaults.

        Raises ``ValueError`` when ``data`` is not a head (no agent name, an unknown status,
        a field of the wrong type).
        """
        if not isinstance(data, dict) or not isinstance(data.get("agent_name"), str):
            raise ValueError("a run head must be an object with a string 'agent_name'")
        status = data.get("status", "running")
        if status not in _STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        usage = data.get("usage") or {}
        error = data.get("error")
        context_state = data.get("context_state") or {}
        notices = data.get("notices") or []
        last = data.get("last_input_tokens")
        turns = data.get("turns", 0)
        updated_at = data.get("updated_at", 0.0)
        if not (
            isinstance(usage, dict)
            and all(isinstance(v, int) for v in usage.values())
            and (error is None or isinstance(error, dict))
            and isinstance(context_state, dict)
            and isinstance(notices, list)
            and all(isinstance(n, dict) for n in notices)
            and (last is None or isinstance(last, int))
            and isinstance(turns, int)
            and isinstance(updated_at, (int, float))
        ):
            raise ValueError("a run head field has the wrong type")
        return cls(
            agent_name=data["agent_name"],
            usage=Usage.from_dict(usage),
            turns=turns,
            status=status,
            output=data.get("output"),
            error=error,
            last_input_tokens=last,
            context_state=context_state,
            notices=notices,
            updated_at=float(updated_at),
        )


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """A checkpointed run: its id, its own entries and its head."""

    run_id: str
    """The run's global key."""
    entries: tuple[TranscriptEntry, ...]
    """The run's own entries in order (not the session history)."""
    head: RunHead
    """The latest head written with the entries."""

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as JSON-safe data, tagged with ``SNAPSHOT_VERSION``."""
        return {
            "version": SNAPSHOT_VERSION,
            "run_id": self.run_id,
            "entries": [entry_to_dict(e) for e in self.entries],
            "head": self.head.to_dict(),
        }

    def to_json(self) -> str:
        """The snapshot as a JSON string (non-ASCII text kept verbatim)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Any) -> RunSnapshot:
        """Rebuild a snapshot from ``to_dict`` data.

        Raises ``StoreError`` naming the run when the data is malformed, holds an unknown
        entry type, or comes from a newer snapshot version.
        """
        run_id = data.get("run_id") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(run_id, str):
            raise StoreError(
                "not a run snapshot: expected an object with a string 'run_id'",
                hint="pass the data RunSnapshot.to_dict() produced",
            )
        version = data.get("version", SNAPSHOT_VERSION)
        if not isinstance(version, int) or version > SNAPSHOT_VERSION:
            raise StoreError(
                f"snapshot of run {run_id!r} has format version {version!r}, "
                f"newer than this lovia understands ({SNAPSHOT_VERSION})",
                run_id=run_id,
                hint="upgrade lovia to read snapshots written by a newer version",
            )
        try:
            raw_entries = data.get("entries", [])
            if not isinstance(raw_entries, list):
                raise ValueError("'entries' must be a list")
            entries = tuple(entry_from_dict(e) for e in raw_entries)
            head = RunHead.from_dict(data.get("head"))
        except (ValueError, TypeError, UserError) as exc:
            why = exc.message if isinstance(exc, UserError) else str(exc)
            raise StoreError(
                f"malformed snapshot of run {run_id!r}: {why}",
                run_id=run_id,
                hint="the snapshot data was altered or truncated; restore it from its source",
            ) from exc
        return cls(run_id, entries, head)


class Checkpointer(Protocol):
    """Where an in-flight run persists so it can be resumed or replayed.

    Implementations: ``lovia.stores.InMemoryCheckpointer``, ``SQLiteCheckpointer`` and
    ``PostgresCheckpointer``; ``lovia.stores.open_checkpointer(url)`` picks one from a URL.
    """

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        """Add ``entries`` (those since the last append) and replace the head, atomically.

        An empty ``entries`` updates the head only. Raises ``StoreError`` when the store fails.
        """
        ...

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The stored snapshot, or ``None`` when nothing is stored for ``run_id``.

        Raises ``StoreError`` (naming the run and the row) when a stored row is unreadable.
        """
        ...

    async def delete(self, run_id: str) -> None:
        """Forget ``run_id`` (idempotent: deleting an unknown run is a no-op)."""
        ...


@dataclass(frozen=True, slots=True)
class CheckpointOptions:
    """How a run checkpoints itself, and what happens when its ``run_id`` already exists.

    ``if_run_exists`` (when the checkpointer already holds ``run_id``):

    * ``"resume"`` (default): resume an interrupted run, replay a completed one, start
      fresh when nothing is stored.
    * ``"restart"``: discard the stored run and start over; only the new run's entries remain.
    * ``"fail"``: raise ``UserError`` if the run exists.
    * ``"resume_only"``: raise ``UserError`` if nothing is stored (input may then be ``[]``).

    Validated when built, raising ``UserError``: a blank ``run_id``, a ``run_id`` that
    differs from ``resume_from.run_id``, ``delete_on_success`` without a checkpointer, an
    unknown ``if_run_exists``, neither a checkpointer nor ``resume_from``, or ``resume_from``
    combined with ``"restart"``/``"fail"``.
    """

    checkpointer: Checkpointer | None = None
    """Where the run is saved; ``None`` only together with ``resume_from``."""
    run_id: str | None = None
    """The run's global key. ``None``: ``resume_from.run_id``, else a fresh uuid hex."""
    if_run_exists: IfRunExists = "resume"
    delete_on_success: bool = False
    """Delete the checkpoint once the run completed and reached the session."""
    resume_from: RunSnapshot | None = None
    """Resume from this snapshot instead of loading one from the checkpointer."""

    def __post_init__(self) -> None:
        if self.if_run_exists not in _IF_RUN_EXISTS:
            raise UserError(
                f"unknown if_run_exists {self.if_run_exists!r}",
                hint=f"use one of {sorted(_IF_RUN_EXISTS)}",
            )
        if self.checkpointer is None and self.resume_from is None:
            raise UserError(
                "CheckpointOptions needs a checkpointer or a resume_from snapshot",
                hint="pass checkpointer=SQLiteCheckpointer(path) (or resume_from=snapshot)",
            )
        if self.delete_on_success and self.checkpointer is None:
            raise UserError(
                "delete_on_success=True needs a checkpointer to delete from",
                hint="pass checkpointer=..., or drop delete_on_success",
            )
        run_id = self.run_id
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            raise UserError(
                f"run_id must be a non-blank string, got {run_id!r}",
                hint="pass a stable id such as a request id, or None to generate one",
            )
        snapshot = self.resume_from
        if snapshot is not None:
            if run_id is not None and run_id != snapshot.run_id:
                raise UserError(
                    f"run_id {run_id!r} does not match resume_from.run_id {snapshot.run_id!r}",
                    hint="omit run_id when resuming from a snapshot",
                )
            if self.if_run_exists in ("restart", "fail"):
                raise UserError(
                    f"resume_from cannot be combined with if_run_exists={self.if_run_exists!r}",
                    hint="use if_run_exists='resume' or 'resume_only' with resume_from",
                )
            run_id = snapshot.run_id
        if run_id is None:
            from uuid import uuid4

            run_id = uuid4().hex
        object.__setattr__(self, "run_id", run_id)
