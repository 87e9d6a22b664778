"""URL access through the ``lovia.stores`` entry-point group, and the public surface."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType
from typing import Any

import lovia.checkpointer
import lovia.session
import lovia.stores
import lovia.stores.memory
import lovia.stores.postgres
import lovia.stores.sql
import lovia.stores.sqlite
import pytest
from lovia.checkpointer import Checkpointer
from lovia.exceptions import StoreError, UserError
from lovia.registry import STORES, entry_points_of
from lovia.session import Session
from lovia.stores import (
    InMemoryCheckpointer,
    InMemorySession,
    PostgresCheckpointer,
    PostgresSession,
    SQLiteCheckpointer,
    SQLiteSession,
    open_checkpointer,
    open_session,
)
from lovia.transcript import InputEntry


def test_the_builtin_schemes_are_registered_entry_points() -> None:
    assert {"memory", "sqlite", "postgresql", "postgres"} <= set(entry_points_of(STORES))


def test_memory_urls_give_fresh_stores() -> None:
    assert isinstance(open_session("memory://"), InMemorySession)
    assert isinstance(open_checkpointer("memory://"), InMemoryCheckpointer)
    assert open_session("memory://") is not open_session("memory://")


async def test_sqlite_urls_open_the_file(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    session = open_session(f"sqlite://{path}?wal=1")
    checkpointer = open_checkpointer(f"sqlite://{path}")
    assert isinstance(session, SQLiteSession) and isinstance(checkpointer, SQLiteCheckpointer)
    await session.append("s", [InputEntry("user", "hi")])
    await session.aclose()
    await checkpointer.aclose()
    async with SQLiteSession(path) as again:
        assert await again.load("s") == [InputEntry("user", "hi")]


async def test_sqlite_memory_url() -> None:
    session = open_session("sqlite://:memory:")
    assert isinstance(session, SQLiteSession)
    await session.append("s", [InputEntry("user", "hi")])
    assert await session.load("s") == [InputEntry("user", "hi")]
    await session.aclose()


async def test_postgres_urls_take_the_schema_from_the_query(pg_dsn: str, pg_schema: str) -> None:
    session = open_session(f"{pg_dsn}?schema={pg_schema}&connect_timeout=5")
    checkpointer = open_checkpointer(f"{pg_dsn.replace('postgresql', 'postgres', 1)}?schema=x")
    assert isinstance(session, PostgresSession)
    assert isinstance(checkpointer, PostgresCheckpointer)
    try:
        await session.append("s", [InputEntry("user", "hi")])
        async with PostgresSession(pg_dsn, schema=pg_schema) as again:
            assert await again.load("s") == [InputEntry("user", "hi")]
    finally:
        await session.aclose()
        await checkpointer.aclose()


@pytest.mark.parametrize("url", ["redis://localhost", "no-scheme", "://x"])
def test_an_unknown_or_missing_scheme_is_a_user_error(url: str) -> None:
    with pytest.raises(UserError) as info:
        open_session(url)
    assert info.value.hint is not None and "sqlite" in info.value.hint


def test_postgres_stores_without_psycopg_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)  # as if the extra were absent
    with pytest.raises(UserError) as info:
        PostgresSession("postgresql://nobody@127.0.0.1/test")
    assert info.value.hint == "pip install 'psycopg[binary,pool]'"


@pytest.mark.parametrize(
    "module",
    [
        lovia.session,
        lovia.checkpointer,
        lovia.stores,
        lovia.stores.memory,
        lovia.stores.sqlite,
        lovia.stores.postgres,
        lovia.stores.sql,
    ],
    ids=lambda m: m.__name__,
)
def test_all_lists_exactly_the_public_names(module: ModuleType) -> None:
    """Every public class and function defined in the module is listed, in sorted order."""
    names = module.__all__
    defined = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (isinstance(v, type) or callable(v))
        and getattr(v, "__module__", None) == module.__name__
    }
    assert names == sorted(names)
    assert defined <= set(names)
    assert all(hasattr(module, n) for n in names)


def test_the_stores_satisfy_the_protocols(tmp_path: Path) -> None:
    """Checked by mypy (structural typing); the runtime part only builds them."""
    sessions: list[Session] = [InMemorySession(), SQLiteSession(tmp_path / "a.db")]
    checkpointers: list[Checkpointer] = [InMemoryCheckpointer(), SQLiteCheckpointer(":memory:")]
    postgres: tuple[type[Session], type[Checkpointer]] = (PostgresSession, PostgresCheckpointer)
    assert len(sessions) == len(checkpointers) == len(postgres) == 2


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("CheckpointOptions", lovia.checkpointer),
        ("Checkpointer", lovia.checkpointer),
        ("RunHead", lovia.checkpointer),
        ("RunSnapshot", lovia.checkpointer),
        ("Segment", lovia.session),
        ("Session", lovia.session),
        ("InMemoryCheckpointer", lovia.stores),
        ("InMemorySession", lovia.stores),
        ("PostgresCheckpointer", lovia.stores),
        ("PostgresSession", lovia.stores),
        ("SQLiteCheckpointer", lovia.stores),
        ("SQLiteSession", lovia.stores),
    ],
)
def test_the_user_facing_names_are_importable_from_lovia(name: str, module: ModuleType) -> None:
    import lovia

    assert getattr(lovia, name) is getattr(module, name)


# -- query parameters (issue 10, item 5) ----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "name", "suggestion"),
    [
        ("sqlite:///tmp/x.db?wall=1", "wall", "'wal'"),
        ("sqlite://:memory:?wal=1&timeout=5", "timeout", None),
        ("memory://?wal=1", "wal", None),
        ("postgresql://nobody@127.0.0.1/test?schem=lovia", "schem", "'schema'"),
        ("postgres://nobody@127.0.0.1/test?sslmod=disable", "sslmod", "'sslmode'"),
    ],
)
def test_an_unknown_query_parameter_is_a_user_error(
    url: str, name: str, suggestion: str | None
) -> None:
    for open_store in (open_session, open_checkpointer):
        with pytest.raises(UserError, match=f"unknown query parameter '{name}'") as info:
            open_store(url)
        hint = info.value.hint or ""
        assert url.partition("://")[0] + "://" in hint
        if suggestion is None:
            assert "did you mean" not in hint
        else:
            assert f"did you mean {suggestion}?" in hint


def test_the_known_query_parameters_are_accepted() -> None:
    assert isinstance(open_session("sqlite://:memory:?wal=1"), SQLiteSession)
    store = open_session("postgresql://nobody@127.0.0.1/test?schema=s&connect_timeout=2")
    assert isinstance(store, PostgresSession)


async def test_a_sqlite_file_in_a_missing_folder_says_so(tmp_path: Path) -> None:
    store = open_session(f"sqlite://{tmp_path}/missing/app.db")
    assert isinstance(store, SQLiteSession)
    with pytest.raises(StoreError, match="the folder .*missing' does not exist") as info:
        await store.load("s")
    assert info.value.hint is not None and "mkdir" in info.value.hint
    await store.aclose()


# -- which store serves a scheme (issue 11, item 5) ------------------------------------------


def fake_store(url: str, *, kind: str) -> Any:
    return ("fake", url, kind)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, EntryPoint]:
    """Entry points of the ``lovia.stores`` group as a test installs them."""
    import lovia.registry

    eps = dict(entry_points_of(STORES))
    monkeypatch.setattr(lovia.registry, "entry_points_of", lambda group: eps)
    return eps


def test_an_entry_point_never_shadows_a_builtin_scheme(installed: dict[str, EntryPoint]) -> None:
    target = f"{__name__}:fake_store"
    installed["sqlite"] = EntryPoint("sqlite", target, STORES)
    installed["Memory"] = EntryPoint("Memory", target, STORES)
    assert isinstance(open_session("sqlite://:memory:"), SQLiteSession)
    assert isinstance(open_session("MEMORY://"), InMemorySession)


def test_an_entry_point_adds_a_scheme(installed: dict[str, EntryPoint]) -> None:
    installed["Redis"] = EntryPoint("Redis", f"{__name__}:fake_store", STORES)
    store: Any = open_checkpointer("redis://cache/0")
    assert store == ("fake", "redis://cache/0", "checkpointer")


def test_a_broken_entry_point_is_a_user_error(installed: dict[str, EntryPoint]) -> None:
    installed["redis"] = EntryPoint("redis", "no_such_module_here:from_url", STORES)
    with pytest.raises(UserError, match="failed to load") as info:
        open_session("redis://cache/0")
    assert info.value.hint is not None and "reinstall" in info.value.hint
