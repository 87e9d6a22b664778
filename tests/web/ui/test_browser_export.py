"""Export and the todo list across a reload, in a real browser. Runs where the server has
``GET /api/sessions/{id}/export`` and ``/todos``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, call, text

from tests.web.ui.test_browser_chat import open_page, send

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        importlib.util.find_spec("lovia.web.export") is None,
        reason="this server has no export (lovia.web.export, /api/sessions/{id}/export)",
    ),
]

TODOS = {
    "todos": [
        {"content": "Write the plan", "status": "completed", "active_form": "Writing the plan"},
        {"content": "Ship it", "status": "in_progress", "active_form": "Shipping it"},
    ]
}


async def test_todos_survive_a_reload_and_the_chat_exports(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    from lovia.plugins import Todo

    agent = Agent(
        name="helper",
        model=ScriptedProvider([call("todo_write", TODOS), text("planned **well**")]),
        plugins=[Todo()],
    )
    server = await serve_ui(agent)
    p = page.page
    await open_page(page, server.url)
    await send(page, "plan the release")
    await p.locator(".msg.assistant .md", has_text="planned").wait_for()
    todos = p.locator("#todos")
    await todos.locator(".todo.in_progress", has_text="Shipping it").wait_for()
    await p.reload()
    await p.wait_for_selector("body[data-ready='1']")
    await todos.locator(".todo.completed", has_text="Write the plan").wait_for()
    await page.shot("todos")
    async with p.expect_download() as download:
        await p.get_by_role("button", name="Export").click()
    saved = tmp_path / "chat.md"
    await (await download.value).save_as(saved)
    body = saved.read_text()
    assert "plan the release" in body and "planned **well**" in body
