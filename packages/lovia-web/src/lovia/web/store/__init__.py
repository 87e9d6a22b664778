"""Durable storage for the web layer: the ``ChatStore`` interface and its implementations
(``SQLiteChatStore``; ``PostgresChatStore`` in ``lovia.web.store.postgres``, imported on
use because it needs the ``postgres`` extra)."""

from .base import ChatMeta, ChatStore, RunRecord, ScheduleRow
from .sqlite import SQLiteChatStore

__all__ = ["ChatMeta", "ChatStore", "RunRecord", "SQLiteChatStore", "ScheduleRow"]
