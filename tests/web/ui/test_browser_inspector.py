"""The context inspector in a real browser: the recorded view with its parts, the reminder a
view injector added, the provider's cached tokens, a permission decision with its rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.messages import Usage
from lovia.plugins import Todo
from lovia.testing import ScriptedProvider, call, text
from lovia.workspace import Workspace

from tests.web.ui.test_browser_chat import open_page, send

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_the_panel_shows_the_recorded_view(page: Any, serve_ui: Any, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("the notes\n")
    todos = {"todos": [{"content": "read the notes", "status": "in_progress"}]}
    agent = Agent(
        name="helper",
        instructions="You are terse.",
        model=ScriptedProvider(
            [
                call("todo_write", todos, call_id="t1"),
                call("read_file", {"path": "notes.txt"}, call_id="r1"),
                text("inspected", usage=Usage(input_tokens=900, cache_read_tokens=300)),
            ]
        ),
        plugins=[Todo()],
        workspace=Workspace.local(root, mode="coding"),
    )
    server = await serve_ui(agent)
    await open_page(page, server.url)
    await send(page, "look inside")
    p = page.page
    await p.locator(".msg.assistant .md", has_text="inspected").wait_for()
    await p.get_by_role("button", name="Context").click()
    dialog = p.locator("#inspector")
    await dialog.get_by_role("heading", name="What the model saw").wait_for()
    assert await dialog.locator("#inspector-turn option").count() == 3
    assert "Tool schemas" in await dialog.locator("table").inner_text()
    assert "null" not in await dialog.inner_text()  # no absent section printed as text
    assert "Cached tokens 300" in await dialog.locator(".usage").inner_text()
    items = dialog.locator(".view-list > li")
    assert await items.first.locator(".badge").inner_text() == "system"
    assert await items.last.locator(".badge").inner_text() == "reminder"
    await items.last.locator("summary").click()
    await items.last.locator("pre", has_text="read the notes").wait_for()
    await p.select_option("#inspector-turn", "2")
    decision = dialog.locator("li", has_text="notes.txt").filter(has_text="read_inside")
    await decision.first.wait_for()
    await p.select_option("#inspector-turn", "3")
    await dialog.locator(".usage", has_text="Cached tokens 300").wait_for()
    await page.shot("context-inspector")
    await p.keyboard.press("Escape")
    assert await dialog.is_hidden()
