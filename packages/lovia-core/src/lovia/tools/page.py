"""``read_page``: fetch a web page and read it as structured markdown, a window at a time.

``page_reader(impl)`` builds the tool over any ``PageReader`` (a browser, a reading API);
the default is ``HttpReader``, which fetches with the built-in HTTP transport (1 MiB cap,
address guard, one retry on a dropped connection), converts HTML with ``html_to_markdown``
(the standard library's ``html.parser``), passes other text through, and keeps a small
per-URL cache. The tool shows ``max_chars`` characters from ``offset`` and says which
``offset`` continues.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..exceptions import ToolError, UserError
from ._args import bool_arg, int_arg, object_schema, text_arg
from ._fetch import DEFAULT_MAX_BYTES, decode_text, fetch, is_html, is_textual
from .base import Tool

if TYPE_CHECKING:
    from ..run_context import RunContext
    from ._guard import Resolver

__all__ = [
    "HttpReader",
    "Page",
    "PageImage",
    "PageReader",
    "html_to_markdown",
    "page_reader",
    "read_page",
]

_ERROR_BODY_CHARS = 500


@dataclass(frozen=True, slots=True)
class PageImage:
    """An image a page shows: its absolute URL and alt text."""

    url: str
    alt: str = ""


@dataclass(frozen=True, slots=True)
class Page:
    """A page as a reader returns it."""

    url: str
    """The final URL, after redirects."""
    status: int
    title: str = ""
    text: str = ""
    """Markdown for HTML, the text itself for other text types."""
    content_type: str = ""
    images: tuple[PageImage, ...] = ()
    """Filled only when asked for (``images=True``)."""
    size_capped: bool = False
    """The download stopped at the reader's byte cap."""


@runtime_checkable
class PageReader(Protocol):
    """Reads one URL into a ``Page``; raise ``ToolError`` for what the model should see."""

    async def read(self, url: str, *, images: bool = False) -> Page: ...


def html_to_markdown(html: str, base_url: str = "") -> str:
    """Convert an HTML document to markdown; relative links resolve against ``<base href>``,
    else ``base_url``."""
    from ._html import convert

    return convert(html, base_url).markdown


class HttpReader:
    """The default ``PageReader``: a plain HTTP GET, no JavaScript.

    ``timeout`` bounds the whole fetch in seconds and ``max_bytes`` the download. Pages are
    cached per URL for ``cache_ttl`` seconds (``0`` turns the cache off), at most
    ``cache_size`` of them. Non-public addresses are refused unless ``allow_private=True``
    (or ``LOVIA_HTTP_ALLOW_PRIVATE=1``). ``resolver`` replaces DNS resolution and ``clock``
    the cache's clock (both for tests).
    """

    def __init__(
        self,
        timeout: float = 30.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        cache_ttl: float = 300.0,
        cache_size: int = 32,
        *,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout <= 0 or max_bytes <= 0 or cache_ttl < 0 or cache_size < 0:
            raise UserError(
                "HttpReader needs timeout > 0, max_bytes > 0, cache_ttl >= 0, cache_size >= 0",
                hint="cache_ttl=0 turns the cache off",
            )
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.cache_ttl = cache_ttl
        self.cache_size = cache_size
        self.allow_private = allow_private
        self._resolver = resolver
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, Page]] = OrderedDict()

    async def read(self, url: str, *, images: bool = False) -> Page:
        """Fetch ``url`` (or take it from the cache) and convert it."""
        page = self._cached(url)
        if page is None:
            page = await self._fetch(url)
            self._remember(url, page)
        return page if images else replace(page, images=())

    async def _fetch(self, url: str) -> Page:
        got = await fetch(
            url,
            timeout=self.timeout,
            max_bytes=self.max_bytes,
            allow_private=self.allow_private,
            resolver=self._resolver,
            retry_dropped=True,
        )
        html = is_html(got.media_type, got.body)
        if got.status >= 400:
            detail = decode_text(got.body, got.charset, html=html)[:_ERROR_BODY_CHARS].strip()
            raise ToolError(
                f"{got.url} answered HTTP {got.status} {got.reason}: {detail}".rstrip(": ")
            )
        if not is_textual(got.media_type, got.body) and not html:
            raise ToolError(
                f"{got.url} is {got.media_type or 'binary content'} ({len(got.body)} bytes), "
                "not a page with text",
                hint="use http_request to see its headers",
            )
        text = decode_text(got.body, got.charset, html=html)
        page = Page(got.url, got.status, content_type=got.media_type, size_capped=got.size_capped)
        if not html:
            return replace(page, text=text)
        from ._html import convert

        converted = convert(text, got.url)
        images = tuple(PageImage(u, alt) for u, alt in converted.images)
        return replace(page, title=converted.title, text=converted.markdown, images=images)

    def _cached(self, url: str) -> Page | None:
        hit = self._cache.get(url)
        if hit is None:
            return None
        expires, page = hit
        if self._clock() >= expires:
            del self._cache[url]
            return None
        self._cache.move_to_end(url)
        return page

    def _remember(self, url: str, page: Page) -> None:
        if self.cache_ttl <= 0 or self.cache_size == 0:
            return
        self._cache[url] = (self._clock() + self.cache_ttl, page)
        self._cache.move_to_end(url)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


