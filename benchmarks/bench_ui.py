"""The bundled UI in Debian's chromium (headless, through Playwright), against a scripted
agent on a real uvicorn on 127.0.0.1:

* ``interactive``: navigation start to the page being usable (the boot data read, /api/info
  and the sessions list loaded, the route applied: the ``lovia:ready`` mark), a fresh
  browser context (cold cache) per load.
* ``first token``: the send (``lovia:send`` mark) to the first streamed character shown in
  the answer (``lovia:first-token``), with a scripted model that answers at once.
* ``transferred``: the bytes the cold page load moved (navigation plus every resource).

Run: ``uv run python benchmarks/bench_ui.py`` (medians over ``LOADS`` loads).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import statistics
import tempfile
from pathlib import Path
from typing import Any

import uvicorn
from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import create_app
from lovia.web.ui import mount_ui

LOADS = 10
CHROMIUM = os.environ.get("LOVIA_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ANSWER = "Here is **some** markdown with `code`.\n\n```python\nprint('hi')\n```\n"

_MARKS = """() => {
  const get = (n) => performance.getEntriesByName(n)[0];
  const nav = performance.getEntriesByType('navigation')[0];
  const bytes = (nav ? nav.transferSize : 0) + performance.getEntriesByType('resource')
    .reduce((sum, r) => sum + r.transferSize, 0);
  return {ready: get('lovia:ready')?.startTime, send: get('lovia:send')?.startTime,
          first: get('lovia:first-token')?.startTime, bytes};
}"""


async def _serve(db: Path) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    agent = Agent("bench", model=ScriptedProvider([text(ANSWER) for _ in range(LOADS + 1)]))
    # No model-written titles: they would take the scripted answers meant for the chats.
    app = create_app(agent, db_path=db, generate_titles=False)
    mount_ui(app, app.state.lovia)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{port}"


async def _load(browser: Any, url: str) -> dict[str, float]:
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(url)
    await page.wait_for_selector("body[data-ready='1']")
    await page.fill("#composer-input", "hello")
    await page.press("#composer-input", "Enter")
    await page.wait_for_selector(".msg.assistant:not(.streaming) .md pre")
    marks: dict[str, float] = await page.evaluate(_MARKS)
    await context.close()
    return marks


async def main() -> None:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as tmp:
        server, task, url = await _serve(Path(tmp) / "bench.db")
        try:
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
                )
                await _load(browser, url)  # warm the server (first imports, Pygments)
                runs = [await _load(browser, url) for _ in range(LOADS)]
                await browser.close()
        finally:
            server.should_exit = True
            await task
    ready = statistics.median(r["ready"] for r in runs)
    first = statistics.median(r["first"] - r["send"] for r in runs)
    size = statistics.median(r["bytes"] for r in runs)
    print(f"loads: {len(runs)} (after one warm-up), load average {os.getloadavg()[0]:.2f}")
    print(f"navigation -> interactive: {ready:.0f} ms (median)")
    print(f"send -> first streamed token: {first:.0f} ms (median)")
    print(f"transferred on a cold load: {size / 1024:.1f} KiB")


if __name__ == "__main__":
    asyncio.run(main())
