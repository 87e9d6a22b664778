"""The first-run setup page in a real browser: an unconfigured server opens on the model
form; testing and saving a model (``/api/config``) unlocks the chat. Runs where the server
has the runtime configuration (``lovia.web.config``)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, text

from tests.web.ui.test_browser_chat import open_page, send

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        importlib.util.find_spec("lovia.web.config") is None,
        reason="this server has no runtime configuration (lovia.web.config, /api/config)",
    ),
]


async def test_first_run_setup_saves_a_model_and_unlocks_chat(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    # Imported by name: the module is another distribution part's (absent on older servers).
    load_config = importlib.import_module("lovia.web.config.files").load_config
    ConfigRuntime = importlib.import_module("lovia.web.config.runtime").ConfigRuntime

    def build(config: Any) -> Agent[Any]:
        return Agent("lovia", model=ScriptedProvider([text(f"from {config.chat_profile.id}")]))

    loaded = load_config(cwd=tmp_path / "project", home=tmp_path / "home")
    server = await serve_ui({}, config_runtime=ConfigRuntime(loaded, build))
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("heading", name="Set up a model").wait_for()
    assert p.url.endswith("#/settings")
    assert await p.locator("#composer").is_hidden()
    await p.get_by_label("Endpoint (base URL)").fill("http://127.0.0.1:9/v1")
    await p.get_by_label("Model", exact=True).fill("qwen")
    await p.get_by_label("API key").fill("sk-test-0123456789")
    await page.shot("setup")
    await p.get_by_role("button", name="Test connection").click()
    await p.locator("#cfg-status", has_text="Not reachable").wait_for()
    await p.get_by_role("button", name="Save").click()
    await p.locator("#composer").wait_for()
    await send(page, "hi")
    await p.locator(".msg.assistant .md", has_text="from qwen").wait_for()
    await p.get_by_role("button", name="Settings").click()
    await p.get_by_role("heading", name="Settings").wait_for()
    assert "…6789" in await p.locator("#view-settings table").inner_text()
    assert "sk-test" not in await p.content()
