"""Titles: provisional at once, a cleaned model title later, and a manual rename wins."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lovia.exceptions import ProviderError
from lovia.testing import ScriptedProvider, text
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web import ChatStore
from lovia.web.lifecycle import LifecycleBus
from lovia.web.titles import (
    TITLE_CHARS,
    TitleGenerator,
    clean_title,
    generate_title,
    provisional_title,
)

from ..conftest import read_frames, scripted_agent
from .conftest import seed


def test_the_provisional_title_is_the_first_message_on_one_line() -> None:
    assert provisional_title("  hello\n\n  world\t") == "hello world"
    long = provisional_title("word " * 40)
    assert len(long) == TITLE_CHARS and long.endswith("…")
    assert provisional_title(" \n ") == "New chat"


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ("Paris weather", "Paris weather"),
        ('"Paris weather"', "Paris weather"),
        ("Title: Paris weather.", "Paris weather"),
        ("**Title:** “Paris weather”", "Paris weather"),
        ("# Paris weather", "Paris weather"),
        ("<think>the user asks about\nweather</think>\n\nParis weather", "Paris weather"),
        ("<think>never closed\nParis weather", ""),
        ("\n\n  `Paris weather`  \nsecond line", "Paris weather"),
        ("Chat title - Trip planning", "Trip planning"),
        ("「東京の天気」", "東京の天気"),
        ("Bell\x07 and\x00 NUL", "Bell and NUL"),
        ("", ""),
        ("   \n ", ""),
        ('""', ""),
        ("**", ""),
    ],
)
def test_model_decorations_are_cleaned(raw: str, title: str) -> None:
    assert clean_title(raw) == title


def test_a_long_model_title_is_cut() -> None:
    cut = clean_title("x" * 500)
    assert len(cut) == TITLE_CHARS and cut.endswith("…")


async def test_generate_title_asks_the_model_with_the_exchange() -> None:
    provider = ScriptedProvider([text("Title: “Packing for Lisbon”")])
    title = await generate_title(provider, "What should I pack for Lisbon?", "A light jacket.")
    assert title == "Packing for Lisbon"
    sent = provider.calls[0][-1].content
    assert "What should I pack for Lisbon?" in sent and "A light jacket." in sent


async def test_a_blank_model_answer_gives_no_title() -> None:
    assert await generate_title(ScriptedProvider([text("  ")]), "hi") == ""


class HeldProvider(ScriptedProvider):
    """A scripted model whose calls wait until the test releases them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self.entered.set()
        await self.release.wait()
        async for delta in super().stream(*args, **kwargs):
            yield delta


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ChatStore]:
    s = ChatStore.sqlite(str(tmp_path / "titles.db"))
    yield s
    await s.aclose()


async def _seeded(store: ChatStore, message: str = "What should I pack for Lisbon in May?") -> str:
    await seed(
        store,
        "s1",
        [InputEntry("user", message), AssistantTextEntry("A light jacket.")],
        title=provisional_title(message),
    )
    return "s1"


async def test_a_generated_title_replaces_the_provisional_one_and_is_announced(
    store: ChatStore,
) -> None:
    bus = LifecycleBus()
    sub = bus.subscribe()
    titles = TitleGenerator(
        store, model_for=lambda agent: ScriptedProvider([text('"Lisbon packing."')]), bus=bus
    )
    sid = await _seeded(store)
    assert (await store.get_session(sid)).title_provisional  # type: ignore[union-attr]
    assert await titles.retitle(sid, "helper") is True
    meta = await store.get_session(sid)
    assert meta is not None and meta.title == "Lisbon packing" and not meta.title_provisional
    event = await anext(sub)
    assert (event.kind, event.data) == (
        "session_retitled",
        {"session_id": sid, "title": "Lisbon packing"},
    )
    # Titled once: a second attempt leaves it alone (it is no longer provisional).
    assert await titles.retitle(sid, "helper") is False


@pytest.mark.parametrize(
    "model",
    [
        ScriptedProvider([text("   ")]),
        ScriptedProvider([text('"**"')]),
        ScriptedProvider([RuntimeError("title model down")]),
        ScriptedProvider([]),
        None,
    ],
)
async def test_blank_or_failing_title_models_keep_the_provisional_title(
    store: ChatStore, model: Any
) -> None:
    titles = TitleGenerator(store, model_for=lambda agent: model)
    sid = await _seeded(store)
    assert await titles.retitle(sid, "helper") is False
    meta = await store.get_session(sid)
    assert meta is not None and meta.title == "What should I pack for Lisbon in May?"
    assert meta.title_provisional


