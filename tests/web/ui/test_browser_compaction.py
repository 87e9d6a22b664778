"""Compaction notices in a real browser: shown in the flow the moment the run compacts its
context, and again after a reload (from the chat's stored notice)."""

from __future__ import annotations

from typing import Any

import pytest
from lovia import Agent, tool
from lovia.context import ClearToolResults, Compaction
from lovia.testing import ScriptedProvider, call, text

from tests.web.ui.test_browser_chat import open_page, send

pytestmark = pytest.mark.asyncio(loop_scope="module")


@tool
def read_page(n: int) -> str:
    """Read page ``n``."""
    return f"page {n} " + "x" * 2400  # ~600 estimated tokens: three overflow the window


async def test_the_compaction_notice_live_and_after_a_reload(page: Any, serve_ui: Any) -> None:
    script = [call("read_page", {"n": n}) for n in range(4)] + [text("read them all")]
    agent = Agent(
        name="helper",
        model=ScriptedProvider(script),
        tools=[read_page],
        context_policy=Compaction(context_window=2000, stages=[ClearToolResults()]),
    )
    server = await serve_ui(agent)
    p = page.page
    await open_page(page, server.url)
    await send(page, "read every page")
    notice = p.locator(".notice.notice-compacted")
    await notice.first.wait_for()
    live = await notice.last.inner_text()
    assert live.startswith("Context compacted: ") and "tokens became" in live
    await p.locator(".msg.assistant .md", has_text="read them all").wait_for()
    await page.shot("compaction")

    await p.reload()
    await p.wait_for_selector("body[data-ready='1']")
    await p.locator(".msg.assistant .md", has_text="read them all").wait_for()
    # After a reload: the newest notice, as the run stored it, after the history.
    await notice.wait_for()
    assert await notice.count() == 1
    assert await notice.inner_text() == live
    assert await p.locator("#messages > :last-child.notice-compacted").count() == 1
    await p.locator("#lang-select").select_option("zh")
    assert (await notice.inner_text()).startswith("上下文已压缩：")
    await p.locator("#lang-select").select_option("en")
