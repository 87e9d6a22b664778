"""Fixtures for the chat tests: a counting tool, an SSE reader for POST streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia import tool
from lovia.tools.base import Tool
from lovia.web import ChatStore

from ..conftest import Frame, read_frames


class Counter:
    """A tool that counts its calls (``calls``), so a test can see it never ran twice."""

    def __init__(self, name: str = "note") -> None:
        self.calls = 0

        def note() -> str:
            """Write a note."""
            self.calls += 1
            return f"note {self.calls}"

        self.tool: Tool = tool(name=name)(note)


async def post_stream(
    client: httpx.AsyncClient, path: str, *, until: str | None = "done", **kwargs: Any
) -> list[Frame]:
    """POST ``path``, read its SSE frames to the first ``until`` frame (or to the end)."""
    async with client.stream("POST", path, **kwargs) as r:
        assert r.status_code == 200, await r.aread()
        out = []
        async for frame in read_frames(r):
            out.append(frame)
            if frame.event == until:
                break
        return out


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ChatStore]:
    s = ChatStore.sqlite(str(tmp_path / "chat.db"))
    yield s
    await s.aclose()
