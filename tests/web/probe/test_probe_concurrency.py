"""Dozens of chats at once on an SQLite file and on PostgreSQL: delete-all while 20 runs
stream, and renames racing the model titles."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lovia.testing import ScriptedProvider, text
from lovia.web import ChatStore

from ..conftest import gated_agent, read_frames, scripted_agent

CHATS = 20


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ChatStore:
    if request.param == "sqlite":
        return ChatStore.sqlite(str(tmp_path / "chat.db"))
    dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    return ChatStore.postgres(dsn, schema=schema)


async def test_delete_all_while_twenty_runs_stream(
    make_app: Any, asgi_client: Any, store: ChatStore
) -> None:
    gate, agent = gated_agent(*[text("late") for _ in range(CHATS)])
    app = make_app(agent, store=store, max_background_runs=CHATS + 4)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    entered = 0

    async def stream(n: int) -> list[str]:
        body = {"message": f"chat {n}", "session_id": f"c{n}"}
        async with client.stream("POST", "/api/chat/stream", json=body) as r:
            assert r.status_code == 200, await r.aread()
            return [f.event async for f in read_frames(r)]

    streams = [asyncio.create_task(stream(n)) for n in range(CHATS)]
    deadline = asyncio.get_running_loop().time() + 60
    while len(supervisor.live_runs()) < CHATS or not gate.entered.is_set():
        assert asyncio.get_running_loop().time() < deadline, len(supervisor.live_runs())
        await asyncio.sleep(0.01)
    entered = len(supervisor.live_runs())
    r = await client.delete("/api/sessions")
    assert r.status_code == 200, r.text
    assert len(r.json()["deleted"]) == CHATS == entered
    ends = await asyncio.wait_for(asyncio.gather(*streams), 60)
    assert all(events[-1] == "done" for events in ends)
    assert supervisor.live_runs() == []
    assert (await client.get("/api/sessions")).json()["sessions"] == []
    assert (await client.get("/api/runs/history")).json()["runs"] == []
    for n in range(CHATS):
        assert await store.session.load(f"c{n}") == []
        assert await store.latest_run(f"c{n}") is None


async def test_renames_racing_model_titles_always_win(
    make_app: Any, asgi_client: Any, store: ChatStore
) -> None:
    titles = ScriptedProvider([text(f"Generated {n}") for n in range(CHATS)])
    app = make_app(
        scripted_agent(*[text("hi") for _ in range(CHATS)]),
        store=store,
        generate_titles=True,
        title_model=titles,
        max_background_runs=CHATS + 4,
    )
    client = await asgi_client(app)

    async def one(n: int) -> None:
        body = {"message": f"chat {n}", "session_id": f"t{n}"}
        async with client.stream("POST", "/api/chat/stream", json=body) as r:
            events = [f.event async for f in read_frames(r)]
        assert events[-1] == "done"
        r = await client.patch(f"/api/sessions/t{n}", json={"title": f"Mine {n}"})
        assert r.status_code == 200

    await asyncio.gather(*(one(n) for n in range(CHATS)))
    await app.state.lovia.lifecycle.titles.join()
    for n in range(CHATS):
        assert (await client.get(f"/api/sessions/t{n}")).json()["title"] == f"Mine {n}"


async def test_search_takes_wildcards_literally_through_the_api(
    make_app: Any, asgi_client: Any, store: ChatStore
) -> None:
    app = make_app(scripted_agent(), store=store)
    client = await asgi_client(app)
    for sid, title in [("p", "100% done"), ("u", "a_b"), ("b", "back\\slash"), ("x", "plain")]:
        await store.create_session(sid, agent="helper", title=title)
    for q, expected in [
        ("%", ["p"]),
        ("_", ["u"]),
        ("\\", ["b"]),
        ("%_\\", []),
        ("A", ["b", "u", "x"]),
    ]:
        r = await client.get("/api/sessions", params={"q": q})
        assert r.status_code == 200
        assert sorted(s["id"] for s in r.json()["sessions"]) == sorted(expected), q
