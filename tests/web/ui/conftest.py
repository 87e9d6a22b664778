"""Fixtures for the browser tests: Debian's chromium driven by Playwright, and a lovia app
with the UI mounted on a real uvicorn (in the module's event loop, so the tests' gates are
plain asyncio events)."""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from fastapi import FastAPI
from lovia.web import create_app
from lovia.web.ui import mount_ui

from tests.support import require

ARTIFACTS = Path(__file__).resolve().parents[3] / ".artifacts" / "ui"
CHROMIUM = os.environ.get("LOVIA_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def ui_app(agents: Any, db: Path, **options: Any) -> FastAPI:
    """``create_app`` with the bundled UI mounted. Model-written titles are off unless a
    test asks (they would take replies from the scripted model)."""
    if "generate_titles" in inspect.signature(create_app).parameters:
        options.setdefault("generate_titles", False)
    app = create_app(agents, db_path=db, **options)
    mount_ui(app, app.state.lovia)
    return app


@dataclass
class Running:
    app: FastAPI
    url: str
    server: uvicorn.Server
    task: asyncio.Task[None]


@pytest_asyncio.fixture(loop_scope="module")
async def serve_ui(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await serve_ui(agents, **create_app_options)`` -> ``Running`` on 127.0.0.1:<free>."""
    running: list[Running] = []

    async def start(agents: Any, **options: Any) -> Running:
        app = ui_app(agents, tmp_path / f"chat{len(running)}.db", **options)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        deadline = asyncio.get_running_loop().time() + 10
        while not server.started:  # uvicorn exposes only a flag for "listening"
            if task.done():
                task.result()
            assert asyncio.get_running_loop().time() < deadline, "uvicorn did not start"
            await asyncio.sleep(0.005)
        live = Running(app, f"http://127.0.0.1:{port}", server, task)
        running.append(live)
        return live

    yield start
    for live in running:
        live.server.should_exit = True
        await asyncio.wait_for(live.task, 30)


@pytest.fixture(scope="module")
def _chromium_path() -> Iterator[str]:
    try:
        import playwright  # noqa: F401
    except ImportError:
        require(False, "playwright (Python) is not installed")
    require(os.path.exists(CHROMIUM), f"chromium is not installed at {CHROMIUM}")
    yield CHROMIUM


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(_chromium_path: str) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        launched = await pw.chromium.launch(
            executable_path=_chromium_path, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@dataclass
class Watched:
    """A page whose console errors, page errors and failed requests are collected."""

    page: Any
    errors: list[str] = field(default_factory=list)

    async def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


_LONG_LIVED = ("/api/chat/stream", "/api/events", "/static/icon.svg")
"""Requests a navigation may abort while they are open (streams, the browser's favicon)."""


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Any, serve_ui: Any) -> AsyncIterator[Watched]:
    # Depends on serve_ui so the servers stop only after the page's errors are collected.
    context = await browser.new_context(viewport={"width": 1200, "height": 800})
    tab = await context.new_page()
    tab.set_default_timeout(8000)
    watched = Watched(tab)

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            watched.errors.append(f"console: {msg.text}")

    def on_failed(request: Any) -> None:
        failure = request.failure or ""
        if "ERR_ABORTED" in failure and (
            request.method == "GET" or any(part in request.url for part in _LONG_LIVED)
        ):
            # Chromium reports a streamed fetch read to its end with getReader() as aborted
            # (microsoft/playwright#42742), and a reload aborts what is open: the page's
            # reconnect status and the assertions on what it shows cover these. A reload also
            # aborts whatever GET the old page had in flight (the sidebar, todos): not a
            # failure the user sees. Errors answered by the server are caught below.
            return
        watched.errors.append(f"request failed: {request.method} {request.url} {failure}")

    async def on_response(response: Any) -> None:
        if response.status >= 400:
            watched.errors.append(
                f"HTTP {response.status}: {response.request.method} {response.url}"
            )

    tab.on("console", on_console)
    tab.on("pageerror", lambda exc: watched.errors.append(f"page error: {exc}"))
    tab.on("requestfailed", on_failed)
    tab.on("response", on_response)
    try:
        yield watched
        errors = list(watched.errors)  # closing the context aborts what is still open
    finally:
        await context.close()
    assert errors == [], errors
