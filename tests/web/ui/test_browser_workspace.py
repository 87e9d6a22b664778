"""The workspace panel in a real browser: browse, open a file, upload, and a workspace image
inline in the answer. Runs where the server has the workspace panel (``/api/workspace``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, text

from tests.web.ui.test_browser_chat import open_page, send

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        importlib.util.find_spec("lovia.web.routes.workspace") is None,
        reason="this server has no workspace panel (lovia.web.routes.workspace)",
    ),
]


async def test_browse_open_upload_and_inline_image(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    from lovia.workspace import Workspace

    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# Project\nhello panel\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "logo.png").write_bytes(PNG)
    agent = Agent(
        name="helper",
        model=ScriptedProvider([text("Here is the logo:\n\n![logo](logo.png)")]),
        workspace=Workspace.local(root, mode="coding"),
    )
    server = await serve_ui(agent)
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Workspace").click()
    panel = p.locator("#panel")
    await panel.get_by_role("button", name="README.md").click()
    await panel.locator(".file-view", has_text="hello panel").wait_for()
    await panel.get_by_role("button", name="src").click()
    await panel.get_by_role("button", name="app.py").wait_for()
    upload = tmp_path / "notes.txt"
    upload.write_text("uploaded text\n")
    await p.set_input_files("#upload-input", str(upload))
    await panel.locator("[role=status]", has_text="Uploaded uploads/notes.txt").wait_for()
    assert (root / "uploads" / "notes.txt").read_text() == "uploaded text\n"
    await page.shot("workspace-panel")
    await send(page, "show me the logo")
    image = p.locator(".msg.assistant .md img")
    await image.wait_for()
    assert await image.get_attribute("src") == "/api/workspace/raw?path=logo.png"
    await p.wait_for_function("() => document.querySelector('.md img').naturalWidth === 1")
