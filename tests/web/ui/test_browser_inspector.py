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


async def test_an_inspector_error_is_shown_with_its_hint(page: Any, serve_ui: Any) -> None:
    """The endpoint answers an error (here a 404 for a run whose events were pruned): the
    panel opens with what the server said and its hint, instead of the button doing
    nothing (an unhandled rejection). The server's text is shown as text, never HTML."""
    from lovia import Agent

    agent = Agent(name="helper", model=ScriptedProvider([text("answered")]))
    server = await serve_ui(agent)
    await open_page(page, server.url)
    await send(page, "hello")
    p = page.page
    await p.locator(".msg.assistant .md", has_text="answered").wait_for()
    body = {
        "detail": "run 'x' has no turn 1 <img src=x onerror=alert(1)>",
        "hint": "its turns: none",
    }
    await p.route("**/turns/*/context*", lambda route: route.fulfill(status=404, json=body))

    class ExpectedNotFound(list[str]):
        """The page's error log, less the 404 this test answers (and the browser's console
        line about it), whenever the browser reports them."""

        def append(self, item: str) -> None:
            if "/context" not in item and "404 (Not Found)" not in item:
                super().append(item)

    page.errors = ExpectedNotFound(page.errors)
    await p.get_by_role("button", name="Context").click()
    dialog = p.locator("#inspector")
    await dialog.locator(".inspector-error", has_text="has no turn 1").wait_for()
    assert "its turns: none" in await dialog.inner_text()
    assert await dialog.locator("img").count() == 0
    await p.keyboard.press("Escape")
    assert await dialog.is_hidden()


async def test_a_late_answer_for_an_earlier_turn_does_not_replace_the_chosen_one(
    page: Any, serve_ui: Any
) -> None:
    """Turn 1 chosen, then turn 2 before turn 1's answer arrived: the panel ends on turn 2
    (the last choice), not on whichever answer came last."""
    import asyncio

    from lovia import Agent

    agent = Agent(
        name="helper",
        model=ScriptedProvider([call("todo_write", {"todos": []}), text("second turn")]),
        plugins=[Todo()],
    )
    server = await serve_ui(agent)
    await open_page(page, server.url)
    await send(page, "hello")
    p = page.page
    await p.locator(".msg.assistant .md", has_text="second turn").wait_for()
    held: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def hold_turn_one(route: Any) -> None:
        if "/turns/1/" in route.request.url and not held.done():
            held.set_result(route)  # answered only once turn 2 is on screen
            return
        await route.continue_()

    await p.route("**/turns/*/context*", hold_turn_one)
    await p.get_by_role("button", name="Context").click()
    dialog = p.locator("#inspector")
    await dialog.locator("#inspector-turn").wait_for()
    await p.select_option("#inspector-turn", "1")
    route = await held
    await p.select_option("#inspector-turn", "2")
    await dialog.locator(".view-list > li", has_text="todo_write").first.wait_for()
    async with p.expect_event("requestfinished", lambda r: "/turns/1/" in r.url):
        await route.continue_()  # turn 1's answer, late: its body is read in full by now
    # The page parses and renders an answer in the tasks right after its body arrives;
    # two frames later it has done so (the unfixed page showed turn 1 here every time).
    for _ in range(2):
        await p.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")
    assert await p.locator("#inspector-turn").input_value() == "2"
    assert await dialog.locator(".view-list > li").count() > 2  # turn 2's view, not turn 1's


async def test_the_panel_at_phone_width_with_long_hostile_and_chinese_strings(
    page: Any, serve_ui: Any, tmp_path: Path
) -> None:
    """A 3,000-character command with no space, markup in a tool's output and Chinese text:
    at 390 px the panel scrolls only up and down, and nothing it shows becomes HTML."""
    from lovia import Agent, tool

    @tool
    async def probe() -> str:
        """Hostile output."""
        return '<img src=x onerror="document.title=1">中文的结果'

    root = tmp_path / "project"
    root.mkdir()
    command = "echo " + "x" * 3000
    agent = Agent(
        name="helper",
        instructions="你是一个简洁的助手。",
        model=ScriptedProvider(
            [
                call("probe", {}, call_id="p1"),
                call("shell", {"command": command}, call_id="s1"),
                text("完成"),
            ]
        ),
        tools=[probe],
        workspace=Workspace.local(root, mode="coding"),
    )
    server = await serve_ui(agent, approval_timeout=0.05)
    p = page.page
    await p.set_viewport_size({"width": 390, "height": 780})
    await open_page(page, server.url)
    await send(page, "试试")
    await p.locator(".msg.assistant .md", has_text="完成").wait_for()
    await p.get_by_role("button", name="Context").click()
    dialog = p.locator("#inspector")
    await dialog.locator("#inspector-turn").wait_for()
    await p.select_option("#inspector-turn", "2")
    await dialog.locator("li", has_text="echo xxx").first.wait_for()
    assert await dialog.locator("img").count() == 0
    assert "中文的结果" in await dialog.inner_text()
    sideways = await dialog.evaluate("(d) => d.scrollWidth - d.clientWidth")
    assert sideways <= 0, sideways
    assert await p.evaluate("document.documentElement.scrollWidth") <= 390
    assert await p.title() != "1"
