"""http_request against a real local server: what the model reads for each kind of reply.

The tool's guard refuses 127.0.0.1, so these tests open it the way a developer would,
with ``LOVIA_HTTP_ALLOW_PRIVATE=1`` (test_builtin_guard.py proves the default refuses).
"""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from lovia.tools import http_request, writes_need_approval

from tests.core.tools.builtin_server import Handler, Site, page, redirect, run_tool, send, serve

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.setenv("LOVIA_HTTP_ALLOW_PRIVATE", "1")
    with serve() as s:
        yield s


def body_of(output: str) -> str:
    """What follows the status, URL and header lines."""
    return output.split("\n\n", 1)[1]


def echo(h: Handler) -> None:
    seen = h.site.seen[-1]
    reply = {"method": seen.method, "body": seen.body.decode(), "headers": seen.headers}
    send(h, 200, json.dumps(reply, indent=2).encode(), "application/json")


async def test_json_is_re_serialised_compactly_with_status_url_and_headers(site: Site) -> None:
    site.routes["/api"] = page('{\n  "name": "lovia",\n  "tags": ["a", "é"]\n}', "application/json")
    entry = await run_tool(http_request, {"url": site.url("/api")})
    assert not entry.is_error
    lines = entry.output.split("\n")
    assert lines[0] == "HTTP 200 OK"
    assert lines[1] == f"URL: {site.url('/api')}"
    assert "content-type: application/json" in lines
    assert body_of(entry.output) == '{"name":"lovia","tags":["a","é"]}'


async def test_method_headers_and_body_reach_the_server(site: Site) -> None:
    site.routes["/echo"] = echo
    args = {
        "url": site.url("/echo"),
        "method": "post",
        "headers": {"X-Token": "t1", "User-Agent": "my-agent/2"},
        "body": '{"q": "ü"}',
    }
    entry = await run_tool(http_request, args, approval_handler=lambda c, ctx: True)
    got = json.loads(body_of(entry.output))
    assert got["method"] == "POST"
    assert got["body"] == '{"q": "ü"}'
    assert got["headers"]["x-token"] == "t1"
    assert got["headers"]["user-agent"] == "my-agent/2"  # the caller overrides the default


async def test_the_default_user_agent_names_lovia(site: Site) -> None:
    site.routes["/echo"] = echo
    entry = await run_tool(http_request, {"url": site.url("/echo")})
    assert (
        json.loads(body_of(entry.output))["headers"]["user-agent"]
        == "Mozilla/5.0 (compatible; lovia)"
    )


async def test_writes_need_approval_and_are_denied_without_a_decision(site: Site) -> None:
    site.routes["/echo"] = echo
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        entry = await run_tool(http_request, {"url": site.url("/echo"), "method": method})
        assert entry.is_error, method
    assert site.seen == []  # nothing was sent
    for method in ("GET", "HEAD", "OPTIONS"):
        entry = await run_tool(http_request, {"url": site.url("/echo"), "method": method})
        assert not entry.is_error, method
    assert [s.method for s in site.seen] == ["GET", "HEAD", "OPTIONS"]


def test_writes_need_approval_reads_the_method_case_insensitively() -> None:
    ctx: Any = None
    assert writes_need_approval({"url": "x"}, ctx) is False
    assert writes_need_approval({"method": "get"}, ctx) is False
    assert writes_need_approval({"method": "Delete"}, ctx) is True
    assert writes_need_approval({"method": 7}, ctx) is True  # junk fails closed


async def test_text_passes_through_and_head_has_an_empty_body(site: Site) -> None:
    site.routes["/t"] = page("line one\n  line two\n", "text/plain; charset=utf-8")
    entry = await run_tool(http_request, {"url": site.url("/t")})
    assert body_of(entry.output) == "line one\n  line two\n"
    entry = await run_tool(http_request, {"url": site.url("/t"), "method": "HEAD"})
    assert body_of(entry.output) == "(empty body)"


