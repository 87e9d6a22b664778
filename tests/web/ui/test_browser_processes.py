"""Background processes in the workspace panel, in a real browser: a run starts one with
``shell(background=True)``; the panel lists it running, and its Kill button ends it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, call, text

from tests.web.ui.test_browser_chat import open_page, send
from tests.web.ui.test_browser_views import assert_labelled

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        importlib.util.find_spec("lovia.web.routes.workspace") is None,
        reason="this server has no workspace panel (lovia.web.routes.workspace)",
    ),
]


async def test_a_background_process_is_listed_and_killed(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    from lovia.workspace import Workspace

    root = tmp_path / "project"
    root.mkdir()
    sleeper = {"command": "sleep 60", "background": True, "description": "sleeper"}
    agent = Agent(
        name="helper",
        model=ScriptedProvider([call("shell", sleeper), text("started it")]),
        workspace=Workspace.local(root, mode="trusted"),
    )
    server = await serve_ui(agent)
    p = page.page
    await open_page(page, server.url)
    await p.get_by_role("button", name="Workspace").click()
    processes = p.locator("#panel .processes")
    assert await processes.is_hidden()  # a new chat has none
    await send(page, "start a sleeper")
    await p.locator(".msg.assistant .md", has_text="started it").wait_for()
    # The run's end refreshes the open panel.
    row = processes.locator("li", has_text="sleeper")
    await row.get_by_text("running").wait_for()
    await processes.get_by_role("heading", name="Background processes").wait_for()
    await assert_labelled(p, "#panel")
    await page.shot("processes")
    await row.get_by_role("button", name="Kill: sleep 60").click()
    await row.get_by_text("killed").wait_for()
    assert await row.get_by_role("button").count() == 0  # nothing left to kill
    session_id = p.url.rsplit("/", 1)[1]
    status = server.app.state.lovia.supervisor.workspaces.processes(session_id)
    assert [(s.process_id, s.state) for s in status] == [("p1", "killed")]

    await p.locator("#lang-select").select_option("zh")
    await processes.get_by_role("heading", name="后台进程").wait_for()
    await row.get_by_text("已终止").wait_for()
    await p.locator("#lang-select").select_option("en")
