"""The sessions sidebar, keyboard shortcuts and the Chinese strings, in a real browser."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from lovia.testing import text

from tests.web.conftest import scripted_agent
from tests.web.ui.test_browser_chat import open_page, send

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_sidebar_search_rename_pin_delete(page: Any, serve_ui: Any) -> None:
    from playwright.async_api import expect

    server = await serve_ui(scripted_agent(text("one"), text("two")))
    p = page.page
    await open_page(page, server.url)
    await send(page, "alpha chat")
    await p.locator(".msg.assistant .md", has_text="one").wait_for()
    await p.keyboard.press("Control+Shift+O")  # new chat
    assert await p.locator(".msg").count() == 0
    assert await p.evaluate("document.activeElement.id") == "composer-input"
    await send(page, "beta chat")
    await p.locator(".msg.assistant .md", has_text="two").wait_for()
    rows = p.locator("#session-list .session")
    await p.locator("#session-list .title", has_text="alpha chat").wait_for()
    await expect(rows).to_have_count(2)

    await p.keyboard.press("Control+K")  # focus search
    assert await p.evaluate("document.activeElement.id") == "session-search"
    await p.keyboard.type("alpha")
    await expect(rows).to_have_count(1)
    await p.fill("#session-search", "")
    await expect(rows).to_have_count(2)

    alpha = rows.filter(has_text="alpha chat")
    await alpha.hover()  # a row's actions show on hover, focus, or when it is open
    await alpha.get_by_role("button", name="Rename: alpha chat").click()
    field = p.locator("#session-list .rename input")
    await field.fill("renamed chat")
    await field.press("Enter")
    await p.locator("#session-list .title", has_text="renamed chat").wait_for()

    renamed = rows.filter(has_text="renamed chat")
    await renamed.hover()
    await renamed.get_by_role("button", name="Pin: renamed chat").click()
    await p.locator("#session-list .session.pinned").wait_for()
    assert "renamed chat" in await rows.first.inner_text()  # pinned first

    await renamed.locator(".open").click()
    await p.locator(".msg.assistant .md", has_text="one").wait_for()
    assert await p.locator("#chat-title").inner_text() == "renamed chat"
    await page.shot("sidebar")
    delete = renamed.get_by_role("button", name="Delete: renamed chat")
    await delete.click()
    assert await delete.inner_text() == "Delete?"
    await delete.click()
    await expect(rows).to_have_count(1)
    assert await p.locator(".msg").count() == 0  # the open chat was the deleted one
    assert p.url.endswith("#/")


async def test_escape_stops_and_chinese_strings(page: Any, serve_ui: Any) -> None:
    server = await serve_ui(scripted_agent(text("你好")))
    p = page.page
    await open_page(page, server.url)
    await p.select_option("#lang-select", "zh")
    assert await p.locator("#send-btn").inner_text() == "发送"
    assert await p.locator("#new-chat").inner_text() == "新对话"
    assert await p.evaluate("document.documentElement.lang") == "zh-CN"
    await send(page, "hi")
    await p.locator(".msg.assistant .md", has_text="你好").wait_for()
    assert await p.locator(".msg.user .who").inner_text() == "你"
    await page.shot("chinese")
    await p.reload()
    await p.wait_for_selector("body[data-ready='1']")
    assert await p.locator("#send-btn").inner_text() == "发送"  # kept


async def test_every_control_is_labelled_and_focus_is_visible(page: Any, serve_ui: Any) -> None:
    server = await serve_ui(scripted_agent(text("hi")))
    p = page.page
    await open_page(page, server.url)
    unlabelled = await p.evaluate(
        """() => [...document.querySelectorAll('button, input, select, textarea')]
          .filter((el) => el.offsetParent !== null || el.type === 'file')
          .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                          && !(el.textContent || '').trim())
          .map((el) => el.outerHTML)"""
    )
    assert unlabelled == []
    await p.keyboard.press("Tab")
    await p.keyboard.press("Tab")
    outline = await p.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"


@pytest.mark.skipif(
    importlib.util.find_spec("lovia.web.titles") is None,
    reason="this server writes no model titles (lovia.web.titles, /api/events)",
)
async def test_a_model_title_reaches_the_sidebar_live(page: Any, serve_ui: Any) -> None:
    from lovia.testing import ScriptedProvider

    titles = ScriptedProvider([text("Release planning")])
    server = await serve_ui(scripted_agent(text("sure")), generate_titles=True, title_model=titles)
    p = page.page
    await open_page(page, server.url)
    await send(page, "help me plan the release")
    await p.locator("#session-list .title", has_text="Release planning").wait_for()
    await p.locator("#chat-title", has_text="Release planning").wait_for()
