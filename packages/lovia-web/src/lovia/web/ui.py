"""The bundled UI: ``mount_ui(app, state)`` serves the page at ``/`` and its files at ``/static``.

* ``GET /`` is the Jinja2 page shell (``templates/index.html``). It carries the boot data
  (title, version, and the API paths this server actually has), so the page shows only the
  features whose endpoints exist and never calls one that does not.
* ``/static/*`` serves the ES modules and CSS with explicit content types
  (``text/javascript``, ``text/css``), ``nosniff`` and revalidation by ETag;
  ``/static/highlight.css`` is the Pygments theme, generated.
* Every UI response carries a strict Content-Security-Policy: only this origin, no inline
  script, no inline style, no ``eval``, no plugins, no framing.
* The page renders every model-written text through ``POST /api/render``
  (``lovia.web.routes.render``), an API route like the others (behind the same auth).
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from .deps import WebState
from .render import highlight_css

__all__ = ["CSP", "mount_ui"]

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

    return router


def mount_ui(app: FastAPI, state: WebState) -> None:
    """Serve the UI on ``app``: the page at ``/`` and its files at ``/static``.
    Idempotent: a second call on the same app does nothing."""
    if any(getattr(route, "name", None) == _MOUNT_NAME for route in app.routes):
        return
    app.include_router(_router(app, state))
    app.mount("/static", _Static(directory=str(_STATIC)), name=_MOUNT_NAME)
