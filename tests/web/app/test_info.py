"""``/api/info`` (features, configured) and agent details; the UI hook."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from fastapi import FastAPI
from lovia import Agent
from lovia.context import Compaction
from lovia.testing import ScriptedProvider

from ..conftest import deploy, scripted_agent

FEATURES = {
    "checkpointing",
    "titles",
    "followups",
    "scheduling",
    "workspace",
    "memory",
    "rewind",
    "events",
    "model_config",
}


async def test_info_reports_every_feature_and_what_the_server_holds(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    info = (await client.get("/api/info")).json()
    assert set(info["features"]) == FEATURES and info["configured"] is True
    assert info["features"]["checkpointing"] is True
    assert info["features"]["scheduling"] is False
    app.state.lovia.features["memory"] = True  # what a mounted part switches on
    assert (await client.get("/api/info")).json()["features"]["memory"] is True


async def test_an_agent_without_a_model_makes_the_server_unconfigured(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app({"a": scripted_agent(name="a"), "b": Agent(name="b")}))
    assert (await client.get("/api/info")).json()["configured"] is False
    assert (await client.get("/api/agents/b")).json()["context_window"] is None


class _WindowedProvider(ScriptedProvider):
    def context_window(self) -> int | None:
        return 32_768


async def test_agent_info_has_capabilities_and_the_resolved_context_window(
    make_app: Any, asgi_client: Any
) -> None:
    vision = Agent(
        name="eyes",
        model=_WindowedProvider([], supports_vision=True),
        tools=[deploy],
    )
    configured = Agent(
        name="cfg",
        model=_WindowedProvider([]),
        context_policy=Compaction(context_window=8_000),
    )
    client = await asgi_client(make_app({"eyes": vision, "cfg": configured}))
    eyes = (await client.get("/api/agents/eyes")).json()
    assert eyes["capabilities"] == ["vision", "approvals"] and eyes["tools"] == ["deploy"]
    assert eyes["context_window"] == 32_768  # the provider's claim
    cfg = (await client.get("/api/agents/cfg")).json()
    assert cfg["context_window"] == 8_000  # the configured window wins


async def test_a_model_string_is_resolved_without_probing_the_official_api(
    make_app: Any, asgi_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    client = await asgi_client(make_app(Agent(name="gpt", model="openai:gpt-4o")))
    info = (await client.get("/api/agents/gpt")).json()
    assert info["model"] == "openai:gpt-4o"
    assert info["context_window"] == 128_000  # the bundled table; no network call is made


@pytest.mark.parametrize("ui", [True, False])
async def test_the_ui_hook_is_called_only_with_ui(
    make_app: Any, asgi_client: Any, monkeypatch: pytest.MonkeyPatch, ui: bool
) -> None:
    mounted: list[Any] = []
    fake = types.ModuleType("lovia.web.ui")
    fake.mount_ui = lambda app, state: mounted.append(state)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lovia.web.ui", fake)
    app: FastAPI = make_app(scripted_agent(), ui=ui)
    assert mounted == ([app.state.lovia] if ui else [])
    client = await asgi_client(app)
    assert (await client.get("/")).status_code == 404
    assert (await client.get("/static/app.js")).status_code == 404
