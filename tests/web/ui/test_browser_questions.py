"""``ask_human`` in a real browser: options as buttons, a free-text answer, the run goes on.
Runs where the server takes answers (``POST /api/chat/answer``)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from lovia.testing import call, text

from tests.web.conftest import scripted_agent
from tests.web.ui.test_browser_chat import open_page, send

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        importlib.util.find_spec("lovia.web.questions") is None,
        reason="this server takes no answers (lovia.web.questions, /api/chat/answer)",
    ),
]


async def test_questions_with_options_and_free_text(page: Any, serve_ui: Any) -> None:
    from lovia.tools import HumanChannel, ask_human

    channel = HumanChannel()
    options = {"question": "Which colour?", "options": [{"label": "red"}, {"label": "blue"}]}
    agent = scripted_agent(
        call("ask_human", options, call_id="q1"),
        call("ask_human", {"question": "Any name?"}, call_id="q2"),
        text("blue, named"),
        tools=[ask_human(channel)],
    )
    server = await serve_ui(agent, question_channel=channel)
    p = page.page
    await open_page(page, server.url)
    await send(page, "ask me")
    first = p.locator(".msg.tool").nth(0)
    await first.locator(".question-text", has_text="Which colour?").wait_for()
    await page.shot("question")
    await first.get_by_role("button", name="blue").click()
    second = p.locator(".msg.tool").nth(1)
    await second.get_by_label("Your answer").fill("Ada")
    await second.get_by_role("button", name="Send answer").click()
    await p.locator(".msg.assistant .md", has_text="blue, named").wait_for()
    await first.locator("summary").click()
    assert "blue" in await first.locator("pre.output").inner_text()
    await second.locator("summary").click()
    assert "Ada" in await second.locator("pre.output").inner_text()
