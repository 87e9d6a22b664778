"""Helpers for the sessions tests: seeding a chat's transcript straight into the store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lovia.web import ChatStore


async def seed(
    store: ChatStore,
    session_id: str,
    *segments: Sequence[Any],
    title: str = "seeded",
    meta: dict[str, Any] | None = None,
) -> None:
    """Create the chat and append each of ``segments`` as one stored run (``meta`` on the
    last one)."""
    await store.create_session(session_id, agent="helper", title=title)
    for n, entries in enumerate(segments):
        last = n == len(segments) - 1
        await store.session.append(session_id, entries, meta=meta if last else None)


from tests.support import pg_dsn, pg_dsn_or_none, pg_schema  # noqa: E402, F401  (fixtures)
