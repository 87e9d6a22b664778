"""``ChatStore``: every durable thing the web layer keeps, behind one interface.

A store bundles the core's ``Session`` (transcripts) and ``Checkpointer`` (resumable runs)
with tables of its own: ``chat_sessions`` (one ``ChatMeta`` per chat), ``run_events`` (the
per-run event log, see ``lovia.web.eventlog``), ``chat_runs`` (one ``RunRecord`` per
supervised run) and ``chat_schedules`` (one ``ScheduleRow`` per schedule). The logic is
written once (``lovia.web.store.sql``); ``SQLiteChatStore`` and ``PostgresChatStore`` only
pick the database. See docs/web-store.md.

Contract every implementation keeps:

* ``append_events`` is durable (all of the batch, or none) when it returns, and
  ``(run_id, seq)`` is unique.
* ``read_events(run_id, after)`` returns the run's records with ``seq > after`` in order.
* ``set_active_run(..., expected=)`` only clears the pointer if it still names ``expected``.
* ``delete_session`` removes the transcript, the metadata, the event log, the run records,
  the checkpoints of the session's runs, and the chat's task sessions (``parent_id``).
* ``claim_fire`` is a compare-and-set: of any number of callers, across processes, exactly
  one wins a given fire.
* An id no database can keep (empty, a NUL, a lone surrogate) is never stored: writes
  refuse it with ``UserError``, reads answer "not found". Titles are cleaned instead (NUL
  removed, a lone surrogate replaced by U+FFFD).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from lovia.checkpointer import Checkpointer
    from lovia.session import Session

    from ..eventlog import EventRecord

__all__ = [
    "ChatMeta",
    "ChatStore",
    "RUN_SOURCES",
    "RUN_STATUSES",
    "RunRecord",
    "RunSource",
    "RunStatus",
    "ScheduleRow",
]

RunSource = Literal["chat", "schedule", "subagent", "resume"]
RunStatus = Literal["running", "completed", "failed", "cancelled", "interrupted"]
RUN_SOURCES: tuple[RunSource, ...] = ("chat", "schedule", "subagent", "resume")
RUN_STATUSES: tuple[RunStatus, ...] = ("running", "completed", "failed", "cancelled", "interrupted")


@dataclass(frozen=True, slots=True)
class ChatMeta:
    """A chat's metadata row; times are Unix seconds."""

    id: str
    agent: str
    title: str
    pinned: bool
    created_at: float
    updated_at: float
    active_run_id: str | None = None
    """The run the session is executing (set at start, cleared when it ends)."""
    parent_id: str | None = None
    """The chat a subagent task session belongs to (``None`` for a user's chat)."""
    title_provisional: bool = True
    """The title is a placeholder (from the first message); a manual rename or a generated
    title clears it."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One supervised run, as ``chat_runs`` keeps it; times are Unix seconds."""

    run_id: str
    session_id: str
    agent: str
    source: RunSource
    status: RunStatus = "running"
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    error: str | None = None
    usage: dict[str, Any] | None = None
    """The run's token usage as a JSON-safe dict (``None`` when unknown or unreadable)."""


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One schedule, domain-neutral: the scheduler keeps its own fields in ``data``."""

    id: str
    agent: str
    session_id: str | None
    data: dict[str, Any]
    next_fire_at: float | None
    """When it fires next (Unix seconds); ``None``: never again."""
    active: bool = True
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


class ChatStore(ABC):
    """The web layer's storage; see the module docstring for the contract."""

    session: Session
    checkpointer: Checkpointer

    # -- constructors ----------------------------------------------------------------------

    @staticmethod
    def sqlite(path: str, *, wal: bool = True) -> ChatStore:
        """A store in one SQLite file (``":memory:"`` for a private in-memory one)."""
        from .sqlite import SQLiteChatStore

        return SQLiteChatStore(path, wal=wal)

    @staticmethod
    def in_memory() -> ChatStore:
        """A private store in memory (one SQLite ``:memory:`` connection shared by the
        transcripts, the checkpoints and the chat tables), for tests and embedding."""
        from .sqlite import SQLiteChatStore

        return SQLiteChatStore(":memory:")

    @staticmethod
    def postgres(url: str, *, schema: str | None = None) -> ChatStore:
        """A store in PostgreSQL (``url`` a libpq DSN or URL; ``schema`` the PostgreSQL
        schema for every table, created on first use; ``None``: the ``search_path``).
        Needs the ``postgres`` extra of lovia-web."""
        from .postgres import PostgresChatStore

        return PostgresChatStore(url, schema=schema)

    @staticmethod
    def from_url(url: str) -> ChatStore:
        """A store for ``url``: ``postgresql://...`` (``?schema=name`` picks the schema),
        ``sqlite:///path.db`` (``?wal=0`` turns WAL off), ``memory://``, or a plain file
        path. ``UserError`` for any other scheme."""
        from .sql import store_from_url

        return store_from_url(url)

    # -- chat metadata ---------------------------------------------------------------------

    @abstractmethod
    async def create_session(
        self, session_id: str, *, agent: str, title: str, parent_id: str | None = None
    ) -> ChatMeta:
        """Insert a new chat (title provisional); an existing id is returned unchanged."""

    @abstractmethod
    async def get_session(self, session_id: str) -> ChatMeta | None: ...

    @abstractmethod
    async def list_sessions(
        self, *, limit: int, offset: int, query: str | None = None, tasks: bool = True
    ) -> list[ChatMeta]:
        """Pinned chats first, then the most recently updated; ``query`` keeps the chats
        whose title contains it (case-insensitive, ``%`` and ``_`` taken literally);
        ``tasks=False`` leaves task sessions (``parent_id`` set) out before paging."""

    @abstractmethod
    async def update_session(
        self, session_id: str, *, title: str | None = None, pinned: bool | None = None
    ) -> ChatMeta | None:
        """Change the given fields (and ``updated_at``); a title given here is a manual
        rename and clears ``title_provisional``. ``None`` for an unknown id."""

    @abstractmethod
    async def set_title_if_unchanged(self, session_id: str, *, expected: str, title: str) -> bool:
        """Set the title (clearing provisional) only if it still equals ``expected`` and is
        still provisional, so a generated title never overwrites a manual rename."""

    @abstractmethod
    async def set_active_run(
        self, session_id: str, run_id: str | None, *, expected: str | None = None
    ) -> bool:
        """Point the chat at ``run_id`` (or clear it); with ``expected``, only if it still
        names that run. Returns whether the row changed."""

    @abstractmethod
    async def delete_session(self, session_id: str) -> bool:
        """Remove everything the chat owns (its task sessions too); ``False`` for an
        unknown id."""

    @abstractmethod
    async def task_sessions(self, session_id: str) -> list[str]:
        """The ids of the chat's task sessions at any depth (children before their own
        children), which ``delete_session`` removes with it: stop their live runs first."""

    @abstractmethod
    async def delete_all_sessions(self) -> list[str]:
        """Remove every chat as ``delete_session`` does; returns the ids removed."""

    @property
    def supports_rewind(self) -> bool:
        """Whether ``rewind_session`` works (the session store has ``rewind``)."""
        return callable(getattr(self.session, "rewind", None))

    @abstractmethod
    async def rewind_session(self, session_id: str, *, keep_entries: int) -> int:
        """Keep the transcript's first ``keep_entries`` entries (through the session
        store's ``rewind``); returns how many entries went."""

    # -- the event log ---------------------------------------------------------------------

    @abstractmethod
    async def append_events(self, session_id: str, records: Sequence[EventRecord]) -> None:
        """Log ``records`` (of runs of ``session_id``) in one transaction."""

    @abstractmethod
    async def read_events(self, run_id: str, *, after: int = 0) -> list[EventRecord]:
        """The run's records with ``seq > after``, in order; ``StoreError`` (naming the run
        and the seq) for a row that cannot be decoded."""

    @abstractmethod
    async def last_seq(self, run_id: str) -> int:
        """The highest ``seq`` logged for the run (0 if none)."""

    @abstractmethod
    async def latest_run(self, session_id: str) -> str | None:
        """The most recent run of the chat that has logged events."""

    @abstractmethod
    async def has_run(self, session_id: str, run_id: str) -> bool:
        """Whether run ``run_id`` of ``session_id`` has logged events."""

    @abstractmethod
    async def prune_events(self, session_id: str) -> int:
        """Apply the retention policy after a run of ``session_id`` ended; rows deleted."""

    # -- run records -----------------------------------------------------------------------

    @abstractmethod
    async def record_run_started(self, record: RunRecord) -> None:
        """Insert ``record`` (an existing ``run_id`` is replaced: a resumed run restarts
        its record)."""

    @abstractmethod
    async def record_run_finished(
        self,
        run_id: str,
        *,
        status: RunStatus,
        error: str | None = None,
        usage: dict[str, Any] | None = None,
        ended_at: float | None = None,
    ) -> None:
        """Close the record (``ended_at`` defaults to now); an unknown run is ignored."""

    @abstractmethod
    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        source: RunSource | None = None,
        since: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRecord]:
        """Records newest first (by ``started_at``), filtered; ``since`` keeps the runs
        started at or after it. A record whose usage cannot be decoded is listed with
        ``usage=None`` (and logged), never failing the listing."""

    @abstractmethod
    async def sweep_stale_runs(self) -> int:
        """Mark every ``running`` record ``interrupted`` (at startup: no run survives the
        process); returns how many changed."""

    # -- schedules -------------------------------------------------------------------------

    @abstractmethod
    async def save_schedule(self, row: ScheduleRow) -> None:
        """Insert or replace the schedule (an existing row keeps its ``created_at``)."""

    @abstractmethod
    async def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        """The schedule, ``None`` if unknown; ``StoreError`` for an undecodable row."""

    @abstractmethod
    async def list_schedules(
        self, *, agent: str | None = None, active: bool | None = None
    ) -> list[ScheduleRow]:
        """Schedules by ``created_at`` then id; an undecodable row is skipped (and logged)."""

    @abstractmethod
    async def delete_schedule(self, schedule_id: str) -> bool:
        """Remove the schedule; ``False`` if unknown."""

    @abstractmethod
    async def due_schedules(self, now: float, *, limit: int = 100) -> list[ScheduleRow]:
        """Active schedules with ``next_fire_at <= now``, the oldest fire first."""

    @abstractmethod
    async def claim_fire(
        self, schedule_id: str, *, expected_next: float, next_fire_at: float | None, active: bool
    ) -> bool:
        """Win the fire at ``expected_next``: if the schedule is active and still due then,
        move it to ``next_fire_at`` / ``active`` and return ``True``; every other caller
        (in this process or another) gets ``False``."""

    @abstractmethod
    async def aclose(self) -> None: ...
