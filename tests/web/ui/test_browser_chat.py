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


async def test_reload_mid_run_reattaches_with_the_pending_approval(
    page: Any, serve_ui: Any
) -> None:
    agent = scripted_agent(
        call("deploy", {"env": "prod"}, call_id="c1"), text("deployed, thanks"), tools=[deploy]
    )
    server = await serve_ui(agent)
    await open_page(page, server.url)
    await send(page, "deploy please")
    p = page.page
    await p.locator(".msg.tool .approval").wait_for()
    await p.reload()
    await p.wait_for_selector("body[data-ready='1']")
    # The chat, its message and the approval still pending are back, once each.
    await p.locator(".msg.tool .approval").wait_for()
    assert await p.locator(".msg.user .text").all_inner_texts() == ["deploy please"]
    assert await p.locator(".msg.tool").count() == 1
    await page.shot("reloaded-pending-approval")
    await p.get_by_role("button", name="Approve").click()
    await p.locator(".msg.assistant .md", has_text="deployed, thanks").wait_for()
    assert await p.locator(".msg.tool").count() == 1
    assert await p.locator(".msg.assistant").count() == 1


async def test_a_dropped_stream_resumes_after_the_last_event(page: Any, serve_ui: Any) -> None:
    gate = Gate()
    server = await serve_ui(
        scripted_agent(call("wait_gate"), text("after the drop"), tools=[gate.tool])
    )
    await open_page(page, server.url)
    await send(page, "go")
    await gate.entered.wait()
    p = page.page
    await p.locator(".msg.tool").wait_for()
    async with p.expect_request(lambda r: "last_event_id=" in r.url) as resumed:
        await p.evaluate("window.__lovia.dropStream()")
    assert "run_id=" in (await resumed.value).url
    gate.open()
    await p.locator(".msg.assistant .md", has_text="after the drop").wait_for()
    assert await p.locator(".msg.tool").count() == 1
    assert await p.locator(".msg.assistant").count() == 1
    assert await p.locator("#conn-status").inner_text() == ""


async def test_hostile_markdown_never_executes(page: Any, serve_ui: Any) -> None:
    hostile = "\n\n".join(
        [
            "<script>window.__pwned = 'script'</script>",
            "[click](javascript:window.__pwned='link')",
            "<img src=x onerror=\"window.__pwned='img'\">",
            "<svg onload=\"window.__pwned='svg'\"><script>window.__pwned=1</script></svg>",
            "![x](javascript:window.__pwned='image')",
            "[data](data:text/html,<script>alert(1)</script>)",
            '<a href="#" onclick="window.__pwned=\'click\'">a</a>',
            "<iframe src='javascript:window.__pwned=1'></iframe>",
            "<style>body{display:none}</style>",
            "```html\n<script>window.__pwned='code'</script>\n```",
            "**done**",
        ]
    )
    server = await serve_ui(scripted_agent(text(hostile)))
    await open_page(page, server.url)
    await send(page, "be evil")
    p = page.page
    await p.locator(".msg.assistant .md strong", has_text="done").wait_for()
    await p.wait_for_selector(".msg.assistant:not(.streaming)")
    md = p.locator(".msg.assistant .md")
    for link in await md.locator("a").all():
        await link.click(modifiers=["Alt"], no_wait_after=True, timeout=2000)
    found = await p.evaluate(
        """() => {
        const md = document.querySelector('.msg.assistant .md');
        const bad = [];
        for (const el of md.querySelectorAll('*')) {
          if (/^(SCRIPT|IFRAME|SVG|STYLE|OBJECT|EMBED)$/i.test(el.tagName)) bad.push(el.tagName);
          for (const a of el.attributes) {
            if (/^on/i.test(a.name)) bad.push(a.name);
            if (/^\\s*(javascript|data|vbscript):/i.test(a.value)) bad.push(a.value);
          }
        }
        return {bad, pwned: window.__pwned ?? null, visible: document.body.offsetHeight > 0};
      }"""
    )
    assert found == {"bad": [], "pwned": None, "visible": True}
    # The script in the code block is shown as text.
    assert "window.__pwned='code'" in await md.locator("pre").first.inner_text()
    await page.shot("hostile-markdown")