async def test_binary_content_is_described_not_shown(site: Site) -> None:
    site.routes["/logo.png"] = page(PNG, "image/png")
    entry = await run_tool(http_request, {"url": site.url("/logo.png")})
    assert body_of(entry.output) == f"[binary body not shown: image/png, {len(PNG)} bytes]"


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        ("café".encode("latin-1"), "text/plain; charset=ISO-8859-1", "café"),  # header
        (
            '<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251"),
            "text/html",
            '<meta charset="windows-1251"><p>Привет</p>',
        ),  # no header charset: the meta tag
        ("naïve".encode(), "text/plain; charset=no-such-charset", "naïve"),  # bogus: utf-8
        (b"caf\xe9 ok", "text/plain; charset=utf-8", "caf\ufffd ok"),  # wrong: replaced
        (b'{"x": [1, 2]}', None, '{"x":[1,2]}'),  # no type: sniffed as JSON
        (b"plain words", None, "plain words"),  # no type: sniffed as text
        (PNG, None, f"[binary body not shown: unknown type, {len(PNG)} bytes]"),
    ],
)
async def test_charset_and_type_handling(
    site: Site, body: bytes, content_type: str | None, expected: str
) -> None:
    site.routes["/x"] = page(body, content_type)
    entry = await run_tool(http_request, {"url": site.url("/x")})
    assert not entry.is_error
    assert body_of(entry.output) == expected


async def test_the_final_url_after_a_redirect_chain_is_reported(site: Site) -> None:
    site.routes["/a"] = redirect("/b", 301)
    site.routes["/b"] = redirect(site.url("/c", "localhost"), 307)
    site.routes["/c"] = page("arrived", "text/plain")
    entry = await run_tool(http_request, {"url": site.url("/a")})
    assert entry.output.split("\n")[1] == f"URL: {site.url('/c', 'localhost')}"
    assert body_of(entry.output) == "arrived"
    assert [s.path for s in site.seen] == ["/a", "/b", "/c"]


async def test_a_redirect_loop_is_an_error(site: Site) -> None:
    site.routes["/loop"] = redirect("/loop")
    entry = await run_tool(http_request, {"url": site.url("/loop")})
    assert entry.is_error and "redirected more than 10 times" in entry.output
    assert len(site.seen) == 11


async def test_a_post_redirected_by_303_becomes_a_get_without_its_body(site: Site) -> None:
    site.routes["/form"] = redirect("/echo", 303)
    site.routes["/echo"] = echo
    args = {"url": site.url("/form"), "method": "POST", "body": "secret=1"}
    entry = await run_tool(http_request, args, approval_handler=lambda c, ctx: True)
    got = json.loads(body_of(entry.output))
    assert (got["method"], got["body"]) == ("GET", "")


async def test_set_cookie_is_hidden_and_error_statuses_are_results(site: Site) -> None:
    site.routes["/gone"] = lambda h: send(
        h, 404, b"not here", "text/plain", headers={"Set-Cookie": "sid=abc", "X-Trace": "7"}
    )
    entry = await run_tool(http_request, {"url": site.url("/gone")})
    assert not entry.is_error  # an HTTP status is an answer, not a tool failure
    assert entry.output.startswith("HTTP 404 Not Found\n")
    assert "x-trace: 7" in entry.output
    assert "sid=abc" not in entry.output and "set-cookie" not in entry.output.lower()


async def test_a_huge_body_stops_at_the_download_cap_and_the_output_says_so(site: Site) -> None:
    site.routes["/big"] = page(b"a" * 3_000_000, "text/plain")
    entry = await run_tool(http_request, {"url": site.url("/big")})
    body = body_of(entry.output)
    assert body.startswith("a" * 20_000 + "\n\n[truncated: showing 20000 of 1048576 characters]")
    assert body.endswith("[download stopped at the 1048576-byte cap; the body is longer]")


async def test_max_chars_is_clamped_to_its_range(site: Site) -> None:
    site.routes["/t"] = page("x" * 500, "text/plain")
    entry = await run_tool(http_request, {"url": site.url("/t"), "max_chars": 5})
    assert body_of(entry.output) == "x" * 100 + "\n\n[truncated: showing 100 of 500 characters]"


