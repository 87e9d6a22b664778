"""``/api/memory``: the notes of a served agent's ``Memory``, and dreams on demand."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from lovia import Agent, Memory
from lovia.testing import ScriptedProvider, text


class HeldProvider(ScriptedProvider):
    """A scripted model whose every reply waits until the test releases it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self.entered.set()
        await self.release.wait()
        async for delta in super().stream(*args, **kwargs):
            yield delta


def memory(root: Path, **options: Any) -> Memory:
    options.setdefault("auto_curate", False)
    return Memory(root, expand_query=False, summarize_recall=False, index=None, **options)


def agent_with(mem: Memory | None, *script: Any, name: str = "helper") -> Agent[Any]:
    return Agent(
        name=name, model=ScriptedProvider(list(script)), plugins=[mem] if mem is not None else []
    )


async def test_get_put_round_trip_normalises(
    tmp_path: Path, make_app: Callable[..., FastAPI], asgi_client: Any
) -> None:
    mem = memory(tmp_path / "mem", notes_budget=500)
    client: httpx.AsyncClient = await asgi_client(make_app(agent_with(mem)))
    empty = (await client.get("/api/memory")).json()
    assert empty == {"content": "", "used": 0, "budget": 500}

    body = "# My notes\r\n* Likes tea.\n\nsome prose\n- [2026-01]   Lives   in Porto \n- likes TEA"
    put = await client.put("/api/memory", json={"content": body})
    assert put.status_code == 200, put.text
    stored = put.json()
    lines = stored["content"].splitlines()
    assert (
        len(lines) == 2
        and lines[0].endswith("] Likes tea")
        and lines[1] == ("- [2026-01] Lives in Porto")
    )
    assert stored["used"] == len(stored["content"]) and stored["budget"] == 500
    assert (await client.get("/api/memory?agent=helper")).json() == stored
    assert mem.notes_body() == stored["content"]


async def test_no_memory_unknown_agent_and_several_agents_are_404(
    tmp_path: Path, make_app: Callable[..., FastAPI], asgi_client: Any
) -> None:
    client: httpx.AsyncClient = await asgi_client(make_app(agent_with(None)))
    for method, url in (("GET", "/api/memory"), ("POST", "/api/memory/dream")):
        r = await client.request(method, url)
        assert r.status_code == 404 and "no memory" in r.json()["detail"]
    assert (await client.put("/api/memory", json={"content": ""})).status_code == 404
    assert (await client.get("/api/memory?agent=nobody")).status_code == 404

    both = {"a": agent_with(memory(tmp_path / "a"), name="a"), "b": agent_with(None, name="b")}
    client = await asgi_client(make_app(both, db_path=tmp_path / "two.db"))
    assert (await client.get("/api/memory")).status_code == 404  # which agent?
    assert (await client.get("/api/memory?agent=a")).status_code == 200
    assert (await client.get("/api/memory?agent=b")).status_code == 404


async def test_put_bodies_are_validated_naming_the_field(
    tmp_path: Path, make_app: Callable[..., FastAPI], asgi_client: Any
) -> None:
    client: httpx.AsyncClient = await asgi_client(make_app(agent_with(memory(tmp_path / "m"))))
    for body, field in (
        ({}, "content"),
        ({"content": 5}, "content"),
        ({"content": "x" * 1_000_001}, "content"),
        ({"content": "", "extra": 1}, "extra"),
    ):
        r = await client.put("/api/memory", json=body)
        assert r.status_code == 422 and field in r.json()["detail"], (body, r.text)
    r = await client.put(
        "/api/memory", content=b"\xff\xfe not json", headers={"content-type": "application/json"}
    )
    assert r.status_code in (400, 422) and "Traceback" not in r.text
    # A NUL never reaches the file; a lone surrogate is refused at the edge.
    json_type = {"content-type": "application/json"}
    r = await client.put("/api/memory", content=b'{"content": "- a\\u0000b"}', headers=json_type)
    assert r.status_code == 200 and r.json()["content"].endswith("] ab\n")
    r = await client.put("/api/memory", content=b'{"content": "- c\\ud800d"}', headers=json_type)
    assert r.status_code == 422 and "content" in r.json()["detail"]


async def test_dream_returns_counts_with_the_agents_model(
    tmp_path: Path, make_app: Callable[..., FastAPI], asgi_client: Any
) -> None:
    mem = memory(tmp_path / "m")
    reply = json.dumps({"notes": [{"fact": "Likes tea and coffee", "month": "2026-11"}]})
    client: httpx.AsyncClient = await asgi_client(make_app(agent_with(mem, text(reply))))
    await client.put("/api/memory", json={"content": "- likes tea\n- likes coffee\n- drinks tea"})
    r = await client.post("/api/memory/dream")
    assert r.status_code == 200, r.text
    assert r.json() == {"before": 3, "after": 1}
    assert (await client.get("/api/memory")).json()["content"] == (
        "- [2026-11] Likes tea and coffee\n"
    )
    empty = memory(tmp_path / "empty")
    client = await asgi_client(make_app(agent_with(empty), db_path=tmp_path / "e.db"))
    assert (await client.post("/api/memory/dream")).json() == {"before": 0, "after": 0}


async def test_shutdown_drains_background_curation(
    tmp_path: Path, make_app: Callable[..., FastAPI]
) -> None:
    digest = json.dumps({"remember": ["Lives in Lisbon"], "retire": [], "summary": ""})
    curator = HeldProvider([text(digest)])
    mem = Memory(
        tmp_path / "m", model=curator, index=None, auto_curate=True, curate_in_background=True
    )
    app = make_app(agent_with(mem, text("Welcome!")))
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        message = {"message": "I just moved to Lisbon"}
        async with client.stream("POST", "/api/chat/stream", json=message) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("event: done"):
                    break
    await asyncio.wait_for(curator.entered.wait(), 10)  # the run ended; curation is held
    shutdown = asyncio.ensure_future(lifespan.__aexit__(None, None, None))
    done, _ = await asyncio.wait({shutdown}, timeout=0.2)
    assert not done  # shutdown waits for the curation
    curator.release.set()
    await asyncio.wait_for(shutdown, 20)
    assert "Lives in Lisbon" in mem.notes_body()
