"""``ConfigRuntime`` and ``/api/config``: write-only keys, whole-document validation, atomic
persistence, the hot swap (a live run keeps its agent), ``config_changed``, the setup gate
and the rebinding guard."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app
from lovia.web.config.files import ConfigFile, load_config
from lovia.web.config.runtime import ConfigChanged, ConfigRuntime
from lovia.web.config.schema import WebConfig

from tests.web.conftest import Gate, chat, frames_until_done, until

Client = Callable[[Any], Any]
_LOCAL: dict[str, Any] = {"model": "qwen", "base_url": "http://127.0.0.1:9/v1"}


def _builder(gates: dict[str, Gate] | None = None) -> Callable[[WebConfig], Agent[Any]]:
    def build(config: WebConfig) -> Agent[Any]:
        profile = config.chat_profile
        assert profile is not None
        gate = (gates or {}).get(profile.id)
        steps = (
            [call("wait_gate"), text(f"from {profile.id}")]
            if gate
            else [text(f"from {profile.id}")]
        )
        return Agent("lovia", model=ScriptedProvider(steps), tools=[gate.tool] if gate else [])

    return build


def _runtime(tmp_path: Path, builder: Any = None, **kw: Any) -> ConfigRuntime:
    loaded = load_config(cwd=tmp_path / "project", home=tmp_path / "home")
    return ConfigRuntime(loaded, builder or _builder(), **kw)


async def _client(asgi_client: Client, tmp_path: Path, runtime: ConfigRuntime) -> httpx.AsyncClient:
    app = create_app({}, db_path=tmp_path / "chat.db", config_runtime=runtime)
    client: httpx.AsyncClient = await asgi_client(app)
    client.base_url = httpx.URL("http://127.0.0.1:8000")
    return client


async def test_first_run_blocks_chat_until_a_model_is_saved(
    asgi_client: Client, tmp_path: Path
) -> None:
    runtime = _runtime(tmp_path)
    client = await _client(asgi_client, tmp_path, runtime)
    assert (await client.get("/api/info")).json()["configured"] is False
    blocked = await client.post("/api/chat/stream", json={"message": "hi"})
    assert blocked.status_code == 503 and "configured" in blocked.json()["detail"]
    assert blocked.json()["hint"]
    saved = await client.post(
        "/api/config/models", json={**_LOCAL, "api_key": "sk-secret-0123456789"}
    )
    assert saved.status_code == 201, saved.text
    assert (await client.get("/api/info")).json()["configured"] is True
    response = await client.post("/api/chat/stream", json={"message": "hi"})
    frames = await frames_until_done(response)
    assert (
        "".join(f.data.get("delta", "") for f in frames if f.event == "text_delta") == "from qwen"
    )
    on_disk = json.loads(runtime.path.read_text())
    assert on_disk["models"][0]["api_key"] == "sk-secret-0123456789"
    assert stat.S_IMODE(runtime.path.stat().st_mode) == 0o600


async def test_keys_are_write_only(asgi_client: Client, tmp_path: Path) -> None:
    client = await _client(asgi_client, tmp_path, _runtime(tmp_path))
    await client.post(
        "/api/config/models", json={**_LOCAL, "id": "m", "api_key": "sk-secret-0123456789"}
    )
    await client.put(
        "/api/config/search", json={"backend": "off", "tavily_api_key": "tvly-abcdefghijkl"}
    )
    read = await client.get("/api/config")
    assert read.headers["cache-control"] == "no-store"
    assert "sk-secret" not in read.text and "tvly-" not in read.text
    body = read.json()
    assert body["models"][0]["api_key"] == {"set": True, "hint": "…6789"}
    assert body["search"]["tavily_api_key"]["set"] is True
    kept = await client.put(
        "/api/config/models/m", json={**_LOCAL, "name": "Renamed", "api_key": None}
    )
    assert kept.json()["models"][0]["api_key"]["set"] is True
    assert kept.json()["models"][0]["name"] == "Renamed"
    moved = await client.put(
        "/api/config/models/m", json={**_LOCAL, "base_url": "http://127.0.0.1:10/v1"}
    )
    assert moved.json()["models"][0]["api_key"]["set"] is False  # not carried to a new host
    await client.put("/api/config/models/m", json={**_LOCAL, "api_key": "sk-secret-0123456789"})
    cleared = await client.put("/api/config/models/m", json={**_LOCAL, "api_key": ""})
    assert cleared.json()["models"][0]["api_key"] == {"set": False, "hint": None}


async def test_every_write_validates_the_whole_document(
    asgi_client: Client, tmp_path: Path
) -> None:
    runtime = _runtime(tmp_path)
    client = await _client(asgi_client, tmp_path, runtime)
    await client.post("/api/config/models", json={**_LOCAL, "id": "a"})
    before = runtime.path.read_text()
    dup = await client.post("/api/config/models", json={**_LOCAL, "id": "a"})
    assert dup.status_code == 409
    bad_role = await client.put("/api/config/roles", json={"chat": "a", "vision": "nope"})
    assert bad_role.status_code == 422 and "roles.vision" in bad_role.json()["detail"]
    bad_url = await client.post(
        "/api/config/models", json={"model": "x", "base_url": "file:///etc"}
    )
    assert bad_url.status_code == 422 and "base_url" in bad_url.json()["detail"]
    bad_id = await client.post("/api/config/models", json={**_LOCAL, "id": "../../x"})
    assert bad_id.status_code == 422
    unknown_field = await client.post("/api/config/models", json={**_LOCAL, "colour": "red"})
    assert unknown_field.status_code == 422 and "colour" in unknown_field.json()["detail"]
    assert (await client.put("/api/config/models/zz", json=_LOCAL)).status_code == 404
    assert (await client.delete("/api/config/models/zz")).status_code == 404
    assert runtime.path.read_text() == before  # nothing invalid was persisted


async def test_deleting_the_chat_model_is_guarded_and_references_are_nulled(
    asgi_client: Client, tmp_path: Path
) -> None:
    client = await _client(asgi_client, tmp_path, _runtime(tmp_path))
    await client.post("/api/config/models", json={**_LOCAL, "id": "a"})
    await client.post("/api/config/models", json={**_LOCAL, "id": "b"})
    roles = await client.put("/api/config/roles", json={"chat": "a", "vision": "b", "aux": "b"})
    assert roles.json()["roles"] == {"chat": "a", "vision": "b", "aux": "b"}
    guarded = await client.delete("/api/config/models/a")
    assert guarded.status_code == 409 and guarded.json()["hint"]
    gone = await client.delete("/api/config/models/b")
    assert gone.json()["roles"] == {"chat": "a", "vision": None, "aux": None}
    assert [m["id"] for m in gone.json()["models"]] == ["a"]


async def test_a_write_hot_swaps_the_agent_and_a_live_run_keeps_its_own(
    serve: Client, tmp_path: Path
) -> None:
    gate = Gate()
    runtime = _runtime(tmp_path, _builder({"first": gate}))
    events: list[ConfigChanged] = []
    runtime.on_change(events.append)
    app = create_app({}, db_path=tmp_path / "chat.db", config_runtime=runtime)
    client = (await serve(app)).client
    await client.post("/api/config/models", json={**_LOCAL, "id": "first"})
    async with chat(client, "go") as (session, frames):
        await gate.entered.wait()
        await client.post("/api/config/models", json={**_LOCAL, "id": "second"})
        await client.put("/api/config/roles", json={"chat": "second"})
        gate.open()
        seen = await until(frames, "done")
    old = "".join(f.data.get("delta", "") for f in seen if f.event == "text_delta")
    assert old == "from first"
    response = await client.post(
        "/api/chat/stream", json={"message": "again", "session_id": session.data["session_id"]}
    )
    frames_after = await frames_until_done(response)
    new = "".join(f.data.get("delta", "") for f in frames_after if f.event == "text_delta")
    assert new == "from second"
    assert [e.what for e in events] == ["models", "models", "roles"]
    assert all(e.configured for e in events)


async def test_writes_through_a_foreign_host_are_refused(
    asgi_client: Client, tmp_path: Path
) -> None:
    runtime = _runtime(tmp_path)
    client = await _client(asgi_client, tmp_path, runtime)
    evil = {"host": "attacker.example:8000"}
    refused = await client.post("/api/config/models", json=_LOCAL, headers=evil)
    assert refused.status_code == 403
    assert (await client.get("/api/config", headers=evil)).status_code == 200  # reads stay
    assert not runtime.path.exists()
    for host in ("localhost:8000", "[::1]:8000", "127.0.0.2"):
        ok = await client.post("/api/config/models", json=_LOCAL, headers={"host": host})
        assert ok.status_code in (201, 409), (host, ok.text)


async def test_token_auth_lifts_the_rebinding_guard(asgi_client: Client, tmp_path: Path) -> None:
    runtime = _runtime(tmp_path)
    app = create_app({}, db_path=tmp_path / "chat.db", config_runtime=runtime, token="s3cret-token")
    client: httpx.AsyncClient = await asgi_client(app)
    evil = {"host": "attacker.example:8000"}
    assert (await client.get("/api/config")).status_code == 401
    lifted = await client.put(
        "/api/config/search",
        json={"backend": "off"},
        headers={**evil, "authorization": "Bearer s3cret-token"},
    )
    assert lifted.status_code == 200, lifted.text


async def test_test_endpoint_reuses_the_stored_key(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"data": [{"id": "qwen"}]})

    runtime = _runtime(tmp_path)
    from lovia.web.config.runtime import ProfileInput, TestRequest

    await runtime.add_model(ProfileInput(id="m", api_key="sk-stored", **_LOCAL))
    transport = httpx.MockTransport(answer)
    result = await runtime.test(TestRequest(id="m", **_LOCAL), transport=transport)
    assert result.ok and seen == ["Bearer sk-stored"]
    await runtime.test(TestRequest(id="m", api_key="sk-new", **_LOCAL), transport=transport)
    assert seen[-1] == "Bearer sk-new"
    elsewhere = {**_LOCAL, "base_url": "http://127.0.0.1:10/v1"}
    await runtime.test(TestRequest(id="m", **elsewhere), transport=transport)
    assert seen[-1] is None  # a stored key never goes to another endpoint


async def test_test_endpoint_over_http_probes_without_saving(
    asgi_client: Client, tmp_path: Path
) -> None:
    runtime = _runtime(tmp_path)
    client = await _client(asgi_client, tmp_path, runtime)
    probe = await client.post(
        "/api/config/test", json={"model": "m", "base_url": "http://127.0.0.1:9/v1"}
    )
    assert probe.status_code == 200 and probe.json()["status"] == "unreachable"
    assert not runtime.path.exists()


def test_a_config_file_that_is_complete_builds_at_once(tmp_path: Path) -> None:
    loaded = ConfigFile(
        WebConfig.model_validate({"models": [_LOCAL]}), tmp_path / "c.json", "user", exists=True
    )
    runtime = ConfigRuntime(loaded, _builder())
    assert runtime.configured and runtime.served_agent().name == "lovia"


@pytest.mark.parametrize("agents", [{}, None])
def test_empty_agents_need_a_config_runtime(tmp_path: Path, agents: Any) -> None:
    from lovia.exceptions import UserError

    with pytest.raises(UserError):
        create_app(agents if agents is not None else {}, db_path=tmp_path / "x.db")
