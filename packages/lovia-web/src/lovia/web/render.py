"""Model-written markdown to safe HTML, on the server: markdown-it-py, Pygments, then nh3.

The UI never parses markdown itself and never assigns HTML that did not come from here.
``render_markdown`` is the one way in:

1. markdown-it-py parses CommonMark plus tables and strikethrough, with raw HTML **off**
   (a ``<script>`` in the text is shown as text, not passed through).
2. Fenced code is highlighted by Pygments into ``<span class="...">`` (classes only, so the
   page's strict CSP needs no inline styles). ``mermaid`` fences stay plain code with the
   ``language-mermaid`` class, for a client that has the Mermaid assets to draw.
3. An image whose source is a workspace-relative path points at ``image_base`` (the
   workspace's raw-file endpoint) when one is given; any other image becomes a link, so a
   page never loads from another origin.
4. nh3 (the Ammonia sanitiser) cleans the result against a small allow-list: no scripts,
   no event handlers, no ``style``, no SVG, links only to ``http``, ``https``, ``mailto``
   and relative paths, every link ``rel="noopener noreferrer nofollow"``.

Rendering is pure and cached by its inputs (an LRU of 512 entries), so the streaming UI can
ask for the same growing text many times cheaply.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote

__all__ = ["highlight_css", "render_markdown"]

_TAGS = {
    "a",
    "blockquote",
    "br",
    "code",
    "del",
    "div",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "img",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "span",
    "strong",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "span": {"class"},
    "pre": {"class"},
    "div": {"class"},
    "ol": {"start"},
}
_SCHEMES = {"http", "https", "mailto"}
_CACHE_SIZE = 512


def _highlight(code: str, lang: str, _attrs: str) -> str:
    """Pygments spans for ``code`` (markdown-it wraps them in ``<pre><code>``); ``""``
    lets markdown-it escape the code itself (no language, an unknown one, or Mermaid)."""
    if not lang or lang.lower() == "mermaid":
        return ""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang, stripnl=False)
    except ClassNotFound:
        return ""
    return str(highlight(code, lexer, HtmlFormatter(nowrap=True, classprefix="hl-")))


def _is_relative_path(src: str) -> bool:
    return bool(src) and ":" not in src.split("/", 1)[0] and not src.startswith(("/", "#"))


@lru_cache(maxsize=8)
def _parser(image_base: str | None) -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"]
    )
    md.options["highlight"] = _highlight

    def image(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        if image_base is not None and _is_relative_path(src):
            token.attrSet("src", image_base + quote(unquote(src), safe=""))
            return str(renderer.image(tokens, idx, options, env))  # the default rule
        # Anything else would load from elsewhere (or is a data: URL): a link instead.
        alt = renderer.renderInlineAsText(token.children or [], options, env)
        label = alt or src
        from html import escape

        return f'<a href="{escape(src, quote=True)}">{escape(label)}</a>'

    md.add_render_rule("image", image)
    return md


@lru_cache(maxsize=_CACHE_SIZE)
def render_markdown(text: str, *, image_base: str | None = None) -> str:
    """``text`` (markdown a model wrote) as sanitised HTML.

    ``image_base`` is the prefix a workspace-relative image path is appended to (quoted),
    for example ``"/api/workspace/raw?path="``; without it, images become links.
    """
    import nh3

    # A lone surrogate (valid in a JSON string, not in UTF-8) would make nh3 raise.
    text = text.encode("utf-8", "replace").decode("utf-8")
    html = str(_parser(image_base).render(text))
    return str(
        nh3.clean(
            html,
            tags=_TAGS,
            attributes=_ATTRIBUTES,
            url_schemes=_SCHEMES,
            link_rel="noopener noreferrer nofollow",
            clean_content_tags={"script", "style"},
            strip_comments=True,
        )
    )


def highlight_css() -> str:
    """The Pygments classes (``hl-`` prefix) for the light theme and, under the page's dark
    theme (chosen or from the system), the dark one."""
    from pygments.formatters import HtmlFormatter

    light = HtmlFormatter(style="default", classprefix="hl-").get_style_defs(".md pre")
    dark_rules = HtmlFormatter(style="monokai", classprefix="hl-").get_style_defs(
        ":root[data-theme=dark] .md pre"
    )
    system_dark = HtmlFormatter(style="monokai", classprefix="hl-").get_style_defs(
        ":root:not([data-theme=light]) .md pre"
    )
    return f"{light}\n{dark_rules}\n@media (prefers-color-scheme: dark) {{\n{system_dark}\n}}\n"
