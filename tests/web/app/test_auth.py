"""Authentication: the server token by cookie or bearer, ``/?token=``, custom ``auth``, the
rebinding guard, CORS and the hostile inputs a public server meets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException
from lovia.exceptions import UserError
from lovia.testing import text
from lovia.web import (
    ChatStore,
    RouterDeps,
    build_api_router,
    generate_token,
    install_error_handlers,
    is_loopback,
    rebinding_guard,
    token_dependency,
)

from ..conftest import read_frames, scripted_agent

TOKEN = "s3cret-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


async def test_create_app_has_no_auth_by_default(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    assert (await client.get("/api/info")).status_code == 200


async def test_the_token_guards_the_api_but_not_health_or_the_schema(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app(scripted_agent(), token=TOKEN))
    refused = await client.get("/api/info")
    assert refused.status_code == 401
    assert "server token" in refused.json()["detail"] and TOKEN not in refused.text
    assert refused.headers["www-authenticate"] == "Bearer"
    assert (await client.post("/api/chat/stream", json={"message": "hi"})).status_code == 401
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/api/openapi.json")).status_code == 200
    assert (await client.get("/api/info", headers=BEARER)).status_code == 200
    lower = {"Authorization": f"bearer {TOKEN}"}
    assert (await client.get("/api/info", headers=lower)).status_code == 200
    cookie = {"Cookie": f"lovia_token={TOKEN}"}
    assert (await client.get("/api/info", headers=cookie)).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": "Bearer " + "x" * 100_000},
        {"Authorization": "Bearer s3cret-t\x00ken"},
        {"Authorization": "Bearer ünïcødé".encode()},
        {"Cookie": "lovia_token=ünïcødé".encode()},
        {"Cookie": "lovia_token=" + "a" * 50_000},
        {"Cookie": "lovia_token="},
    ],
)
async def test_a_wrong_or_malformed_credential_is_a_plain_401(
    make_app: Any, asgi_client: Any, headers: dict[str, Any]
) -> None:
    client = await asgi_client(make_app(scripted_agent(), token=TOKEN))
    r = await client.get("/api/info", headers=headers)
    assert r.status_code == 401 and "server token" in r.json()["detail"]


async def test_a_query_token_is_not_accepted_on_an_api_route(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app(scripted_agent(), token=TOKEN))
    assert (await client.get("/api/info", params={"token": TOKEN})).status_code == 401
    r = await client.post("/api/chat/stream", params={"token": TOKEN}, json={"message": "x"})
    assert r.status_code == 401


async def test_the_token_link_sets_the_cookie_and_redirects_without_the_token(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app(scripted_agent(), token=TOKEN))
    r = await client.get("/", params={"token": TOKEN, "lang": "zh"})
    assert r.status_code == 303 and r.headers["location"] == "/?lang=zh"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"lovia_token={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert r.headers["cache-control"] == "no-store"
    assert (await client.get("/api/info")).status_code == 200  # the client kept the cookie
    bare = await client.get("/", params={"token": f"  {TOKEN} "})
    assert bare.headers["location"] == "/"
    fresh = await asgi_client(client._transport.app)  # a client without the cookie
    wrong = await fresh.get("/", params={"token": "nope"})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers


async def test_tokens_are_stripped_and_a_blank_one_fails_fast(make_app: Any) -> None:
    app = make_app(scripted_agent(), token=f"  {TOKEN}\n")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        assert (await client.get("/api/info", headers=BEARER)).status_code == 200
    for bad in ("", "   ", "\n", "has space", 'quo"te', "x" * 513, "ü"):
        with pytest.raises(UserError):
            make_app(scripted_agent(), token=bad)
    with pytest.raises(UserError, match="blank"):
        token_dependency("  ")
    with pytest.raises(UserError, match="mutually exclusive"):
        make_app(scripted_agent(), token=TOKEN, auth=lambda: None)


def test_generated_tokens_are_long_random_and_usable() -> None:
    tokens = {generate_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 43 for t in tokens)
    token_dependency(next(iter(tokens)))  # every generated token is a valid server token


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("app.localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.0.0.1", False),
        ("192.168.1.2", False),
        ("evil.com", False),
        ("localhost.evil.com", False),
        ("127.0.0.1.nip.io", False),
        ("::ffff:10.0.0.1", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _require_key(x_key: str | None = Header(default=None)) -> None:
    if x_key != "k":
        raise HTTPException(401, detail="bad key")


async def test_a_custom_auth_dependency_guards_the_api(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent(), auth=_require_key))
    assert (await client.get("/api/info")).status_code == 401
    assert (await client.get("/api/info", headers={"X-Key": "k"})).status_code == 200
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/", params={"token": "k"})).status_code == 404  # no token link


def _embedded(tmp_path: Path, token: str | None = None, auth: Any = None) -> FastAPI:
    """An embedder's app: the lovia API plus a config write guarded against rebinding."""
    app = FastAPI()
    install_error_handlers(app)
    guard = [Depends(token_dependency(token))] if token else []
    if auth is not None:
        from lovia.web.auth import custom_auth_dependency

        guard = [Depends(custom_auth_dependency(auth))]
    deps = RouterDeps(scripted_agent(text("embedded hi")), ChatStore.sqlite(str(tmp_path / "e.db")))
    app.include_router(build_api_router(deps), prefix="", dependencies=guard)
    config = APIRouter()

    @config.post("/api/config", dependencies=[Depends(rebinding_guard)])
    async def write_config() -> dict[str, bool]:
        return {"written": True}

    @config.get("/api/config", dependencies=[Depends(rebinding_guard)])
    async def read_config() -> dict[str, bool]:
        return {"read": True}

    app.include_router(config, dependencies=guard)
    return app


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.com", 403),
        ("evil.com:8000", 403),
        ("127.0.0.1.evil.com", 403),
        ("10.0.0.5:8000", 403),
        ("[::ffff:10.0.0.1]:80", 403),
        ("127.0.0.1:8000", 200),
        ("localhost:8000", 200),
        ("[::1]:8000", 200),
        ("[::1]", 200),
    ],
)
async def test_the_rebinding_guard_refuses_foreign_hosts_on_an_open_server(
    tmp_path: Path, asgi_client: Any, host: str, status: int
) -> None:
    client = await asgi_client(_embedded(tmp_path))
    r = await client.post("/api/config", headers={"Host": host})
    assert r.status_code == status
    if status == 403:
        assert "rebinding" in r.json()["detail"]
    assert (await client.get("/api/config", headers={"Host": host})).status_code == 200


