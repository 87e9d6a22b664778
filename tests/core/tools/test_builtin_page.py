"""read_page, page_reader and HttpReader against a real local server.

Local pages need the guard's opt-out (``allow_private=True``); test_builtin_guard.py proves
the default refuses them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from lovia.exceptions import ToolError, UserError
from lovia.tools import HttpReader, Page, PageImage, PageReader, page_reader

from tests.core.tools.builtin_server import Handler, Site, page, redirect, run_tool, send, serve

ARTICLE = """<!doctype html><html><head><title>Release notes</title></head><body>
<h1>Release 2.0</h1><p>See the <a href="changes.html">full list</a>.</p>
<img src="/shot.png" alt="Screenshot"></body></html>"""


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as s:
        s.routes["/notes/"] = page(ARTICLE)
        yield s


def hits(site: Site, path: str) -> int:
    return sum(1 for s in site.seen if s.path == path)


async def test_the_tool_leads_with_title_url_and_status_then_markdown(site: Site) -> None:
    site.routes["/old"] = redirect("/notes/")
    entry = await run_tool(page_reader(allow_private=True), {"url": site.url("/old")})
    assert not entry.is_error
    assert entry.output.split("\n") == [
        "Title: Release notes",
        f"URL: {site.url('/notes/')}",  # the final URL, after the redirect
        "Status: 200",
        "",
        "# Release 2.0",
        "",
        # Relative links resolve against the final URL.
        f"See the [full list]({site.url('/notes/changes.html')}).",
        "",
        "Screenshot",
    ]


async def test_images_are_listed_on_request(site: Site) -> None:
    entry = await run_tool(
        page_reader(allow_private=True), {"url": site.url("/notes/"), "images": True}
    )
    assert entry.output.endswith(f"Images:\n- {site.url('/shot.png')} (Screenshot)")
    page_ = await HttpReader(allow_private=True).read(site.url("/notes/"), images=True)
    assert page_.images == (PageImage(site.url("/shot.png"), "Screenshot"),)
    assert (await HttpReader(allow_private=True).read(site.url("/notes/"))).images == ()


async def test_long_pages_are_read_in_windows_by_offset(site: Site) -> None:
    paragraphs = "".join(f"<p>paragraph {i:03d} {'x' * 40}</p>" for i in range(60))
    site.routes["/long"] = page(f"<title>Long</title>{paragraphs}")
    tool = page_reader(allow_private=True, max_chars=1000)
    full = (await HttpReader(allow_private=True).read(site.url("/long"))).text
    assert len(full) > 2500

    first = await run_tool(tool, {"url": site.url("/long")})
    window, notice = first.output.split("\n\n", 1)[1].rsplit("\n\n", 1)
    assert window == full[:1000]
    assert notice == (
        f"[truncated: showing characters 0-1000 of {len(full)}; "
        "call read_page with offset=1000 to read on]"
    )
    pieces, offset = [], 0
    while offset < len(full):
        entry = await run_tool(tool, {"url": site.url("/long"), "offset": offset})
        body = entry.output.split("\n\n", 1)[1]
        pieces.append(body.split("\n\n[truncated:")[0])
        offset += 1000
    assert "".join(pieces) == full  # the windows tile the page exactly

    past = await run_tool(tool, {"url": site.url("/long"), "offset": 10**6})
    assert not past.is_error
    assert past.output.endswith(
        f"[offset 1000000 is past the end: the page has {len(full)} characters]"
    )


async def test_the_cache_serves_repeats_until_the_ttl_runs_out(site: Site) -> None:
    now = [1000.0]
    reader = HttpReader(cache_ttl=300, allow_private=True, clock=lambda: now[0])
    url = site.url("/notes/")
    first = await reader.read(url)
    assert await reader.read(url) == first
    now[0] += 299
    await reader.read(url)
    assert hits(site, "/notes/") == 1
    now[0] += 2
    await reader.read(url)
    assert hits(site, "/notes/") == 2


async def test_a_zero_ttl_turns_the_cache_off_and_the_size_bounds_it(site: Site) -> None:
    off = HttpReader(cache_ttl=0, allow_private=True)
    await off.read(site.url("/notes/"))
    await off.read(site.url("/notes/"))
    assert hits(site, "/notes/") == 2

    site.routes["/other"] = page("<p>other</p>")
    small = HttpReader(cache_size=1, allow_private=True)
    for path in ("/notes/", "/other", "/notes/"):  # /other evicts /notes/
        await small.read(site.url(path))
    assert hits(site, "/notes/") == 4 and hits(site, "/other") == 1


async def test_an_error_status_is_a_tool_error_with_a_capped_body(site: Site) -> None:
    site.routes["/missing"] = lambda h: send(h, 404, b"<p>" + b"n" * 5000 + b"</p>")
    entry = await run_tool(page_reader(allow_private=True), {"url": site.url("/missing")})
    assert entry.is_error
    assert f"{site.url('/missing')} answered HTTP 404 Not Found: <p>nnnn" in entry.output
    assert entry.output.count("n" * 10) < 60  # at most 500 characters of the body


async def test_error_pages_are_not_cached(site: Site) -> None:
    reader = HttpReader(allow_private=True)
    for _ in range(2):
        with pytest.raises(ToolError, match="HTTP 404"):
            await reader.read(site.url("/nowhere"))
    assert hits(site, "/nowhere") == 2


async def test_binary_content_is_refused_with_a_hint(site: Site) -> None:
    site.routes["/file.pdf"] = page(b"%PDF-1.7 \x00\x01\x02", "application/pdf")
    with pytest.raises(ToolError, match=r"is application/pdf \(12 bytes\), not a page") as err:
        await HttpReader(allow_private=True).read(site.url("/file.pdf"))
    assert err.value.hint == "use http_request to see its headers"


async def test_non_html_text_passes_through_untouched(site: Site) -> None:
    site.routes["/data.json"] = page('{"a": [1, 2]}', "application/json")
    site.routes["/notes.txt"] = page("# not markdown here\n*raw*", "text/plain")
    reader = HttpReader(allow_private=True)
    assert (await reader.read(site.url("/data.json"))).text == '{"a": [1, 2]}'
    got = await reader.read(site.url("/notes.txt"))
    assert (got.text, got.title, got.content_type) == (
        "# not markdown here\n*raw*",
        "",
        "text/plain",
    )


async def test_the_charset_is_sniffed_from_a_meta_tag_and_gzip_is_decoded(site: Site) -> None:
    html = '<html><head><meta http-equiv="Content-Type" content="text/html; charset=koi8-r">'
    body = (html + "<title>Новости</title></head><p>Привет, мир</p>").encode("koi8-r")
    site.routes["/ru"] = lambda h: send(h, 200, body, "text/html", compress=True)
    got = await HttpReader(allow_private=True).read(site.url("/ru"))
    assert (got.title, got.text) == ("Новости", "Привет, мир")


async def test_a_download_past_the_cap_is_marked_and_announced(site: Site) -> None:
    site.routes["/big"] = page("<p>" + "word " * 2000 + "</p>")
    reader = HttpReader(max_bytes=1000, allow_private=True)
    got = await reader.read(site.url("/big"))
    assert got.size_capped and len(got.text) < 1000
    entry = await run_tool(page_reader(reader), {"url": site.url("/big")})
    assert entry.output.endswith(
        "[the download stopped at the size cap; the page is longer than this]"
    )


def _drop_first(h: Handler) -> None:
    if sum(1 for s in h.site.seen if s.path == "/flaky") == 1:
        h.close_connection = True  # hang up without a response
        return
    send(h, 200, b"<p>second time lucky</p>")


def _always_drop(h: Handler) -> None:
    h.close_connection = True


async def test_one_dropped_connection_is_retried(site: Site) -> None:
    site.routes["/flaky"] = _drop_first
    got = await HttpReader(allow_private=True).read(site.url("/flaky"))
    assert got.text == "second time lucky"
    assert hits(site, "/flaky") == 2
    site.routes["/dead"] = _always_drop
    with pytest.raises(ToolError, match="127.0.0.1 closed the connection"):
        await HttpReader(allow_private=True).read(site.url("/dead"))
    assert hits(site, "/dead") == 2


class _Canned:
    """A custom reader: no network at all."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    async def read(self, url: str, *, images: bool = False) -> Page:
        self.calls.append((url, images))
        return Page(url=url, status=200, title="Canned", text="from a custom backend")


async def test_a_custom_reader_is_used_as_given() -> None:
    impl = _Canned()
    before = dict(vars(impl))
    tool = page_reader(impl, name="browse")
    assert isinstance(impl, PageReader) and tool.name == "browse"
    entry = await run_tool(tool, {"url": "https://anything.example/", "images": True})
    assert entry.output == (
        "Title: Canned\nURL: https://anything.example/\nStatus: 200\n\nfrom a custom backend"
    )
    assert impl.calls == [("https://anything.example/", True)]
    assert vars(impl).keys() == before.keys()  # nothing was set on it


def test_allow_private_with_a_custom_reader_is_a_usage_error() -> None:
    with pytest.raises(UserError, match="allow_private applies to the default reader only"):
        page_reader(_Canned(), allow_private=True)


@pytest.mark.parametrize(
    "kwargs", [{"timeout": 0}, {"max_bytes": 0}, {"cache_ttl": -1}, {"cache_size": -1}]
)
def test_http_reader_rejects_nonsense_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(UserError):
        HttpReader(**kwargs)  # type: ignore[arg-type]


def test_page_is_a_frozen_value() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Page("u", 200).text = "x"  # type: ignore[misc]
