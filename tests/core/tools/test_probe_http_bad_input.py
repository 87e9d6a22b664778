"""A hostile server's Location and a model's framing header: tool errors the model can
read, never a raw exception from the HTTP library."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lovia.tools import http_request, read_page

from tests.core.tools.builtin_server import Site, page, redirect, run_tool, serve


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.setenv("LOVIA_HTTP_ALLOW_PRIVATE", "1")
    with serve() as s:
        s.routes["/ok"] = page("ok")
        yield s


@pytest.mark.parametrize("location", ["javascript:alert(1)", "data:text/html,hi"])
async def test_a_location_httpx_cannot_parse_is_a_tool_error(site: Site, location: str) -> None:
    site.routes["/go"] = redirect(location)
    for tool in (http_request, read_page):
        entry = await run_tool(tool, {"url": site.url("/go")})
        assert entry.is_error
        assert "127.0.0.1 redirected to a URL that cannot be fetched" in entry.output


@pytest.mark.parametrize("header", ["Content-Length", "transfer-encoding"])
async def test_a_framing_header_from_the_model_is_refused_before_sending(
    site: Site, header: str
) -> None:
    args = {
        "url": site.url("/ok"),
        "method": "POST",
        "headers": {header: "5"},
        "body": "0123456789",
    }
    entry = await run_tool(http_request, args, approval_handler=lambda c, ctx: True)
    assert entry.is_error
    assert f"headers must not set {header}: the tool sets it from the body" in entry.output
    assert site.seen == []