async def test_token_auth_or_a_custom_auth_lifts_the_rebinding_guard(
    tmp_path: Path, asgi_client: Any
) -> None:
    client = await asgi_client(_embedded(tmp_path, token=TOKEN))
    evil = {"Host": "evil.com"}
    assert (await client.post("/api/config", headers=evil)).status_code == 401
    assert (await client.post("/api/config", headers={**evil, **BEARER})).status_code == 200
    custom = await asgi_client(_embedded(tmp_path / "c", auth=_require_key))
    ok = await custom.post("/api/config", headers={**evil, "X-Key": "k"})
    assert ok.status_code == 200


async def test_an_embedded_router_serves_the_api_under_the_embedders_auth(
    tmp_path: Path, asgi_client: Any
) -> None:
    tmp_path.mkdir(exist_ok=True)
    app = _embedded(tmp_path, token=TOKEN)
    client = await asgi_client(app)
    assert "lovia" not in app.state._state  # the router carries its own state
    assert (await client.get("/api/info")).status_code == 401
    async with client.stream(
        "POST", "/api/chat/stream", json={"message": "hi"}, headers=BEARER
    ) as r:
        assert r.status_code == 200
        frames = [f async for f in read_frames(r)]
    assert frames[-1].event == "done" and frames[-1].data["output"] == "embedded hi"
    missing = await client.get("/api/sessions/nope", headers=BEARER)
    assert missing.status_code == 404 and missing.json()["detail"]  # ErrorBody, not a 500
    assert (await client.get("/api/agents/helper", headers=BEARER)).json()["name"] == "helper"
    invalid = app.openapi()["paths"]["/api/sessions/{session_id}"]["patch"]["responses"]["422"]
    assert invalid["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


async def test_cors_headers_only_with_cors_origins(make_app: Any, asgi_client: Any) -> None:
    origin = {"Origin": "https://app.example.com"}
    plain = await asgi_client(make_app(scripted_agent()))
    r = await plain.get("/api/info", headers=origin)
    assert not any(h.startswith("access-control-") for h in r.headers)
    app = make_app(scripted_agent(), cors_origins=["https://app.example.com"], token=TOKEN)
    cors = await asgi_client(app)
    r = await cors.get("/api/info", headers={**origin, **BEARER})
    assert r.headers["access-control-allow-origin"] == "https://app.example.com"
    assert r.headers["access-control-allow-credentials"] == "true"
    preflight = await cors.options(
        "/api/chat/stream",
        headers={**origin, "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 200  # a preflight carries no credentials
    other = await cors.get("/api/info", headers={"Origin": "https://evil.com", **BEARER})
    assert "access-control-allow-origin" not in other.headers
    with pytest.raises(UserError, match="cors_origins"):
        make_app(scripted_agent(), cors_origins=[""])


async def test_a_hundred_concurrent_bad_tokens_over_real_uvicorn(make_app: Any, serve: Any) -> None:
    live = await serve(make_app(scripted_agent(), token=TOKEN))

    async def attempt(i: int) -> int:
        headers = {"Authorization": f"Bearer {TOKEN[:-1]}{i}"}
        status: int = (await live.client.get("/api/info", headers=headers)).status_code
        return status

    statuses = await asyncio.gather(*(attempt(i) for i in range(100)))
    assert statuses == [401] * 100
    assert (await live.client.get("/api/info", headers=BEARER)).status_code == 200


async def test_hostile_headers_over_real_uvicorn_never_get_a_5xx(make_app: Any, serve: Any) -> None:
    live = await serve(make_app(scripted_agent(), token=TOKEN))
    for value in (b"Bearer \xff\xfe", b"Bearer " + b"A" * 60_000, "Bearer ✓".encode()):
        try:
            r = await live.client.get("/api/info", headers={"Authorization": value})
        except httpx.RemoteProtocolError:  # uvicorn may drop a header it finds too large
            continue
        assert r.status_code in (400, 401, 431)
    r = await live.client.get("/api/info", params={"token": TOKEN})
    assert r.status_code == 401
