"""Authentication: the server token, how a client presents it, and the loopback rules.

A server either has no authentication (the default of ``create_app``, and of ``serve`` on a
loopback host), a *server token* (``token=``), or the embedder's own dependency (``auth=``).
A client presents the token as the ``lovia_token`` cookie or an ``Authorization: Bearer``
header; a query ``?token=`` is accepted only at the UI shell (``/?token=``), which trades it
for the cookie and redirects to ``/`` without it. Tokens are compared in constant time.

``rebinding_guard`` refuses state-changing requests of an *unauthenticated* server whose
``Host`` header is not a loopback name: a DNS-rebinding page in the user's browser reaches a
loopback server under its own host name, and that is what it cannot fake. Token auth lifts
the guard (a rebinding page has no token).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import Depends, HTTPException, Request
from lovia.exceptions import UserError
from starlette.datastructures import QueryParams
from starlette.responses import JSONResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .models import ErrorBody

__all__ = [
    "TOKEN_COOKIE",
    "TokenLinkMiddleware",
    "authenticated",
    "credential_of",
    "cross_site_guard",
    "custom_auth_dependency",
    "generate_token",
    "host_of_header",
    "is_loopback",
    "normalise_token",
    "rebinding_guard",
    "token_dependency",
    "token_matches",
]

TOKEN_COOKIE = "lovia_token"
"""The cookie that carries the server token (set by ``/?token=``)."""

_MAX_TOKEN_CHARS = 512
_TOKEN_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F)) - set('";,\\')
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_AUTHENTICATED = "lovia_authenticated"
UNAUTHORIZED_DETAIL = (
    "missing or wrong server token: send it as the lovia_token cookie or an "
    "'Authorization: Bearer <server token>' header"
)
"""The 401 detail: it names the *server token*, never the value that was sent."""


def generate_token() -> str:
    """A fresh server token: 32 random bytes, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def normalise_token(token: object) -> str:
    """``token`` stripped; a blank, oversized or unsendable token fails fast (``UserError``).

    A blank token never means "no auth": pass no token for that.
    """
    if not isinstance(token, str):
        raise UserError(
            f"the server token must be a string, got {type(token).__name__}",
            hint="pass token=generate_token() or a string of your own",
        )
    stripped = token.strip()
    if not stripped:
        raise UserError(
            "the server token is blank; a blank token would not protect anything",
            hint="pass token=None for no authentication, or token=generate_token()",
        )
    if len(stripped) > _MAX_TOKEN_CHARS or not set(stripped) <= _TOKEN_CHARS:
        raise UserError(
            f"the server token must be at most {_MAX_TOKEN_CHARS} printable ASCII characters, "
            'without spaces, quotes, ";", "," or "\\" (it travels in a cookie and a header)',
            hint="use generate_token()",
        )
    return stripped


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is loopback:
    ``localhost`` (and ``*.localhost``), ``127.0.0.0/8``, ``::1``, or IPv4-mapped loopback.

    A wildcard (``0.0.0.0``, ``::``, ``""``) is not: it listens on every interface.
    """
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def host_of_header(value: str) -> str:
    """The host name of a ``Host`` header value, without its port (``[::1]:80`` -> ``::1``)."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value  # a bare name, or an (invalid) unbracketed IPv6 address


def credential_of(request: Request) -> str | None:
    """The token the request presents: the bearer header first, else the cookie. A query
    ``?token=`` is deliberately not read here (it would end up in logs and histories)."""
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    cookie = request.cookies.get(TOKEN_COOKIE)
    return cookie.strip() if cookie else None


def token_matches(expected: str, given: str | None) -> bool:
    """Constant-time comparison; any string (unicode, NUL, huge) is just a mismatch."""
    if given is None:
        return False
    return hmac.compare_digest(
        expected.encode("utf-8"), given.encode("utf-8", errors="surrogatepass")
    )


def authenticated(request: Request) -> bool:
    """Whether an auth dependency (token or custom) accepted this request."""
    return bool(getattr(request.state, _AUTHENTICATED, False))


