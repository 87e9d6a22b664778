"""Fixtures for the common-set integration tests: the provider tests' llmock server, reused
(imported, so both folders start it the same way)."""

from __future__ import annotations

from tests.core.providers.conftest import _fresh_discovery_memo, llmock, llmock_session

__all__ = ["_fresh_discovery_memo", "llmock", "llmock_session"]
