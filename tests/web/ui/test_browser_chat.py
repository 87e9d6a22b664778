"""The chat UI in a real browser (Debian chromium through Playwright), against a scripted
agent on a real uvicorn: streaming markdown, tools, approvals, cancel, steering, resume."""

from __future__ import annotations

from typing import Any

import pytest
from lovia.testing import call, text

from tests.web.conftest import Gate, deploy, scripted_agent

pytestmark = pytest.mark.asyncio(loop_scope="module")

MARKDOWN = """# Plan

Some **bold** text and a [link](https://example.com/docs).

```python
def add(a, b):
    return a + b
```

| name | value |
| --- | --- |
| one | 1 |

```mermaid
graph TD; A-->B
```
"""


async def open_page(page: Any, url: str) -> None:
    await page.page.goto(url)
    await page.page.wait_for_selector("body[data-ready='1']")


async def send(page: Any, message: str) -> None:
    box = page.page.locator("#composer-input")
    await box.fill(message)
    await box.press("Enter")


async def test_send_streams_markdown_with_code_tables_and_links(page: Any, serve_ui: Any) -> None:
    server = await serve_ui(scripted_agent(text(MARKDOWN, reasoning="first, think")))
    await open_page(page, server.url)
    await send(page, "make a plan")
    p = page.page
    answer = p.locator(".msg.assistant").last
    await answer.locator(".md table").wait_for()
    await p.wait_for_selector(".msg.assistant:not(.streaming)")
    assert await answer.locator(".md h1").inner_text() == "Plan"
    assert await answer.locator("pre code span[class^='hl-']").count() > 0  # Pygments
    link = answer.locator(".md a")
    assert await link.get_attribute("href") == "https://example.com/docs"
    assert "noopener" in (await link.get_attribute("rel") or "")
    assert await answer.locator(".diagram-note").count() == 1  # Mermaid shown as code
    reasoning = answer.locator("details.reasoning")
    assert await reasoning.get_attribute("open") is None  # collapsed
    assert await reasoning.locator(".reasoning-text").text_content() == "first, think"
    assert await p.locator(".msg.user .text").inner_text() == "make a plan"
    await p.locator("#session-list .session .title", has_text="make a plan").wait_for()
    assert "#/c/" in p.url
    await page.shot("chat-markdown")


async def test_approve_then_deny_inline(page: Any, serve_ui: Any) -> None:
    agent = scripted_agent(
        call("deploy", {"env": "prod"}, call_id="c1"),
        call("deploy", {"env": "staging"}, call_id="c2"),
        text("both handled"),
        tools=[deploy],
    )
    server = await serve_ui(agent)
    await open_page(page, server.url)
    await send(page, "ship it")
    p = page.page
    first = p.locator(".msg.tool").nth(0)
    await first.locator(".approval").wait_for()
    await page.shot("approval-pending")
    await first.get_by_role("button", name="Approve").click()
    second = p.locator(".msg.tool").nth(1)
    await second.locator(".approval").wait_for()
    await second.get_by_role("button", name="Deny").click()
    await p.locator(".msg.assistant .md", has_text="both handled").wait_for()
    await first.locator("summary").click()
    assert await first.locator("pre.output").inner_text() == "deployed to prod"
    await second.locator("summary").click()
    assert "denied" in (await second.locator("pre.output").inner_text())
    assert await second.locator("pre.output.is-error").count() == 1
    assert await p.locator(".approval").count() == 0
    await page.shot("tool-results")


async def test_cancel_stops_the_run(page: Any, serve_ui: Any) -> None:
    gate = Gate()
    server = await serve_ui(scripted_agent(call("wait_gate"), text("never"), tools=[gate.tool]))
    await open_page(page, server.url)
    await send(page, "wait for it")
    await gate.entered.wait()
    p = page.page
    stop = p.locator("#stop-btn")
    await stop.wait_for()
    await stop.click()
    await p.locator(".notice", has_text="Stopped.").wait_for()
    await p.locator("#stop-btn").wait_for(state="hidden")
    assert await p.locator("#send-btn").inner_text() == "Send"


async def test_steering_while_running(page: Any, serve_ui: Any) -> None:
    gate = Gate()
    server = await serve_ui(scripted_agent(call("wait_gate"), text("steered"), tools=[gate.tool]))
    await open_page(page, server.url)
    await send(page, "start")
    await gate.entered.wait()
    p = page.page
    assert await p.locator("#send-btn").inner_text() == "Steer"
    await send(page, "also check the tests")
    queued = p.locator(".msg.user", has_text="also check the tests")
    await queued.locator(".badge", has_text="queued").wait_for()
    gate.open()
    await queued.locator(".badge", has_text="delivered").wait_for()
    await p.locator(".msg.assistant .md", has_text="steered").wait_for()
    assert await p.locator(".msg.user").count() == 2
