"""Building a chat store: ``ChatStore.from_url`` and the constructors, the missing-extra
error, and ``create_app(db_path=..., generate_titles=False)`` with a PostgreSQL URL."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lovia.exceptions import UserError
from lovia.testing import text
from lovia.web import ChatStore, PostgresChatStore, SQLiteChatStore, create_app

from ..conftest import scripted_agent


async def test_a_plain_path_and_an_sqlite_url_are_sqlite_files(tmp_path: Path) -> None:
    plain = ChatStore.from_url(str(tmp_path / "a" / "chat.db"))
    url = ChatStore.from_url(f"sqlite://{tmp_path}/b.db?wal=0")
    try:
        assert isinstance(plain, SQLiteChatStore) and plain.path == str(tmp_path / "a" / "chat.db")
        assert isinstance(url, SQLiteChatStore) and url.path == f"{tmp_path}/b.db"
        await plain.create_session("s", agent="helper", title="t")
        await url.create_session("s", agent="helper", title="t")
    finally:
        await plain.aclose()
        await url.aclose()
    assert (tmp_path / "a" / "chat.db").is_file() and (tmp_path / "b.db").is_file()


async def test_memory_urls_and_in_memory_stores_are_private() -> None:
    first, second = ChatStore.from_url("memory://"), ChatStore.in_memory()
    try:
        await first.create_session("s", agent="helper", title="t")
        assert await second.get_session("s") is None
        assert await first.get_session("s") is not None
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.parametrize(
    "url",
    ["", "redis://localhost/0", "memory://somewhere", "sqlite:///x.db?wall=1", "sqlite://"],
)
def test_an_unusable_url_is_a_user_error_with_a_hint(url: str) -> None:
    with pytest.raises(UserError) as caught:
        ChatStore.from_url(url)
    assert caught.value.hint


def test_postgres_without_psycopg_names_the_lovia_web_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "psycopg" else real(name, *a),
    )
    with pytest.raises(UserError) as caught:
        ChatStore.postgres("postgresql://nobody@127.0.0.1/none")
    assert "lovia-web" in (caught.value.hint or "") and "postgres" in (caught.value.hint or "")


async def test_a_postgres_url_takes_its_schema(pg_dsn: str, pg_schema: str) -> None:
    store = ChatStore.from_url(f"{pg_dsn}?schema={pg_schema}&connect_timeout=5")
    try:
        assert isinstance(store, PostgresChatStore) and store.schema == pg_schema
        await store.create_session("s", agent="helper", title="t")
    finally:
        await store.aclose()
    again = ChatStore.postgres(pg_dsn, schema=pg_schema)
    try:
        assert (await again.get_session("s")) is not None
    finally:
        await again.aclose()


async def test_create_app_serves_from_a_postgres_url(
    pg_dsn: str, pg_schema: str, asgi_client: Any
) -> None:
    app = create_app(
        scripted_agent(text("hello back")),
        db_path=f"{pg_dsn}?schema={pg_schema}",
        generate_titles=False,
    )
    store = app.state.lovia.store
    assert isinstance(store, PostgresChatStore)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    started = await supervisor.start("hello")
    [r async for r in supervisor.follow(started.run.run_id)]
    listed = (await client.get("/api/sessions")).json()["sessions"]
    assert [s["id"] for s in listed] == [started.run.session_id]
    entries = await store.session.load(started.run.session_id)
    assert [getattr(e, "content", None) for e in entries] == ["hello", "hello back"]
    assert await store.last_seq(started.run.run_id) > 0
