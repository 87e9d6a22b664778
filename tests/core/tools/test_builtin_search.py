"""web_search and its backends: Tavily against a local server speaking its API, DuckDuckGo
through a stand-in for the ``ddgs`` package (whose own HTTP client cannot be redirected), and
one live test per backend, skipped unless ``LOVIA_LIVE_SEARCH=1``."""

from __future__ import annotations

import json
import os
import socket
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from lovia.exceptions import ToolError, UserError
from lovia.tools import (
    DuckDuckGoSearch,
    SearchResult,
    TavilySearch,
    WebSearch,
    duckduckgo_search,
    tavily_search,
    web_search,
)

from tests.conftest import _real_connect
from tests.core.tools.builtin_server import Handler, Site, run_tool, send, serve
from tests.support import free_port

LIVE = os.environ.get("LOVIA_LIVE_SEARCH") == "1"


class Recorder:
    """A WebSearch that records its calls and answers with ``results``."""

    def __init__(self, results: list[SearchResult]) -> None:
        self.results = results
        self.calls: list[tuple[str, int, str | None]] = []

    async def search(
        self, query: str, *, max_results: int = 5, time_range: Any = None
    ) -> list[SearchResult]:
        self.calls.append((query, max_results, time_range))
        return self.results


HITS = [
    SearchResult("Lovia docs", "https://lovia.example/docs", "The  agent\nframework."),
    SearchResult("", "https://bare.example/", ""),
]


async def test_results_render_as_numbered_title_url_snippet_blocks() -> None:
    impl = Recorder(HITS)
    assert isinstance(impl, WebSearch)
    entry = await run_tool(web_search(impl), {"query": "lovia"})
    assert entry.output.split("\n") == [
        "1. Lovia docs",
        "   https://lovia.example/docs",
        "   The agent framework.",
        "",
        "2. https://bare.example/",  # no title: the URL stands in
        "   https://bare.example/",
    ]
    assert impl.calls == [("lovia", 5, None)]


@pytest.mark.parametrize(("asked", "sent"), [(50, 20), (0, 1), (-3, 1), (7, 7)])
async def test_max_results_is_clamped(asked: int, sent: int) -> None:
    impl = Recorder([SearchResult(f"r{i}", f"https://r{i}.example/") for i in range(30)])
    entry = await run_tool(web_search(impl), {"query": "q", "max_results": asked})
    assert impl.calls[0][1] == sent
    assert entry.output.count("https://r") == sent  # an over-eager backend is cut too


async def test_time_range_is_passed_and_checked() -> None:
    impl = Recorder([])
    entry = await run_tool(web_search(impl, name="search"), {"query": "q", "time_range": "w"})
    assert (entry.output, impl.calls) == ("No results for 'q'.", [("q", 5, "w")])
    bad = await run_tool(web_search(impl, name="search"), {"query": "q", "time_range": "decade"})
    assert bad.is_error and "time_range must be one of d, w, m, y" in bad.output


# --- Tavily -----------------------------------------------------------------------------


