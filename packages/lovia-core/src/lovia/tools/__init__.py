"""Tools: ``@tool``/``Tool`` and how a call runs (``lovia.tools.base``), and the built-in
tools and factories: ``http_request``, ``read_page``/``page_reader``, ``web_search`` and its
backends, ``ask_human``, ``now``/``sleep``/``current_date`` (see docs/builtin-tools.md).

Every name here resolves lazily on first access, so ``import lovia.tools`` loads no tool
module, and importing one tool module never loads the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "DuckDuckGoSearch": "lovia.tools.search",
    "HttpReader": "lovia.tools.page",
    "HumanChannel": "lovia.tools.human",
    "HumanQuestion": "lovia.tools.human",
    "Page": "lovia.tools.page",
    "PageImage": "lovia.tools.page",
    "PageReader": "lovia.tools.page",
    "QuestionOption": "lovia.tools.human",
    "SearchResult": "lovia.tools.search",
    "TavilySearch": "lovia.tools.search",
    "WebSearch": "lovia.tools.search",
    "ask_human": "lovia.tools.human",
    "current_date": "lovia.tools.time",
    "duckduckgo_search": "lovia.tools.search",
    "html_to_markdown": "lovia.tools.page",
    "http_request": "lovia.tools.http",
    "now": "lovia.tools.time",
    "page_reader": "lovia.tools.page",
    "read_page": "lovia.tools.page",
    "sleep": "lovia.tools.time",
    "tavily_search": "lovia.tools.search",
    "web_search": "lovia.tools.search",
    "writes_need_approval": "lovia.tools.http",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # for type checkers only; never executed
    from lovia.tools.http import http_request as http_request
    from lovia.tools.http import writes_need_approval as writes_need_approval
    from lovia.tools.human import HumanChannel as HumanChannel
    from lovia.tools.human import HumanQuestion as HumanQuestion
    from lovia.tools.human import QuestionOption as QuestionOption
    from lovia.tools.human import ask_human as ask_human
    from lovia.tools.page import HttpReader as HttpReader
    from lovia.tools.page import Page as Page
    from lovia.tools.page import PageImage as PageImage
    from lovia.tools.page import PageReader as PageReader
    from lovia.tools.page import html_to_markdown as html_to_markdown
    from lovia.tools.page import page_reader as page_reader
    from lovia.tools.page import read_page as read_page
    from lovia.tools.search import DuckDuckGoSearch as DuckDuckGoSearch
    from lovia.tools.search import SearchResult as SearchResult
    from lovia.tools.search import TavilySearch as TavilySearch
    from lovia.tools.search import WebSearch as WebSearch
    from lovia.tools.search import duckduckgo_search as duckduckgo_search
    from lovia.tools.search import tavily_search as tavily_search
    from lovia.tools.search import web_search as web_search
    from lovia.tools.time import current_date as current_date
    from lovia.tools.time import now as now
    from lovia.tools.time import sleep as sleep


def __getattr__(name: str) -> Any:
    import importlib

    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lovia.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: __getattr__ is not called again for this name
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
