"""A hostile user of /api/config and config.json: concurrency, huge and odd input, a write
that cannot be saved."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import create_app
from lovia.web.config.files import load_config
from lovia.web.config.runtime import ConfigRuntime
from lovia.web.config.schema import WebConfig

Client = Callable[[Any], Any]
_LOCAL: dict[str, Any] = {"model": "qwen", "base_url": "http://127.0.0.1:9/v1"}


def _build(config: WebConfig) -> Agent[Any]:
    return Agent("lovia", model=ScriptedProvider([text("ok")]))


async def _setup(asgi_client: Client, tmp_path: Path) -> tuple[ConfigRuntime, httpx.AsyncClient]:
    runtime = ConfigRuntime(load_config(cwd=tmp_path / "p", home=tmp_path / "h"), _build)
    app = create_app({}, db_path=tmp_path / "chat.db", config_runtime=runtime)
    client: httpx.AsyncClient = await asgi_client(app)
    client.base_url = httpx.URL("http://127.0.0.1:8000")
    return runtime, client


async def test_dozens_of_concurrent_writes_all_land(asgi_client: Client, tmp_path: Path) -> None:
    runtime, client = await _setup(asgi_client, tmp_path)
    answers = await asyncio.gather(
        *(
            client.post("/api/config/models", json={**_LOCAL, "name": "same name"})
            for _ in range(40)
        )
    )
    assert all(a.status_code == 201 for a in answers), {a.status_code for a in answers}
    on_disk = json.loads(runtime.path.read_text())
    ids = [m["id"] for m in on_disk["models"]]
    assert len(ids) == 40 == len(set(ids))
    assert ids[0] == "same-name" and "same-name-2" in ids


@pytest.mark.parametrize(
    "body",
    [
        {**_LOCAL, "name": "x" * 10_000},
        {**_LOCAL, "model": "m\x00odel"},
        {**_LOCAL, "name": "line\nbreak"},
        {**_LOCAL, "api_key": "sk with spaces"},
        {**_LOCAL, "api_key": "sk-\x00"},
        {**_LOCAL, "api_key": "k" * 5000},
        {**_LOCAL, "base_url": "http://exa\x00mple.com/v1"},
        {**_LOCAL, "base_url": "javascript:alert(1)"},
        {**_LOCAL, "base_url": "http://host/v1?x=1"},
        {**_LOCAL, "context_window": 0},
        {**_LOCAL, "context_window": 10**12},
        {**_LOCAL, "flavor": "gemini"},
        {**_LOCAL, "id": "ünï"},
        {**_LOCAL, "id": "a" * 65},
        {"base_url": "http://127.0.0.1:9/v1"},
    ],
)
async def test_odd_bodies_are_422_and_nothing_is_saved(
    asgi_client: Client, tmp_path: Path, body: dict[str, Any]
) -> None:
    runtime, client = await _setup(asgi_client, tmp_path)
    answer = await client.post("/api/config/models", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] and "Traceback" not in answer.text
    assert not runtime.path.exists()


async def test_unicode_names_are_kept_and_ids_stay_ascii(
    asgi_client: Client, tmp_path: Path
) -> None:
    runtime, client = await _setup(asgi_client, tmp_path)
    answer = await client.post("/api/config/models", json={**_LOCAL, "name": "Modèle 🚀 rapide"})
    assert answer.status_code == 201
    profile = answer.json()["models"][0]
    assert profile["name"] == "Modèle 🚀 rapide" and profile["id"] == "modele-rapide"
    assert "Modèle 🚀" in runtime.path.read_text(encoding="utf-8")


async def test_odd_paths_are_404(asgi_client: Client, tmp_path: Path) -> None:
    _, client = await _setup(asgi_client, tmp_path)
    await client.post("/api/config/models", json={**_LOCAL, "id": "a"})
    for model_id in ("..%2F..%2Fetc", "%00", "A", "ü"):
        answer = await client.delete(f"/api/config/models/{model_id}")
        assert answer.status_code == 404, (model_id, answer.text)


async def test_a_body_that_is_not_json_or_too_many_models(
    asgi_client: Client, tmp_path: Path
) -> None:
    runtime, client = await _setup(asgi_client, tmp_path)
    broken = await client.post(
        "/api/config/models", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert broken.status_code in (400, 422)
    full = {"models": [{**_LOCAL, "id": f"m{i}"} for i in range(200)]}
    runtime.config = WebConfig.model_validate(full)
    over = await client.post("/api/config/models", json=_LOCAL)
    assert over.status_code == 422 and "models" in over.json()["detail"]


async def test_a_write_that_cannot_be_saved_changes_nothing(
    asgi_client: Client, tmp_path: Path
) -> None:
    if _is_root():
        pytest.skip("as root a read-only folder is still writable (the next test covers it)")
    runtime, client = await _setup(asgi_client, tmp_path)
    runtime.path.parent.mkdir(parents=True)
    runtime.path.parent.chmod(0o500)  # read-only folder: the temp file cannot be created
    try:
        answer = await client.post("/api/config/models", json=_LOCAL)
    finally:
        runtime.path.parent.chmod(0o700)
    assert answer.status_code == 500
    assert "could not save" in answer.json()["detail"] and str(tmp_path) not in answer.text
    assert not runtime.configured and runtime.config.models == []
    assert (await client.get("/api/info")).json()["configured"] is False


def _is_root() -> bool:
    import os

    return os.geteuid() == 0


async def test_a_save_failure_as_root_via_a_directory_in_the_way(
    asgi_client: Client, tmp_path: Path
) -> None:
    runtime, client = await _setup(asgi_client, tmp_path)
    runtime.path.mkdir(parents=True)  # config.json is a directory: os.replace fails
    answer = await client.post("/api/config/models", json=_LOCAL)
    assert answer.status_code == 500, answer.text
    assert "could not save" in answer.json()["detail"] and str(tmp_path) not in answer.text
    assert not runtime.configured
    assert [p.name for p in runtime.path.parent.iterdir()] == ["config.json"]  # no temp left


async def test_the_config_view_names_no_path(asgi_client: Client, tmp_path: Path) -> None:
    _, client = await _setup(asgi_client, tmp_path)
    assert str(tmp_path) not in (await client.get("/api/config")).text