@pytest.fixture
def tavily(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with serve() as site:
        yield site


def tavily_reply(payload: Any, status: int = 200) -> Any:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return lambda h: send(h, status, raw, "application/json")


async def test_tavily_sends_the_query_and_maps_the_results(tavily: Site) -> None:
    tavily.routes["/search"] = tavily_reply(
        {
            "query": "q",
            "results": [
                {"title": "One", "url": "https://one.example/", "content": "first", "score": 0.9},
                {"title": "no url"},  # malformed entries are skipped
                "junk",
                {"title": "Two", "url": "https://two.example/", "content": None},
            ],
        }
    )
    impl = TavilySearch("tvly-test", base_url=tavily.url(""))
    got = await impl.search("lovia agents", max_results=3, time_range="w")
    assert got == [
        SearchResult("One", "https://one.example/", "first"),
        SearchResult("Two", "https://two.example/", ""),
    ]
    (seen,) = tavily.seen
    assert (seen.method, seen.path) == ("POST", "/search")
    assert seen.headers["authorization"] == "Bearer tvly-test"
    assert json.loads(seen.body) == {
        "query": "lovia agents",
        "max_results": 3,
        "search_depth": "basic",
        "time_range": "week",
    }


async def test_tavily_end_to_end_through_a_run(
    tavily: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-env")
    tavily.routes["/search"] = tavily_reply(
        {"results": [{"title": "Hit", "url": "https://hit.example/", "content": "snippet"}]}
    )
    entry = await run_tool(tavily_search(base_url=tavily.url("")), {"query": "x"})
    assert entry.output == "1. Hit\n   https://hit.example/\n   snippet"
    assert tavily.seen[0].headers["authorization"] == "Bearer tvly-env"


@pytest.mark.parametrize(
    ("status", "payload", "message", "hint"),
    [
        (401, {"detail": {"error": "Unauthorized: missing or invalid API key."}},
         "Tavily answered HTTP 401: Unauthorized: missing or invalid API key.", "TAVILY_API_KEY"),
        (429, {"detail": "slow down"}, "Tavily answered HTTP 429: slow down", "rate limit"),
        (500, b"<html>oops</html>", "Tavily answered HTTP 500: <html>oops</html>", None),
    ],
)  # fmt: skip
async def test_tavily_http_errors_become_tool_errors(
    tavily: Site, status: int, payload: Any, message: str, hint: str | None
) -> None:
    tavily.routes["/search"] = tavily_reply(payload, status)
    with pytest.raises(ToolError) as err:
        await TavilySearch("k", base_url=tavily.url("")).search("q")
    assert err.value.message == message
    assert (err.value.hint is None) if hint is None else (hint in (err.value.hint or ""))


@pytest.mark.parametrize("payload", [{"results": "nope"}, [], {"answer": "no results key"}])
async def test_tavily_tolerates_malformed_replies(tavily: Site, payload: Any) -> None:
    tavily.routes["/search"] = tavily_reply(payload)
    assert await TavilySearch("k", base_url=tavily.url("")).search("q") == []


async def test_tavily_reports_a_reply_that_is_not_json(tavily: Site) -> None:
    tavily.routes["/search"] = tavily_reply(b"<html>captive portal</html>")
    with pytest.raises(ToolError, match="not JSON: '<html>captive portal</html>'"):
        await TavilySearch("k", base_url=tavily.url("")).search("q")


async def test_tavily_retries_one_dropped_connection(tavily: Site) -> None:
    def flaky(h: Handler) -> None:
        if len(h.site.seen) == 1:
            h.close_connection = True  # hang up without answering
            return
        tavily_reply({"results": [{"title": "t", "url": "https://u.example/"}]})(h)

    tavily.routes["/search"] = flaky
    got = await TavilySearch("k", base_url=tavily.url("")).search("q")
    assert [r.url for r in got] == ["https://u.example/"] and len(tavily.seen) == 2


async def test_tavily_connection_failures_name_the_host() -> None:
    port = free_port()
    with pytest.raises(ToolError, match=f"cannot reach 127.0.0.1:{port}"):
        await TavilySearch("k", base_url=f"http://127.0.0.1:{port}").search("q")


def test_tavily_without_a_key_fails_when_the_tool_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(UserError, match="needs an API key") as err:
        tavily_search()
    assert "TAVILY_API_KEY" in (err.value.hint or "")


# --- DuckDuckGo -------------------------------------------------------------------------


class _FakeDDGS:
    """Stands in for ``ddgs.DDGS``: same constructor and ``text`` signature."""

    rows: Any = []
    error: Exception | None = None
    calls: list[dict[str, Any]] = []

    def __init__(self, proxy: str | None = None, timeout: int | None = 5) -> None:
        self.timeout = timeout

    def text(self, query: str, **kwargs: Any) -> Any:
        type(self).calls.append({"query": query, "timeout": self.timeout, **kwargs})
        if self.error is not None:
            raise self.error
        return self.rows


@pytest.fixture
def fake_ddgs(monkeypatch: pytest.MonkeyPatch) -> type[_FakeDDGS]:
    exceptions = types.ModuleType("ddgs.exceptions")

    class DDGSException(Exception):
        pass

    class RatelimitException(DDGSException):
        pass

    class TimeoutException(DDGSException):
        pass

    for cls in (DDGSException, RatelimitException, TimeoutException):
        setattr(exceptions, cls.__name__, cls)
    module = types.ModuleType("ddgs")
    fake = type("DDGS", (_FakeDDGS,), {"rows": [], "error": None, "calls": []})
    module.DDGS = fake  # type: ignore[attr-defined]
    module.exceptions = exceptions  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ddgs", module)
    monkeypatch.setitem(sys.modules, "ddgs.exceptions", exceptions)
    return fake


async def test_duckduckgo_maps_ddgs_rows_and_passes_the_options(fake_ddgs: Any) -> None:
    fake_ddgs.rows = [
        {"title": "A", "href": "https://a.example/", "body": "alpha"},
        {"title": "broken"},
        {"title": "B", "href": "https://b.example/", "body": ""},
    ]
    entry = await run_tool(
        duckduckgo_search(timeout=7), {"query": "q", "max_results": 4, "time_range": "m"}
    )
    assert entry.output == "1. A\n   https://a.example/\n   alpha\n\n2. B\n   https://b.example/"
    assert fake_ddgs.calls == [
        {"query": "q", "timeout": 7, "max_results": 4, "timelimit": "m",
         "region": "us-en", "safesearch": "moderate"}
    ]  # fmt: skip


async def test_duckduckgo_no_results_is_an_empty_list_and_other_errors_are_tool_errors(
    fake_ddgs: Any,
) -> None:
    errors = sys.modules["ddgs.exceptions"]
    impl = DuckDuckGoSearch()
    fake_ddgs.error = errors.DDGSException("No results found.")
    assert await impl.search("q") == []
    fake_ddgs.error = errors.RatelimitException("202 Ratelimit")
    with pytest.raises(ToolError, match="rate-limited the search: 202 Ratelimit"):
        await impl.search("q")
    fake_ddgs.error = errors.DDGSException("https://html.duckduckgo.com 403")
    with pytest.raises(ToolError, match="DuckDuckGo search failed: .* 403"):
        await impl.search("q")


def test_duckduckgo_without_ddgs_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ddgs", None)  # as if not installed
    with pytest.raises(UserError, match="needs the ddgs package") as err:
        duckduckgo_search()
    assert err.value.hint == 'install it with: pip install "lovia-core[ddg]"'


# --- live -------------------------------------------------------------------------------


@pytest.fixture
def internet(monkeypatch: pytest.MonkeyPatch) -> None:
    if not LIVE:
        pytest.skip("live search tests run only with LOVIA_LIVE_SEARCH=1")
    monkeypatch.setattr(socket.socket, "connect", _real_connect)


@pytest.mark.live_provider
async def test_live_tavily(internet: None) -> None:
    if not os.environ.get("TAVILY_API_KEY"):
        pytest.skip("TAVILY_API_KEY is not set")
    got = await TavilySearch().search("Python programming language", max_results=3)
    assert got and all(r.url.startswith("http") for r in got)


@pytest.mark.live_provider
async def test_live_duckduckgo(internet: None) -> None:
    pytest.importorskip("ddgs", reason="the ddg extra is not installed")
    got = await DuckDuckGoSearch().search("Python programming language", max_results=3)
    assert got and all(r.url.startswith("http") for r in got)