@pytest.mark.parametrize("release_at", [0, 25, 50])
async def test_fifty_concurrent_renames_beat_a_title_generation(
    make_app: Any, asgi_client: Any, release_at: int
) -> None:
    model = HeldProvider([text("Generated title")])
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    store: ChatStore = app.state.lovia.store
    sid = await _seeded(store)
    titles = TitleGenerator(store, model_for=lambda agent: model)
    task = titles.schedule(sid, "helper")
    await model.entered.wait()  # the generation has read the provisional title

    async def rename(n: int) -> int:
        if n == release_at:
            model.release.set()  # the model answers while the renames are in flight
        r = await client.patch(f"/api/sessions/{sid}", json={"title": f"manual {n}"})
        return int(r.status_code)

    assert set(await asyncio.gather(*(rename(n) for n in range(50)))) == {200}
    model.release.set()
    applied = await task
    meta = await store.get_session(sid)
    assert meta is not None and meta.title.startswith("manual ") and not meta.title_provisional
    if release_at == 50:  # every rename landed first: the generation gave way
        assert applied is False


async def test_titles_never_block_the_chat_and_come_after_it(
    make_app: Any, asgi_client: Any
) -> None:
    model = HeldProvider([text("Title: Greeting")])
    app = make_app(scripted_agent(text("hi!")), generate_titles=True, title_model=model)
    client = await asgi_client(app)
    sub = app.state.lovia.lifecycle.bus.subscribe()
    async with client.stream("POST", "/api/chat/stream", json={"message": "hello"}) as r:
        frames = [f async for f in read_frames(r)]
    assert frames[-1].event == "done" and frames[-1].data["status"] == "completed"
    sid = frames[0].data["session_id"]
    await model.entered.wait()  # the title is asked for only after the run
    assert (await client.get(f"/api/sessions/{sid}")).json()["title"] == "hello"
    model.release.set()
    kinds = []
    while "session_retitled" not in kinds:
        kinds.append((await asyncio.wait_for(anext(sub), 10)).kind)
    assert (await client.get(f"/api/sessions/{sid}")).json()["title"] == "Greeting"


async def test_the_chat_agents_own_model_titles_by_default(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent(text("hi!"), text("Agent-made title")), generate_titles=True)
    client = await asgi_client(app)
    sub = app.state.lovia.lifecycle.bus.subscribe()
    async with client.stream("POST", "/api/chat/stream", json={"message": "hello"}) as r:
        sid = [f async for f in read_frames(r)][0].data["session_id"]
    while (await asyncio.wait_for(anext(sub), 10)).kind != "session_retitled":
        pass
    assert (await client.get(f"/api/sessions/{sid}")).json()["title"] == "Agent-made title"


async def test_a_failing_title_model_does_not_fail_the_run(make_app: Any, asgi_client: Any) -> None:
    model = ScriptedProvider([RuntimeError("no titles today")])
    app = make_app(scripted_agent(text("hi!")), generate_titles=True, title_model=model)
    client = await asgi_client(app)
    async with client.stream("POST", "/api/chat/stream", json={"message": "hello"}) as r:
        frames = [f async for f in read_frames(r)]
    assert frames[-1].data["status"] == "completed"
    await app.state.lovia.lifecycle.titles.join()
    assert (await client.get(f"/api/sessions/{frames[0].data['session_id']}")).json()[
        "title"
    ] == "hello"


async def test_a_pending_title_is_cancelled_at_shutdown(make_app: Any) -> None:
    model = HeldProvider([text("never applied")])
    app = make_app(scripted_agent(text("hi!")), generate_titles=True, title_model=model)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    started = await app.state.lovia.supervisor.start("hello")
    [r async for r in app.state.lovia.supervisor.follow(started.run.run_id)]
    await model.entered.wait()
    titles = app.state.lovia.lifecycle.titles
    assert titles.pending == 1
    await asyncio.wait_for(lifespan.__aexit__(None, None, None), 10)
    assert titles.pending == 0


async def test_a_chat_is_titled_once_even_if_its_first_run_left_nothing(
    make_app: Any, asgi_client: Any
) -> None:
    model = ScriptedProvider([text("Second try"), text("never asked")])
    agent = scripted_agent(ProviderError("down", retryable=False), text("ok"), text("again"))
    app = make_app(agent, generate_titles=True, title_model=model)
    client = await asgi_client(app)
    titles = app.state.lovia.lifecycle.titles
    async with client.stream("POST", "/api/chat/stream", json={"message": "hello"}) as r:
        frames = [f async for f in read_frames(r)]
    assert frames[-1].data["status"] == "failed"
    sid = frames[0].data["session_id"]
    for message in ("hello again", "and again"):
        await titles.join()
        body = {"message": message, "session_id": sid}
        async with client.stream("POST", "/api/chat/stream", json=body) as r:
            assert [f async for f in read_frames(r)][-1].data["status"] == "completed"
    await titles.join()
    assert (await client.get(f"/api/sessions/{sid}")).json()["title"] == "Second try"
    assert len(model.calls) == 1
