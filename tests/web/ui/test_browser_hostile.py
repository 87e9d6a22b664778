"""A hostile model in a real browser: its answer, tool calls and a session title carry
script payloads; nothing runs (``window.__pwned`` stays unset) and no CSP is violated."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from lovia import tool
from lovia.testing import call, text

from tests.web.conftest import scripted_agent

pytestmark = pytest.mark.asyncio(loop_scope="module")

PWN = "window.__pwned=1"
HOSTILE = "\n\n".join(
    [
        f"<script>{PWN}</script>",
        f"<img src=x onerror={PWN}>",
        f"[js](javascript:{PWN}) [data](data:text/html,<script>{PWN}</script>) "
        f"[vb](vbscript:{PWN}) [spaced]( javascript:{PWN})",
        f'[title](https://example.com "a\\" onmouseover=\\"{PWN}")',
        f"<svg onload={PWN}><script>{PWN}</script></svg>",
        f"<math><mtext><table><mglyph><style><img src=x onerror={PWN}>",
        f"&lt;script&gt;{PWN}&lt;/script&gt; &#60;img src=x onerror={PWN}&#62;",
        f'![img](x" onerror="{PWN})',
        f"![data](data:image/svg+xml,<svg onload={PWN}>)",
        "\u202eevil\u202c bidi \u2066text\u2069",
        f"```html\n<script>{PWN}</script>\n```",
        f"<a href='javascript:{PWN}'>raw</a> <iframe src='javascript:{PWN}'></iframe>",
    ]
)
HOSTILE_NAME = f"<img src=x onerror={PWN}>"


@tool
def echo(value: str) -> str:
    """Echo ``value`` back."""
    return value


async def test_hostile_model_output_and_titles_never_execute(page: Any, serve_ui: Any) -> None:
    agent = scripted_agent(
        call("echo", {"value": f"<img src=x onerror={PWN}><script>{PWN}</script>"}),
        call(HOSTILE_NAME, {HOSTILE_NAME: HOSTILE_NAME}),
        text(HOSTILE + "\n\n" + "x" * 20_000),
        tools=[echo],
    )
    server = await serve_ui(agent)
    p = page.page
    violations: list[str] = []
    p.on("console", lambda m: violations.append(m.text) if "Content Security" in m.text else None)
    await p.goto(server.url)
    await p.wait_for_selector("body[data-ready='1']")
    box = p.locator("#composer-input")
    await box.fill("go")
    await box.press("Enter")
    try:
        await p.wait_for_selector(".msg.assistant:not(.streaming) .md p", timeout=20_000)
    except Exception:
        await page.shot("hostile")
        raise
    async with httpx.AsyncClient(base_url=server.url) as client:
        sid = (await client.get("/api/sessions")).json()["sessions"][0]["id"]
        patched = await client.patch(f"/api/sessions/{sid}", json={"title": HOSTILE_NAME})
        assert patched.status_code == 200
    await p.reload()
    await p.wait_for_selector("body[data-ready='1']")
    await p.locator("#session-list li").first.wait_for()
    assert HOSTILE_NAME in await p.locator("#session-list").inner_text()
    await p.locator("#session-list li").first.click()
    await p.wait_for_selector(".msg.assistant .md p")
    for toggle in await p.locator("details").all():
        await toggle.evaluate("d => d.open = true")
    assert await p.evaluate("window.__pwned") is None
    shown = await p.locator("#app").inner_text()
    assert "bidi" in shown and "&lt;script&gt;" not in shown  # rendered, entities decoded once
    assert HOSTILE_NAME in shown  # the hostile tool name, as text
    live = await p.evaluate(
        """() => {
          const all = [...document.querySelectorAll("#app *")];
          return {
            handlers: all.flatMap((el) =>
              [...el.attributes].filter((a) => a.name.startsWith("on")).map((a) => a.name)),
            scripts: document.querySelectorAll("#app script, #app svg, #app math, #app iframe")
              .length,
            links: [...document.querySelectorAll("#app a[href]")]
              .map((a) => a.getAttribute("href"))
              .filter((h) => !/^(https?:|mailto:|\\/|#|$)/i.test(h.trim())),
          };
        }"""
    )
    assert live == {"handlers": [], "scripts": 0, "links": []}, live
    assert await p.locator("#app img").count() == 0
    assert violations == []


async def test_a_history_longer_than_one_render_call_still_renders(
    page: Any, serve_ui: Any
) -> None:
    turns = 205  # more texts than one POST /api/render takes (200)
    server = await serve_ui(scripted_agent(*(text(f"answer **{n}**") for n in range(turns))))
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        sid = None
        for n in range(turns):
            body: dict[str, Any] = {"message": f"q{n}"}
            if sid is not None:
                body["session_id"] = sid
            answer = await client.post("/api/chat", json=body)
            assert answer.status_code == 200, answer.text
            sid = answer.json()["session_id"]
    p = page.page
    await p.goto(server.url)
    await p.wait_for_selector("body[data-ready='1']")
    await p.locator("#session-list li").first.click()
    last = p.locator(".msg.assistant .md strong", has_text=str(turns - 1))
    await last.wait_for(timeout=20_000)
    assert await p.locator(".msg.assistant .md strong").count() == turns
