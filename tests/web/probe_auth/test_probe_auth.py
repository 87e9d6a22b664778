"""Hostile probes of the server token: every API route, the setup gate, the render limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import create_app
from lovia.web.config.files import load_config
from lovia.web.config.runtime import ConfigRuntime
from lovia.web.config.schema import WebConfig

TOKEN = "s3cret-token"


def _build(config: WebConfig) -> Agent[Any]:
    return Agent("lovia", model=ScriptedProvider([text("ok")]))


async def test_an_unconfigured_server_asks_for_the_token_before_it_names_the_setup(
    asgi_client: Any, tmp_path: Path
) -> None:
    runtime = ConfigRuntime(load_config(cwd=tmp_path / "p", home=tmp_path / "h"), _build)
    app = create_app({}, db_path=tmp_path / "chat.db", config_runtime=runtime, token=TOKEN)
    client: httpx.AsyncClient = await asgi_client(app)
    for path in ("/api/chat", "/api/chat/stream", "/api/chat/cancel"):
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = await client.post(path, json={"message": "hi"}, headers=headers)
            assert refused.status_code == 401, (path, refused.text)
            assert "model" not in refused.text
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    gated = await client.post("/api/chat", json={"message": "hi"}, headers=bearer)
    assert gated.status_code == 503 and gated.json()["hint"]


async def test_a_wrong_token_link_is_the_same_401_as_the_api_s(
    asgi_client: Any, tmp_path: Path
) -> None:
    agent = Agent("helper", model=ScriptedProvider([text("ok")]))
    app = create_app(agent, db_path=tmp_path / "chat.db", token=TOKEN, generate_titles=False)
    client: httpx.AsyncClient = await asgi_client(app)
    api = await client.get("/api/info")
    for given in ("nope", "", TOKEN + "x", "\x00", "é" * 1000):
        link = await client.get("/", params={"token": given})
        assert link.status_code == 401 and "set-cookie" not in link.headers
        assert link.json() == api.json()
        assert link.headers["www-authenticate"] == "Bearer"
        assert link.headers["cache-control"] == "no-store"


async def test_another_site_cannot_post_a_form_to_an_open_server(
    asgi_client: Any, tmp_path: Path
) -> None:
    from lovia import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    agent = Agent("helper", model=ScriptedProvider([text("ok")]), workspace=Workspace.local(root))
    app = create_app(agent, db_path=tmp_path / "chat.db", generate_titles=False)
    client: httpx.AsyncClient = await asgi_client(app)
    files = {"file": ("note.txt", b"dropped by another site", "text/plain")}
    host = {"Host": "127.0.0.1:8000"}
    evil = await client.post(
        "/api/workspace/upload", files=files, headers={**host, "Origin": "https://evil.example"}
    )
    assert evil.status_code == 403, evil.text
    assert not (root / "uploads").exists() or not any((root / "uploads").iterdir())
    dream = await client.post("/api/memory/dream", headers={**host, "Origin": "null"})
    assert dream.status_code == 403
    own = await client.post(
        "/api/workspace/upload", files=files, headers={**host, "Origin": "http://127.0.0.1:8000"}
    )
    assert own.status_code == 201, own.text
    cli = await client.post("/api/workspace/upload", files=files, headers=host)  # no Origin
    assert cli.status_code == 201