async def test_gzip_is_decoded_and_a_gzip_bomb_is_capped(site: Site) -> None:
    site.routes["/z"] = lambda h: send(h, 200, b"compressed text", "text/plain", compress=True)
    entry = await run_tool(http_request, {"url": site.url("/z")})
    assert body_of(entry.output) == "compressed text"
    bomb = gzip.compress(b"0" * 30_000_000)  # 30 MB that packs into about 30 KB
    site.routes["/bomb"] = lambda h: send(
        h, 200, bomb, "text/plain", headers={"Content-Encoding": "gzip"}
    )
    tracemalloc.start()
    try:
        entry = await run_tool(http_request, {"url": site.url("/bomb"), "max_chars": 100})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12_000_000  # inflated in bounded steps, never 30 MB at once
    assert "of 1048576 characters" in entry.output
    assert "download stopped at the 1048576-byte cap" in entry.output


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS])  # zlib-wrapped, raw
async def test_deflate_is_decoded_with_or_without_its_zlib_header(site: Site, wbits: int) -> None:
    packer = zlib.compressobj(wbits=wbits)
    packed = packer.compress(b"deflated " * 50_000) + packer.flush()
    site.routes["/d"] = lambda h: send(
        h, 200, packed, "text/plain", headers={"Content-Encoding": "deflate"}
    )
    entry = await run_tool(http_request, {"url": site.url("/d"), "max_chars": 200_000})
    assert body_of(entry.output).startswith("deflated " * 1000)
    assert "of 450000 characters" in entry.output


@pytest.mark.parametrize(
    "body",
    [
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff",  # a bad block
        gzip.compress(b"cut short " * 100)[:-12],  # truncated
    ],
)
async def test_a_corrupt_gzip_body_is_an_error(site: Site, body: bytes) -> None:
    site.routes["/bad"] = lambda h: send(
        h, 200, body, "text/plain", headers={"Content-Encoding": "gzip"}
    )
    entry = await run_tool(http_request, {"url": site.url("/bad")})
    assert entry.is_error and "127.0.0.1 sent a body that does not decode" in entry.output


def _stall(h: Handler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", "100")
    h.end_headers()
    h.wfile.write(b"partial")
    h.wfile.flush()
    h.site.release.wait(30)  # until the test ends


def _drip(h: Handler) -> None:
    # Each byte arrives well within the read timeout; only an overall deadline stops it.
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", "1000")
    h.end_headers()
    for _ in range(1000):
        h.wfile.write(b".")
        h.wfile.flush()
        if h.site.release.wait(0.1):
            return


@pytest.mark.parametrize("route", [_stall, _drip])
async def test_a_slow_server_fails_at_the_timeout_for_the_whole_exchange(
    site: Site, route: Any
) -> None:
    site.routes["/slow"] = route
    started = time.monotonic()
    entry = await run_tool(http_request, {"url": site.url("/slow"), "timeout": 1})
    assert time.monotonic() - started < 5
    assert entry.is_error
    assert f"{site.url('/slow')} did not answer within 1 seconds" in entry.output


async def test_an_unreachable_host_names_it(site: Site) -> None:
    from tests.support import free_port

    port = free_port()  # nothing listens there
    entry = await run_tool(http_request, {"url": f"http://127.0.0.1:{port}/"})
    assert entry.is_error and "cannot reach 127.0.0.1" in entry.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "url is required"),
        ({"url": "http://x/", "method": "BREW"}, "method must be one of"),
        ({"url": "http://x/", "headers": {"a": 1}}, "headers must be an object of string"),
        ({"url": "http://x/", "timeout": "soon"}, "timeout must be a number"),
    ],
)
async def test_bad_arguments_are_errors_the_model_can_fix(
    args: dict[str, Any], message: str
) -> None:
    entry = await run_tool(http_request, args, approval_handler=lambda c, ctx: True)
    assert entry.is_error and message in entry.output
