"""One chat's whole life through the app on each database: its run record, a rename that
beats the model title, rewind, export, delete-all, and the startup sweep."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lovia.testing import ScriptedProvider, text
from lovia.web import ChatStore
from lovia.web.store.base import RunRecord

from ..conftest import read_frames, scripted_agent


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``open_store()``: a new store on this test's database (SQLite file or a fresh
    PostgreSQL schema), so a restart can open it again."""
    if request.param == "sqlite":
        return lambda: ChatStore.sqlite(str(tmp_path / "chat.db"))
    dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    return lambda: ChatStore.postgres(dsn, schema=schema)


async def test_a_chat_lifecycle_on_each_database(
    make_app: Any, asgi_client: Any, open_store: Any
) -> None:
    seeded = open_store()
    await seeded.create_session("old", agent="helper", title="t")
    await seeded.record_run_started(RunRecord("stale", "old", "helper", "chat", "running"))
    await seeded.aclose()

    titles = ScriptedProvider([text("Generated")])
    store = open_store()
    app = make_app(
        scripted_agent(text("one"), text("two")),
        store=store,
        generate_titles=True,
        title_model=titles,
    )
    client = await asgi_client(app)
    [stale] = (await client.get("/api/runs/history", params={"session_id": "old"})).json()["runs"]
    assert stale["status"] == "interrupted"  # swept at startup

    async with client.stream("POST", "/api/chat/stream", json={"message": "first"}) as r:
        sid = [f async for f in read_frames(r)][0].data["session_id"]
    await app.state.lovia.lifecycle.titles.join()
    assert (await client.get(f"/api/sessions/{sid}")).json()["title"] == "Generated"
    r = await client.patch(f"/api/sessions/{sid}", json={"title": "Mine"})
    assert r.json()["title"] == "Mine"
    async with client.stream(
        "POST", "/api/chat/stream", json={"message": "second", "session_id": sid}
    ) as r:
        assert [f async for f in read_frames(r)][-1].data["status"] == "completed"
    runs = (await client.get("/api/runs/history", params={"session_id": sid})).json()["runs"]
    assert [r["status"] for r in runs] == ["completed", "completed"]
    assert all(r["started_at"] <= time.time() for r in runs)

    r = await client.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 1})
    assert r.status_code == 200 and r.json()["message"] == "second"
    md = (await client.get(f"/api/sessions/{sid}/export")).text
    assert md.startswith("# Mine") and "first" in md and "second" not in md

    r = await client.delete("/api/sessions")
    assert sorted(r.json()["deleted"]) == sorted(["old", sid])
    assert (await client.get("/api/runs/history")).json()["runs"] == []
