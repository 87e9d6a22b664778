"""``web_search(impl)``: a search tool over any ``WebSearch`` backend, and two backends.

``DuckDuckGoSearch`` needs no key and uses the ``ddgs`` package (extra ``lovia-core[ddg]``),
the maintained successor of ``duckduckgo-search``. ``TavilySearch`` calls Tavily's search
API with ``TAVILY_API_KEY``. Both factories build their backend eagerly, so a missing
package or key is a ``UserError`` when the agent is assembled, not in the middle of a run.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

from ..exceptions import ToolError, UserError
from ._args import int_arg, object_schema, optional_text_arg, text_arg
from .base import Tool

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = [
    "DuckDuckGoSearch",
    "SearchResult",
    "TavilySearch",
    "WebSearch",
    "duckduckgo_search",
    "tavily_search",
    "web_search",
]

TimeRange = Literal["d", "w", "m", "y"]
_TIME_RANGES = ("d", "w", "m", "y")


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One hit: a title, its URL and a snippet of its text."""

    title: str
    url: str
    snippet: str = ""


@runtime_checkable
class WebSearch(Protocol):
    """A search backend. ``time_range`` limits results to the past day, week, month or year."""

    async def search(
        self, query: str, *, max_results: int = 5, time_range: TimeRange | None = None
    ) -> list[SearchResult]: ...


