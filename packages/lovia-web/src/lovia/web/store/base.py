"""``ChatStore``: every durable thing the web layer keeps, behind one interface.

A store bundles the core's ``Session`` (transcripts) and ``Checkpointer`` (resumable runs)
with two tables of its own: ``chat_sessions`` (one ``ChatMeta`` per chat) and ``run_events``
(the per-run event log, see ``lovia.web.eventlog``). One implementation per database; the
SQLite one is ``SQLiteChatStore`` and a PostgreSQL one implements the same methods.

Contract every implementation keeps:

* ``append_events`` is durable (all of the batch, or none) when it returns, and
  ``(run_id, seq)`` is unique.
* ``read_events(run_id, after)`` returns the run's records with ``seq > after`` in order.
* ``set_active_run(..., expected=)`` only clears the pointer if it still names ``expected``.
* ``delete_session`` removes the transcript, the metadata, the event log and the checkpoint
  of the run the session points at.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lovia.checkpointer import Checkpointer
    from lovia.session import Session

    from ..eventlog import EventRecord

__all__ = ["ChatMeta", "ChatStore"]


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


class ChatStore(ABC):
    """The web layer's storage; see the module docstring for the contract."""

    session: Session
    checkpointer: Checkpointer

    @staticmethod
    def sqlite(path: str, *, wal: bool = True) -> ChatStore:
        """A store in one SQLite file (``":memory:"`` for a private in-memory one)."""
        from .sqlite import SQLiteChatStore

        return SQLiteChatStore(path, wal=wal)

    # -- chat metadata ---------------------------------------------------------------------

    @abstractmethod
    async def create_session(self, session_id: str, *, agent: str, title: str) -> ChatMeta:
        """Insert a new chat; an existing id is returned unchanged."""

    @abstractmethod
    async def get_session(self, session_id: str) -> ChatMeta | None: ...

    @abstractmethod
    async def list_sessions(
        self, *, limit: int, offset: int, query: str | None = None
    ) -> list[ChatMeta]:
        """Pinned chats first, then the most recently updated; ``query`` keeps the chats
        whose title contains it (case-insensitive, ``%`` and ``_`` taken literally)."""

    @abstractmethod
    async def update_session(
        self, session_id: str, *, title: str | None = None, pinned: bool | None = None
    ) -> ChatMeta | None:
        """Change the given fields (and ``updated_at``); ``None`` for an unknown id."""

    @abstractmethod
    async def set_active_run(
        self, session_id: str, run_id: str | None, *, expected: str | None = None
    ) -> bool:
        """Point the chat at ``run_id`` (or clear it); with ``expected``, only if it still
        names that run. Returns whether the row changed."""

    @abstractmethod
    async def delete_session(self, session_id: str) -> bool:
        """Remove everything the chat owns; ``False`` for an unknown id."""

    # -- the event log ---------------------------------------------------------------------

    @abstractmethod
    async def append_events(self, session_id: str, records: Sequence[EventRecord]) -> None:
        """Log ``records`` (of runs of ``session_id``) in one transaction."""

    @abstractmethod
    async def read_events(self, run_id: str, *, after: int = 0) -> list[EventRecord]: ...

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

    @abstractmethod
    async def aclose(self) -> None: ...
