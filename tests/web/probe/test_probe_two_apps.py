"""Two server instances on one SQLite file (what two processes share: the database)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lovia.testing import text
from lovia.web import ChatStore

from ..conftest import gated_agent, scripted_agent


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """``open_store()``: one more store instance on this test's one database."""
    if request.param == "sqlite":
        return lambda: ChatStore.sqlite(str(tmp_path / "shared.db"))
    dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    return lambda: ChatStore.postgres(dsn, schema=schema)


async def test_a_second_instance_sweeping_at_startup_does_not_end_the_first_ones_run(
    tmp_path: Path, make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("done"))
    first = make_app(agent)
    client_a = await asgi_client(first)
    supervisor = first.state.lovia.supervisor
    started = await supervisor.start("park", session_id="a1")
    await gate.entered.wait()
    second = make_app(scripted_agent(text("other")))
    client_b = await asgi_client(second)  # its startup sweep runs now
    # Documented: the sweep cannot tell another process's live run from a dead one.
    [swept] = (await client_b.get("/api/runs/history")).json()["runs"]
    assert swept["status"] == "interrupted"
    gate.open()
    [rec async for rec in supervisor.follow(started.run.run_id)]
    [record] = (await client_a.get("/api/runs/history")).json()["runs"]
    assert record["status"] == "completed", record


async def test_a_message_to_the_other_instance_does_not_run_a_live_run_twice(
    make_app: Any, asgi_client: Any, open_store: Any
) -> None:
    gate, agent = gated_agent(text("done"))
    first = make_app(agent, store=open_store())
    client_a = await asgi_client(first)
    supervisor = first.state.lovia.supervisor
    started = await supervisor.start("park", session_id="a1")
    await gate.entered.wait()
    second = make_app(scripted_agent(text("other"), text("other again")), store=open_store())
    client_b = await asgi_client(second)
    # The run is live in the first instance: the second must not resume it as well (it
    # would fail as "already completed" and swallow the message); it answers 409.
    body = {"message": "from b", "session_id": "a1"}
    try:  # bounded: before the fix, the answer only came once the first run had ended
        r = await asyncio.wait_for(client_b.post("/api/chat/stream", json=body), 10)
    finally:
        gate.open()
    assert r.status_code == 409, r.text
    assert "another" in r.json()["detail"] and r.json()["hint"]
    assert second.state.lovia.supervisor.live_runs() == []
    [rec async for rec in supervisor.follow(started.run.run_id)]
    [record] = (await client_a.get("/api/runs/history")).json()["runs"]
    assert (record["run_id"], record["status"]) == (started.run.run_id, "completed")