def web_search(impl: WebSearch, *, name: str = "web_search") -> Tool:
    """The search tool over ``impl``: args ``query``, ``max_results`` (1-20, clamped,
    default 5) and ``time_range`` (``d``/``w``/``m``/``y``)."""

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        query = text_arg(args, "query").strip()
        if not query:
            raise ToolError("the query is empty", hint="pass the words to search for")
        max_results = int_arg(args, "max_results", 5, 1, 20)
        time_range = optional_text_arg(args, "time_range")
        if time_range is not None and time_range not in _TIME_RANGES:
            raise ToolError(f"time_range must be one of d, w, m, y, got {time_range!r}")
        chosen = cast("TimeRange | None", time_range)
        results = await impl.search(query, max_results=max_results, time_range=chosen)
        return _render_results(query, results[:max_results])

    return Tool(
        name=name,
        description=(
            "Search the web. Returns titles, URLs and snippets; read a result with a page tool."
        ),
        parameters=object_schema(
            {
                "query": {"type": "string", "description": "What to search for."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                "time_range": {
                    "type": "string",
                    "enum": list(_TIME_RANGES),
                    "description": "Only results from the past day, week, month or year.",
                },
            },
            ["query"],
        ),
        invoke=invoke,
    )


def _render_results(query: str, results: list[SearchResult]) -> str:
    """Results as numbered title/URL/snippet blocks."""
    if not results:
        return f"No results for {query!r}."
    blocks = []
    for i, r in enumerate(results, 1):
        lines = [f"{i}. {r.title or r.url}", f"   {r.url}"]
        if r.snippet:
            lines.append(f"   {' '.join(r.snippet.split())}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# --- DuckDuckGo (ddgs) ------------------------------------------------------------------


class DuckDuckGoSearch:
    """Search through the ``ddgs`` package (``pip install "lovia-core[ddg]"``).

    ``client`` replaces the ``ddgs.DDGS`` instance (for tests); without one, each search
    makes its own with ``timeout`` (whole seconds). ``region`` and ``safesearch`` are
    passed to ``DDGS.text``.
    """

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        region: str = "us-en",
        safesearch: Literal["on", "moderate", "off"] = "moderate",
        client: Any = None,
    ) -> None:
        try:
            # Imported by name: ddgs is an optional extra, with no stubs when absent.
            self._ddgs = importlib.import_module("ddgs")
            self._errors = importlib.import_module("ddgs.exceptions")
        except ImportError as exc:
            raise UserError(
                "DuckDuckGo search needs the ddgs package",
                hint='install it with: pip install "lovia-core[ddg]"',
            ) from exc
        self.timeout = timeout
        self.region = region
        self.safesearch = safesearch
        self._client = client

    async def search(
        self, query: str, *, max_results: int = 5, time_range: TimeRange | None = None
    ) -> list[SearchResult]:
        """Run one text search in a worker thread (``ddgs`` is synchronous)."""
        return await asyncio.to_thread(self._search, query, max_results, time_range)

    def _search(
        self, query: str, max_results: int, time_range: TimeRange | None
    ) -> list[SearchResult]:
        errors = self._errors
        client = self._client or self._ddgs.DDGS(timeout=max(1, round(self.timeout)))
        try:
            rows = client.text(
                query,
                max_results=max_results,
                timelimit=time_range,
                region=self.region,
                safesearch=self.safesearch,
            )
        except errors.RatelimitException as exc:
            raise ToolError(f"DuckDuckGo rate-limited the search: {exc}", hint="wait") from None
        except errors.TimeoutException as exc:
            raise ToolError(f"DuckDuckGo search timed out: {exc}") from None
        except errors.DDGSException as exc:
            if "no results" in str(exc).lower():
                return []
            raise ToolError(f"DuckDuckGo search failed: {exc}") from None
        return _results(rows, title="title", url="href", snippet="body")


def duckduckgo_search(*, name: str = "web_search", **options: Any) -> Tool:
    """``web_search(DuckDuckGoSearch(**options))``; ``UserError`` without ``ddgs``."""
    return web_search(DuckDuckGoSearch(**options), name=name)


def _results(rows: Any, *, title: str, url: str, snippet: str) -> list[SearchResult]:
    """Hits from a list of dicts, skipping malformed entries (a backend's bad day)."""
    found = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or not isinstance(row.get(url), str) or not row[url]:
            continue
        found.append(
            SearchResult(
                title=str(row.get(title) or "").strip(),
                url=row[url],
                snippet=str(row.get(snippet) or "").strip(),
            )
        )
    return found


# --- Tavily -----------------------------------------------------------------------------

_TAVILY_RANGES = {"d": "day", "w": "week", "m": "month", "y": "year"}


class TavilySearch:
    """Search through Tavily's API (``POST {base_url}/search``).

    The key comes from ``api_key`` or ``TAVILY_API_KEY``. ``base_url`` points elsewhere (a
    gateway, a test server); ``timeout`` is seconds per search. Connections go through
    ``lovia.http_config`` (TLS and proxy settings).
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = "https://api.tavily.com",
        timeout: float = 30.0,
        search_depth: Literal["basic", "advanced"] = "basic",
    ) -> None:
        key = api_key or os.environ.get("TAVILY_API_KEY", "").strip()
        if not key:
            raise UserError(
                "Tavily search needs an API key",
                hint="set TAVILY_API_KEY or pass tavily_search(api_key=...)",
            )
        self._api_key = key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.search_depth = search_depth

    async def search(
        self, query: str, *, max_results: int = 5, time_range: TimeRange | None = None
    ) -> list[SearchResult]:
        """One search; HTTP errors and unreachable hosts are ``ToolError``s."""
        import httpx

        from ..http_config import make_async_client, prepare_http

        body: dict[str, Any] = {
            "query": query,
            "max_results": max_results,
            "search_depth": self.search_depth,
        }
        if time_range is not None:
            body["time_range"] = _TAVILY_RANGES[time_range]
        headers = {"Authorization": f"Bearer {self._api_key}"}
        url = f"{self.base_url}/search"
        await asyncio.to_thread(prepare_http)
        async with make_async_client(timeout=self.timeout) as client:
            for attempt in (1, 2):
                try:
                    response = await client.post(url, json=body, headers=headers)
                    break
                except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                    if attempt == 2:  # dropped twice: report it
                        raise ToolError(f"{_host(url)} dropped the connection: {exc}") from None
                except httpx.TimeoutException:
                    raise ToolError(f"Tavily did not answer within {self.timeout:g} s") from None
                except httpx.HTTPError as exc:
                    raise ToolError(f"cannot reach {_host(url)}: {exc}") from None
        if response.status_code >= 400:
            raise _tavily_error(response)
        try:
            data = response.json()
        except ValueError:
            raise ToolError(
                f"Tavily sent a reply that is not JSON: {response.text[:200]!r}"
            ) from None
        rows = data.get("results") if isinstance(data, dict) else None
        return _results(rows, title="title", url="url", snippet="content")


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url


def _tavily_error(response: Any) -> ToolError:
    detail: Any = response.text[:300]
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict):
        detail = data.get("detail", data.get("error", detail))
        if isinstance(detail, dict):
            detail = detail.get("error", detail)
    hints = {
        401: "check TAVILY_API_KEY",
        429: "Tavily's rate limit: wait before searching again",
        432: "the Tavily plan's limit is used up",
    }
    return ToolError(
        f"Tavily answered HTTP {response.status_code}: {detail}",
        hint=hints.get(response.status_code),
    )


def tavily_search(
    api_key: str | None = None,
    *,
    name: str = "web_search",
    base_url: str = "https://api.tavily.com",
    timeout: float = 30.0,
) -> Tool:
    """``web_search(TavilySearch(...))``; ``UserError`` without a key."""
    return web_search(TavilySearch(api_key, base_url=base_url, timeout=timeout), name=name)
