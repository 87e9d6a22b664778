"""Tiny and absurd limits: event retention, paging extremes, huge titles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lovia.exceptions import UserError
from lovia.testing import text
from lovia.web import EventRetention, SQLiteChatStore, create_app

from ..conftest import frames_until_done, gated_agent


@pytest.mark.parametrize(
    "options", [{"runs_per_session": -1}, {"max_events": -5}, {"runs_per_session": 1.5}]
)
def test_a_negative_or_non_integer_retention_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(UserError) as raised:
        EventRetention(**options)
    assert raised.value.hint
    assert next(iter(options)) in str(raised.value)


async def test_retention_zero_keeps_only_the_live_run(tmp_path: Path, asgi_client: Any) -> None:
    store = SQLiteChatStore(str(tmp_path / "c.db"), retention=EventRetention(0, 1))
    gate, agent = gated_agent(text("parked"), *[text(f"r{n}") for n in range(6)])
    app = create_app(agent, store=store, generate_titles=False)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    parked = await supervisor.start("park", session_id="live")
    await gate.entered.wait()
    for n in range(5):
        async with client.stream(
            "POST", "/api/chat/stream", json={"message": f"m{n}", "session_id": "other"}
        ) as r:
            frames = await frames_until_done(r)
        assert frames[-1].data["status"] == "completed"
    live_events = await store.read_events(parked.run.run_id)
    assert live_events, "a live run is never pruned"
    r = await client.get("/api/chat/stream", params={"session_id": "other"})
    assert r.status_code == 404 and "no run" in r.json()["detail"]
    gate.open()
    [rec async for rec in supervisor.follow(parked.run.run_id)]
    assert [r.status for r in await store.list_runs(session_id="other")] == ["completed"] * 5
