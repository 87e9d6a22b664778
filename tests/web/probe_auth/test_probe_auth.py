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