def token_dependency(token: str) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency that lets a request through only with the server ``token``
    (cookie ``lovia_token`` or ``Authorization: Bearer``); otherwise 401.

    Use it to guard an embedded router:
    ``app.include_router(build_api_router(deps), dependencies=[Depends(token_dependency(t))])``.
    """
    expected = normalise_token(token)

    async def require_server_token(request: Request) -> None:
        if not token_matches(expected, credential_of(request)):
            raise HTTPException(
                401, detail=UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": "Bearer"}
            )
        setattr(request.state, _AUTHENTICATED, True)

    return require_server_token


def custom_auth_dependency(auth: Callable[..., Any]) -> Callable[..., Awaitable[None]]:
    """Wrap the embedder's ``auth`` dependency so a request it accepts counts as
    authenticated (``rebinding_guard`` then lets it through)."""

    # A default, not ``Annotated``: the annotations are strings here, and ``auth`` is local.
    async def require_custom_auth(request: Request, _: Any = Depends(auth)) -> None:  # noqa: B008
        setattr(request.state, _AUTHENTICATED, True)

    return require_custom_auth


async def rebinding_guard(request: Request) -> None:
    """403 for a state-changing request of an unauthenticated server whose ``Host`` header
    is not loopback (a DNS-rebinding page). Safe methods and authenticated requests pass.

    Apply it to a route with ``dependencies=[Depends(rebinding_guard)]``; the server's auth
    dependency runs first (it guards the router), so token auth lifts it.
    """
    if request.method in _SAFE_METHODS or authenticated(request):
        return
    host = request.headers.get("host")
    if host is None or not is_loopback(host_of_header(host)):
        raise HTTPException(
            403,
            detail="refused: this server has no authentication and the request's Host header "
            "is not a loopback name (a possible DNS-rebinding attack)",
        )


def cross_site_guard(allowed_origins: Sequence[str] = ()) -> Callable[[Request], Awaitable[None]]:
    """A dependency for an *unauthenticated* API: 403 for a state-changing request whose
    ``Origin`` is another site's (not this server's own, nor one of ``allowed_origins``).

    Without it, any page the user visits could post a form (a file upload) or a body-less
    request to an open loopback server: a browser sends those without a CORS preflight.
    A request without ``Origin`` (a CLI, a script) is not a browser's cross-site one.
    """
    allowed = frozenset(o.rstrip("/").lower() for o in allowed_origins)

    async def refuse_cross_site(request: Request) -> None:
        origin = request.headers.get("origin")
        if request.method in _SAFE_METHODS or origin is None or authenticated(request):
            return
        origin = origin.strip().rstrip("/").lower()
        if "*" in allowed or origin in allowed:
            return
        host = (request.headers.get("host") or "").strip().lower()
        if host and origin in (f"http://{host}", f"https://{host}"):
            return
        raise HTTPException(
            403,
            detail="refused: a page of another origin may not change this server "
            "(it has no authentication)",
        )

    return refuse_cross_site


class TokenLinkMiddleware:
    """``GET /?token=<server token>``: set the ``lovia_token`` cookie (HttpOnly,
    SameSite=Strict) and redirect to ``/`` without the token; a wrong token gets 401.

    Only the UI shell's path takes a query token; every other path ignores it.
    """

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = normalise_token(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/" or scope["method"] not in _SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        query = QueryParams(scope.get("query_string", b"").decode("latin-1"))
        if "token" not in query:
            await self.app(scope, receive, send)
            return
        given = query.get("token", "").strip()
        if not token_matches(self.token, given):
            refused = JSONResponse(
                ErrorBody(detail=UNAUTHORIZED_DETAIL).model_dump(exclude_none=True),
                status_code=401,
                headers={"WWW-Authenticate": "Bearer", "Cache-Control": "no-store"},
            )
            await refused(scope, receive, send)
            return
        rest = QueryParams([(k, v) for k, v in query.multi_items() if k != "token"])
        target = scope.get("root_path", "") + "/" + (f"?{rest}" if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            TOKEN_COOKIE,
            self.token,
            httponly=True,
            samesite="strict",
            path=scope.get("root_path", "") or "/",
        )
        response.headers["Cache-Control"] = "no-store"
        await response(scope, receive, send)
