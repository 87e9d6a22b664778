"""The mock wire servers for the probe tests (the provider tests' own fixtures)."""

from __future__ import annotations

from tests.core.providers.conftest import llmock, llmock_session

__all__ = ["llmock", "llmock_session"]