def page_reader(
    impl: PageReader | None = None,
    *,
    name: str = "read_page",
    max_chars: int = 20_000,
    allow_private: bool = False,
) -> Tool:
    """The page-reading tool over ``impl`` (default: a new ``HttpReader``).

    Each call shows at most ``max_chars`` characters from the argument ``offset``.
    ``allow_private=True`` lets the default reader reach private addresses; a custom
    ``impl`` is used as given (never changed), so configure it yourself.
    """
    if max_chars < 100:
        raise UserError(f"max_chars must be at least 100, got {max_chars}")
    if impl is None:
        impl = HttpReader(allow_private=allow_private)
    elif allow_private:
        raise UserError(
            "allow_private applies to the default reader only",
            hint="pass HttpReader(allow_private=True) as impl, or configure your reader",
        )
    reader = impl

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        url = text_arg(args, "url").strip()
        want_images = bool_arg(args, "images")
        offset = int_arg(args, "offset", 0, 0, 2**62)
        page = await reader.read(url, images=want_images)
        return _render(page, offset, max_chars, name)

    return Tool(
        name=name,
        description=(
            "Read a web page as markdown (headings, lists, tables, code and links kept). "
            f"Shows up to {max_chars} characters; a notice gives the offset that continues."
        ),
        parameters=object_schema(
            {
                "url": {"type": "string", "description": "Absolute http(s) URL of the page."},
                "images": {
                    "type": "boolean",
                    "default": False,
                    "description": "Also list the page's images.",
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "Character offset to start from (from a truncation notice).",
                },
            },
            ["url"],
        ),
        invoke=invoke,
    )


def _render(page: Page, offset: int, max_chars: int, tool_name: str) -> str:
    head = [f"Title: {page.title}"] if page.title else []
    head += [f"URL: {page.url}", f"Status: {page.status}"]
    total = len(page.text)
    window = page.text[offset : offset + max_chars]
    end = offset + len(window)
    parts = ["\n".join(head)]
    if window:
        parts.append(window)
    elif total == 0:
        parts.append("(the page has no text)")
    else:
        parts.append(f"[offset {offset} is past the end: the page has {total} characters]")
    if window and end < total:
        parts.append(
            f"[truncated: showing characters {offset}-{end} of {total}; "
            f"call {tool_name} with offset={end} to read on]"
        )
    if page.size_capped:
        parts.append("[the download stopped at the size cap; the page is longer than this]")
    if page.images:
        listed = (f"- {i.url}" + (f" ({i.alt})" if i.alt else "") for i in page.images)
        parts.append("Images:\n" + "\n".join(listed))
    return "\n\n".join(parts)


read_page = page_reader()
"""The ready-made page tool over a default ``HttpReader`` (guard on, 5-minute cache)."""
