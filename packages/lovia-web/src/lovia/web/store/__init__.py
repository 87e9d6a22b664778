"""Durable storage for the web layer: the ``ChatStore`` interface and its implementations."""

from .base import ChatMeta, ChatStore
from .sqlite import SQLiteChatStore

__all__ = ["ChatMeta", "ChatStore", "SQLiteChatStore"]