async def test_theme_follows_the_system_and_can_be_chosen(page: Any, serve_ui: Any) -> None:
    server = await serve_ui(scripted_agent(text("hi")))
    p = page.page
    await p.emulate_media(color_scheme="dark")
    await open_page(page, server.url)
    bg = "() => getComputedStyle(document.body).backgroundColor"
    dark = await p.evaluate(bg)
    await p.emulate_media(color_scheme="light")
    light = await p.evaluate(bg)
    assert dark != light
    await p.select_option("#theme-select", "dark")
    assert await p.evaluate("document.documentElement.dataset.theme") == "dark"
    assert await p.evaluate(bg) == dark
    await page.shot("theme-dark")
    await p.reload()
    await p.wait_for_selector("body[data-ready='1']")
    assert await p.evaluate(bg) == dark  # the choice is kept
    await p.select_option("#theme-select", "system")
    assert await p.evaluate(bg) == light


async def test_phone_width_layout(page: Any, serve_ui: Any) -> None:
    server = await serve_ui(scripted_agent(text("hello from a phone")))
    p = page.page
    await p.set_viewport_size({"width": 390, "height": 780})
    await p.emulate_media(reduced_motion="reduce")  # no slide-in transition to wait out
    await open_page(page, server.url)
    sidebar = p.locator("#sidebar")
    hidden_box = await sidebar.bounding_box()
    assert not await sidebar.is_visible() or (hidden_box is not None and hidden_box["x"] < 0)
    await send(page, "hi")
    await p.locator(".msg.assistant .md", has_text="hello from a phone").wait_for()
    width = await p.evaluate("document.documentElement.scrollWidth")
    assert width <= 390  # nothing overflows sideways
    await page.shot("phone-chat")
    await p.get_by_role("button", name="Menu").click()
    await p.locator("#session-list .session").first.wait_for()
    box = await sidebar.bounding_box()
    assert box is not None and box["x"] >= 0
    await page.shot("phone-menu")
    await p.locator("#session-list .open").first.click()
    assert await p.locator("#menu-toggle").get_attribute("aria-expanded") == "false"


class Paced:
    """A model whose reply streams only as fast as the test feeds it (``feed``/``end``)."""

    name = "paced"
    model = "paced-model"
    supports_json_schema = False

    def __init__(self) -> None:
        import asyncio

        self.chunks: asyncio.Queue[str | None] = asyncio.Queue()

    def feed(self, chunk: str) -> None:
        self.chunks.put_nowait(chunk)

    def end(self) -> None:
        self.chunks.put_nowait(None)

    async def stream(self, entries: Any, **_: Any) -> Any:
        from lovia.events import TextDelta
        from lovia.providers.base import FinishDelta

        while (chunk := await self.chunks.get()) is not None:
            yield TextDelta(chunk)
        yield FinishDelta("stop")


async def test_streaming_markdown_renders_as_it_goes_without_shrinking(
    page: Any, serve_ui: Any
) -> None:
    from lovia import Agent

    model = Paced()
    server = await serve_ui(Agent(name="helper", model=model))
    await open_page(page, server.url)
    await send(page, "stream slowly")
    p = page.page
    model.feed("# Streaming\n\nfirst paragraph with **bold**\n\n")
    answer = p.locator(".msg.assistant.streaming")
    await answer.locator(".md h1", has_text="Streaming").wait_for()
    # Record every height the answer takes from here on.
    await p.evaluate(
        """() => {
        window.__heights = [];
        const el = document.querySelector('.msg.assistant .content');
        const note = () => window.__heights.push(el.getBoundingClientRect().height);
        new ResizeObserver(note).observe(el);
      }"""
    )
    model.feed("```python\nx = 1\n")
    await answer.locator(".tail", has_text="x = 1").wait_for()  # an open fence stays text
    model.feed("```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n")
    await answer.locator(".md table").wait_for()
    assert await answer.locator(".md pre code span[class^='hl-']").count() > 0
    model.feed("the end")
    await answer.locator(".tail", has_text="the end").wait_for()
    heights = await p.evaluate("() => window.__heights")
    assert len(heights) >= 2 and heights == sorted(heights), heights  # it only grew
    model.end()
    done = p.locator(".msg.assistant:not(.streaming)")
    await done.locator(".md p", has_text="the end").wait_for()  # the final render
    await page.shot("streamed")
