from __future__ import annotations

import httpx
import pytest

from ..conftest import read_frames
from .conftest import Workers

pytestmark = pytest.mark.slow


async def test_smoke(workers: Workers) -> None:
    a, b = await workers.start(2)
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as client:
        async with client.stream("POST", "/api/chat/stream", json={"message": "quick"}) as r:
            assert r.status_code == 200, await r.aread()
            frames = []
            async for f in read_frames(r):
                frames.append(f)
                if f.event == "done":
                    break
    print([(f.id, f.event) for f in frames])
    assert frames[-1].data["status"] == "completed"
