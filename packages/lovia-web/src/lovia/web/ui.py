"""The bundled UI: ``mount_ui(app, state)`` serves the page at ``/`` and its files at ``/static``.

* ``GET /`` is the Jinja2 page shell (``templates/index.html``). It carries the boot data
  (title, version, and the API paths this server actually has), so the page shows only the
  features whose endpoints exist and never calls one that does not.
* ``/static/*`` serves the ES modules and CSS with explicit content types
  (``text/javascript``, ``text/css``), ``nosniff`` and revalidation by ETag;
  ``/static/highlight.css`` is the Pygments theme, generated.
* Every UI response carries a strict Content-Security-Policy: only this origin, no inline
  script, no inline style, no ``eval``, no plugins, no framing.
* ``POST /api/render`` turns markdown into sanitised HTML (``lovia.web.render``); the page
  renders every model-written text through it, the streaming text included.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from .deps import WebState
from .models import error_responses
from .render import highlight_css, render_markdown

__all__ = ["CSP", "RenderRequest", "RenderResult", "mount_ui"]

_HERE = Path(__file__).parent
_STATIC = _HERE / "static"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'; object-src 'none'"
)
"""The page's policy: everything from this origin only, nothing inline, nothing framed."""

_SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".webmanifest": "application/manifest+json",
}
_MOUNT_NAME = "lovia-ui-static"
_MAX_TEXTS = 200
_MAX_TEXT_CHARS = 400_000
_MAX_TOTAL_CHARS = 1_000_000
_RENDER_SLOTS = 2
"""Renders at once (CPU-bound, in threads): more requests wait their turn, so a burst of
renders neither floods the thread pool nor starves the event loop's streams."""


class RenderRequest(BaseModel):
    """``POST /api/render``: markdown texts to render, in order."""

    model_config = ConfigDict(extra="forbid")

    texts: list[str] = Field(min_length=1, max_length=_MAX_TEXTS)
    workspace_images: bool = False
    """Point workspace-relative image paths at ``/api/workspace/raw`` (else they are links)."""

    @field_validator("texts")
    @classmethod
    def _bounded(cls, texts: list[str]) -> list[str]:
        for i, text in enumerate(texts):
            if len(text) > _MAX_TEXT_CHARS:
                raise ValueError(f"texts[{i}] is longer than {_MAX_TEXT_CHARS} characters")
        if sum(map(len, texts)) > _MAX_TOTAL_CHARS:
            raise ValueError(f"the texts together are longer than {_MAX_TOTAL_CHARS} characters")
        return texts


class RenderResult(BaseModel):
    html: list[str]
    """Sanitised HTML, one per text."""


class _Static(StaticFiles):
    """Static files with our own content types and security headers (never guessed from the
    host's mime database, which differs between machines)."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        kind = _TYPES.get(Path(path).suffix.lower())
        if kind is not None and response.status_code in (200, 304):
            response.headers["content-type"] = kind
        response.headers["cache-control"] = "no-cache"
        response.headers.update(_SECURITY_HEADERS)
        return response


def _api_paths(app: FastAPI) -> list[str]:
    """The API paths served, with path parameters written ``{}`` (names vary by router):
    the OpenAPI schema's, plus any plain route left out of it."""
    found = set(app.openapi().get("paths", {}))
    found.update(str(getattr(route, "path", "")) for route in app.routes)
    return sorted({re.sub(r"\{[^}]*\}", "{}", p) for p in found if p.startswith("/api/")})


def _router(app: FastAPI, state: WebState) -> APIRouter:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    templates = Environment(
        loader=FileSystemLoader(str(_HERE / "templates")),
        autoescape=select_autoescape(["html"]),
    )
    css = highlight_css()
    router = APIRouter()
    slots = asyncio.Semaphore(_RENDER_SLOTS)

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index(request: Request) -> HTMLResponse:
        from importlib.metadata import version

        boot = {
            "title": state.title,
            "version": version("lovia-web"),
            "paths": _api_paths(app),
        }
        page = templates.get_template("index.html").render(title=state.title, boot=boot)
        return HTMLResponse(page, headers={**_SECURITY_HEADERS, "Cache-Control": "no-store"})

    @router.get("/static/highlight.css", include_in_schema=False)
    async def highlight() -> Response:
        return Response(
            css,
            media_type="text/css",
            headers={**_SECURITY_HEADERS, "Cache-Control": "no-cache"},
        )

    @router.post("/api/render", response_model=RenderResult, responses=error_responses(422))
    async def render(body: RenderRequest) -> RenderResult:
        """Markdown to sanitised HTML (markdown-it-py, Pygments, nh3), one per text."""
        base = "/api/workspace/raw?path=" if body.workspace_images else None

        def run() -> list[str]:
            return [render_markdown(t, image_base=base) for t in body.texts]

        async with slots:  # off the event loop: a long text must not stall the streams
            return RenderResult(html=await asyncio.to_thread(run))

    return router


def mount_ui(app: FastAPI, state: WebState) -> None:
    """Serve the UI on ``app``: the page at ``/``, its files at ``/static``, and
    ``POST /api/render``. Idempotent: a second call on the same app does nothing."""
    if any(getattr(route, "name", None) == _MOUNT_NAME for route in app.routes):
        return
    app.include_router(_router(app, state))
    app.mount("/static", _Static(directory=str(_STATIC)), name=_MOUNT_NAME)
