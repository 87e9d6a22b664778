"""An approved write is sent where it was approved: a 307/308 redirect keeps the method
and the body, so following one to another origin would send the write somewhere nobody
approved. The redirect is the result instead; the model can ask again for the new URL."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from lovia.tools import http_request

from tests.core.tools.builtin_server import Handler, Site, redirect, run_tool, send, serve


def echo(h: Handler) -> None:
    seen = h.site.seen[-1]
    send(
        h,
        200,
        json.dumps({"method": seen.method, "body": seen.body.decode()}).encode(),
        "application/json",
    )


@pytest.fixture
def sites(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Site, Site]]:
    monkeypatch.setenv("LOVIA_HTTP_ALLOW_PRIVATE", "1")
    with serve() as approved, serve() as elsewhere:
        yield approved, elsewhere


@pytest.mark.parametrize("status", [307, 308])
async def test_a_write_is_not_re_sent_to_another_origin(
    sites: tuple[Site, Site], status: int
) -> None:
    approved, elsewhere = sites
    elsewhere.routes["/collect"] = echo
    approved.routes["/api"] = redirect(elsewhere.url("/collect"), status)
    args = {"url": approved.url("/api"), "method": "POST", "body": "card=4111"}
    entry = await run_tool(http_request, args, approval_handler=lambda c, ctx: True)
    assert elsewhere.seen == []
    assert not entry.is_error
    assert entry.output.startswith(f"HTTP {status} ")
    assert f"location: {elsewhere.url('/collect')}" in entry.output.lower()


async def test_a_write_follows_a_same_origin_redirect(sites: tuple[Site, Site]) -> None:
    approved, _ = sites
    approved.routes["/api"] = redirect("/api/v2", 307)
    approved.routes["/api/v2"] = echo
    args = {"url": approved.url("/api"), "method": "PUT", "body": "x=1"}
    entry = await run_tool(http_request, args, approval_handler=lambda c, ctx: True)
    got = json.loads(entry.output.split("\n\n", 1)[1])
    assert got == {"method": "PUT", "body": "x=1"}


async def test_a_read_still_follows_a_redirect_to_another_origin(sites: tuple[Site, Site]) -> None:
    approved, elsewhere = sites
    elsewhere.routes["/collect"] = echo
    approved.routes["/api"] = redirect(elsewhere.url("/collect"), 307)
    entry = await run_tool(http_request, {"url": approved.url("/api")})
    assert json.loads(entry.output.split("\n\n", 1)[1]) == {"method": "GET", "body": ""}
