"""Hostile bodies for the built-in HTTP tools: encodings the bounded inflater must not miss."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest
from lovia.tools import http_request, read_page

from tests.core.tools.builtin_server import Site, run_tool, send, serve


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.setenv("LOVIA_HTTP_ALLOW_PRIVATE", "1")
    with serve() as s:
        yield s


def _gzip_of_zeros(size: int) -> bytes:
    """gzip of ``size`` zero bytes, built without holding them all."""
    packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    block = b"0" * 1_000_000
    return b"".join(packer.compress(block) for _ in range(size // len(block))) + packer.flush()


DOUBLE_BOMB = gzip.compress(_gzip_of_zeros(200_000_000))
"""About 500 bytes on the wire that inflate to 200 MB through two gzip layers."""


@pytest.mark.parametrize("encoding", ["gzip, gzip", "gzip,x-gzip"])
async def test_a_body_gzipped_twice_is_inflated_in_bounded_steps(site: Site, encoding: str) -> None:
    site.routes["/b"] = lambda h: send(
        h, 200, DOUBLE_BOMB, "text/plain", headers={"Content-Encoding": encoding}
    )
    tracemalloc.start()
    try:
        entry = await run_tool(http_request, {"url": site.url("/b"), "max_chars": 100})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not entry.is_error, entry.output
    assert peak < 40_000_000  # httpx alone decodes both layers whole: over 400 MB
    assert "download stopped at the 1048576-byte cap" in entry.output


async def test_two_content_encoding_headers_are_both_undone(site: Site) -> None:
    twice = gzip.compress(gzip.compress(b"hello twice"))
    site.routes["/t"] = lambda h: send(
        h,
        200,
        twice,
        "text/plain",
        headers={"Content-Encoding": "gzip", "content-encoding": "gzip"},
    )
    entry = await run_tool(http_request, {"url": site.url("/t")})
    assert entry.output.endswith("\n\nhello twice")


async def test_an_encoding_that_was_not_asked_for_is_a_tool_error(site: Site) -> None:
    site.routes["/br"] = lambda h: send(
        h, 200, b"\x1b\xff\xff", "text/html", headers={"Content-Encoding": "br"}
    )
    entry = await run_tool(read_page, {"url": site.url("/br")})
    assert entry.is_error
    assert "sent a body in content-encoding br, which was not asked for" in entry.output


async def test_identity_and_case_are_tolerated(site: Site) -> None:
    site.routes["/i"] = lambda h: send(
        h,
        200,
        gzip.compress(b"plain"),
        "text/plain",
        headers={"Content-Encoding": "identity, GZIP"},
    )
    entry = await run_tool(http_request, {"url": site.url("/i")})
    assert entry.output.endswith("\n\nplain")


@pytest.mark.parametrize("charset", ["hex", "rot13", "base64", "zlib", "idna", "punycode"])
@pytest.mark.parametrize("where", ["header", "meta"])
async def test_a_codec_that_is_no_charset_falls_back_to_utf8(
    site: Site, charset: str, where: str
) -> None:
    if where == "header":
        body, ctype = "<p>héllo wörld</p>", f"text/html; charset={charset}"
    else:
        body, ctype = f'<meta charset="{charset}"><p>héllo wörld</p>', "text/html"
    site.routes["/c"] = lambda h: send(h, 200, body.encode(), ctype)
    for tool in (http_request, read_page):
        entry = await run_tool(tool, {"url": site.url("/c")})
        assert not entry.is_error, entry.output
        assert "héllo wörld" in entry.output
