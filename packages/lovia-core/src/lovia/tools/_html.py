"""HTML to structured markdown, on the standard library's ``html.parser``.

Two passes. ``_TreeBuilder`` turns the tag soup into a small tree, closing the elements HTML
lets authors leave open (``<p>``, ``<li>``, ``<td>``, ...) and capping the nesting depth so
hostile markup cannot exhaust the recursion limit. ``_Renderer`` then walks the tree:
headings, paragraphs, nested lists, pipe tables, block quotes, fenced code kept verbatim,
and links resolved against ``<base href>`` (else the page URL). Scripts, styles, templates,
embedded documents and hidden elements are dropped. Text is escaped so that page text never
turns into markdown syntax, and link targets are percent-encoded where markdown would
misread them (spaces, parentheses).

Why ``html.parser``: lovia-core depends on httpx and pydantic only, and the standard
library's parser is maintained with CPython, tolerant of broken markup, and fast enough
(see ``benchmarks/bench_page.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit


def _tags(names: str) -> frozenset[str]:
    return frozenset(names.split())


_VOID = _tags("area base br col embed hr img input link meta param source track wbr")
_DROPPED = _tags(
    "script style noscript template svg math iframe object embed canvas select textarea "
    "audio video map"
)
_BLOCK = _tags(
    "address article aside blockquote body center details dd div dl dt fieldset figcaption "
    "figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html li main nav ol p pre section "
    "summary table tbody td tfoot th thead tr ul legend caption"
)
_CLOSES_P = _BLOCK - {"li", "dd", "dt", "td", "th", "tr", "tbody", "thead", "tfoot", "caption"}
# A start tag closes the open element it implies the end of, searching no further than
# the listed boundaries (so a nested list's <li> does not close the outer item).
_IMPLIED: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "li": (frozenset({"li"}), frozenset({"ul", "ol", "menu"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "tr": (frozenset({"tr"}), frozenset({"table", "thead", "tbody", "tfoot"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "thead": (frozenset({"thead", "tbody", "tfoot", "tr"}), frozenset({"table"})),
    "tbody": (frozenset({"thead", "tbody", "tfoot", "tr"}), frozenset({"table"})),
    "tfoot": (frozenset({"thead", "tbody", "tfoot", "tr"}), frozenset({"table"})),
}
_MAX_DEPTH = 120
"""Elements nested deeper than this are flattened into their ancestor at this depth."""

_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
_SPACES = re.compile(r"[ \t\r\n\f\v\u00a0]+")
_ESCAPE = re.compile(r"([\\`*\[\]<])|(?<!\w)_|_(?!\w)")
# Text at a line start that markdown would read as syntax: a heading, a quote, a bullet,
# a setext underline (escaped by its first character), or an ordered marker (by its dot).
_LINE_START = re.compile(r"^(#{1,6}(?=\s|$)|>|[-+](?=\s)|[-=](?=[-=]*\s*$))")
_LINE_START_NUMBER = re.compile(r"^(\d+)([.)])(?=\s)")
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang)-([\w+#.-]+)")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_USABLE_SCHEMES = ("http", "https", "mailto")


@dataclass(slots=True)
class _Node:
    tag: str
    attrs: dict[str, str]
    children: list[_Node | str] = field(default_factory=list)
    hidden: bool = False
    """Dropped with its content (scripts, styles, hidden elements)."""


@dataclass(frozen=True, slots=True)
class Converted:
    """What one document yields: its title, its markdown, and its images ``(url, alt)``."""

    title: str
    markdown: str
    images: list[tuple[str, str]]


def convert(html: str, base_url: str = "") -> Converted:
    """Convert ``html`` (fetched from ``base_url``) to markdown."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    base = urljoin(base_url, builder.base_href) if builder.base_href else base_url
    renderer = _Renderer(base)
    markdown = _join_blocks(renderer.blocks(builder.root))
    images = _images(builder.root, builder.meta_images, base)
    return Converted(
        title=_SPACES.sub(" ", builder.title).strip(), markdown=markdown, images=images
    )


# --- parsing ----------------------------------------------------------------------------


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("root", {})
        self._stack = [self.root]
        self._overflow: dict[str, int] = {}
        self.base_href = ""
        self.title = ""
        self._in_title = False
        self._seen_title = False
        self.meta_images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self._head_tag(tag, values)
        self._close_implied(tag)
        node = _Node(tag, values, hidden=_is_hidden(tag, values))
        if len(self._stack) > _MAX_DEPTH and tag not in _VOID:
            self._overflow[tag] = self._overflow.get(tag, 0) + 1
            return
        self._stack[-1].children.append(node)
        if tag not in _VOID:
            self._stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if self._overflow.get(tag):
            self._overflow[tag] -= 1
            return
        for i in range(len(self._stack) - 1, 0, -1):
            if self._stack[i].tag == tag:
                del self._stack[i:]
                return
        if tag in ("br", "p"):  # browsers read a stray </br> as <br>, </p> as <p></p>
            self._stack[-1].children.append(_Node(tag, {}))

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        self._stack[-1].children.append(data)

    def _head_tag(self, tag: str, attrs: dict[str, str]) -> None:
        if tag == "base" and not self.base_href:
            self.base_href = attrs.get("href", "").strip()
        elif tag == "title" and not self._seen_title:
            self._in_title = self._seen_title = True
        elif tag == "meta" and attrs.get("property", attrs.get("name", "")).lower() in (
            "og:image",
            "og:image:url",
            "twitter:image",
        ):
            self.meta_images.append(attrs.get("content", ""))

    def _close_implied(self, tag: str) -> None:
        targets: frozenset[str] | None = None
        bounds: frozenset[str] = frozenset()
        if tag in _IMPLIED:
            targets, bounds = _IMPLIED[tag]
        elif tag in _CLOSES_P:
            targets, bounds = frozenset({"p"}), _BLOCK - {"p"}
        if targets is None:
            return
        bounds |= _DROPPED  # never close across a dropped container (<noscript><p>)
        # Close the outermost open target below the nearest boundary (with its contents).
        cut = None
        for i in range(len(self._stack) - 1, 0, -1):
            current = self._stack[i].tag
            if current in bounds:
                break
            if current in targets:
                cut = i
        if cut is not None:
            del self._stack[cut:]


# --- rendering --------------------------------------------------------------------------


def _is_hidden(tag: str, attrs: dict[str, str]) -> bool:
    return (
        tag in _DROPPED
        or "hidden" in attrs
        or attrs.get("aria-hidden", "").lower() == "true"
        or (tag == "input" and attrs.get("type", "").lower() == "hidden")
        or ("style" in attrs and bool(_HIDDEN_STYLE.search(attrs["style"])))
    )


def _hidden(node: _Node) -> bool:
    return node.hidden


def _clean(text: str) -> str:
    return _UNSAFE_CHARS.sub("", text)


def _escape(text: str) -> str:
    return _ESCAPE.sub(lambda m: "\\" + m.group(0), text)


def _escape_line_starts(text: str) -> str:
    lines = (_LINE_START.sub(r"\\\1", line) for line in text.split("\n"))
    return "\n".join(_LINE_START_NUMBER.sub(r"\1\\\2", line) for line in lines)


def _join_blocks(blocks: list[str]) -> str:
    return "\n\n".join(b for b in blocks if b.strip())


def _plain_text(node: _Node) -> str:
    """Every character of text under ``node``, verbatim (``<br>`` is a newline)."""
    out: list[str] = []
    stack: list[_Node | str] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif item.tag == "br":
            out.append("\n")
        elif item is node or not _hidden(item):
            stack.extend(reversed(item.children))
    return _clean("".join(out))


def _fence(code: str, minimum: int = 3) -> str:
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    return "`" * max(minimum, longest + 1)


def _encode_url(url: str) -> str:
    for char, code in ((" ", "%20"), ("(", "%28"), (")", "%29"), ("<", "%3C"), (">", "%3E")):
        url = url.replace(char, code)
    return url


def resolve_url(href: str, base: str) -> str | None:
    """``href`` made absolute against ``base``; ``None`` for anything not worth a link."""
    href = re.sub(r"[\t\n\r]", "", _clean(href)).strip()
    if not href or href.startswith("#"):
        return None
    try:
        absolute = urljoin(base, href) if base else href
        parts = urlsplit(absolute)
    except ValueError:  # e.g. an invalid IPv6 literal
        return None
    if parts.scheme.lower() not in _USABLE_SCHEMES or (
        parts.scheme != "mailto" and not parts.netloc
    ):
        return None
    return absolute


class _Renderer:
    def __init__(self, base: str) -> None:
        self.base = base
        self._cell_depth = 0  # > 0 while rendering the inside of a table cell

    # Blocks: a node's content as a list of markdown blocks.

    def blocks(self, node: _Node) -> list[str]:
        out: list[str] = []
        run: list[str] = []  # inline pieces waiting to become a paragraph
        for child in node.children:
            if isinstance(child, str):
                run.append(_escape(_clean(child)))
            elif _hidden(child):
                continue
            elif child.tag in _BLOCK:
                self._flush(run, out)
                out.extend(self.block(child))
            else:
                run.append(self.inline(child))
        self._flush(run, out)
        return out

    def _flush(self, run: list[str], out: list[str]) -> None:
        if run:
            text = _paragraph("".join(run))
            if text:
                out.append(_escape_line_starts(text))
            run.clear()

    def block(self, node: _Node) -> list[str]:
        tag = node.tag
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            text = _paragraph(self.inline_children(node)).replace("\n", " ")
            return [f"{'#' * int(tag[1])} {text}"] if text else []
        if tag == "pre":
            return [self.code_block(node)]
        if tag in ("ul", "ol"):
            return [self.list_block(node)]
        if tag == "table":
            return self.table(node)
        if tag == "blockquote":
            inner = _join_blocks(self.blocks(node))
            return ["\n".join(f"> {line}".rstrip() for line in inner.split("\n"))] if inner else []
        if tag == "hr":
            return ["---"]
        if tag == "dl":
            return [self.definition_list(node)]
        return self.blocks(node)

    def code_block(self, node: _Node) -> str:
        code = _plain_text(node)
        if code.startswith("\n"):
            code = code[1:]  # HTML drops the newline right after <pre>
        code = code.rstrip("\n")
        classes = node.attrs.get("class", "")
        inner = next((c for c in node.children if isinstance(c, _Node) and c.tag == "code"), None)
        if inner is not None:
            classes += " " + inner.attrs.get("class", "")
        found = _LANGUAGE.search(classes)
        fence = _fence(code)
        return f"{fence}{found.group(1) if found else ''}\n{code}\n{fence}"

    def list_block(self, node: _Node) -> str:
        ordered = node.tag == "ol"
        try:
            number = int(node.attrs.get("start", "1"))
        except ValueError:
            number = 1
        items: list[str] = []
        for child in node.children:
            if isinstance(child, str) or _hidden(child):
                continue
            if child.tag != "li":  # stray content inside a list: keep it under the last item
                inner = "\n".join(
                    self.block(child) if child.tag in _BLOCK else [self.inline(child)]
                )
                if inner.strip() and items:
                    items[-1] += "\n" + _indent(inner, "  ")
                continue
            marker = f"{number}." if ordered else "-"
            number += 1
            body = "\n".join(self.blocks(child))
            if body.strip():
                items.append(f"{marker} " + _indent(body, " " * (len(marker) + 1)).lstrip())
        return "\n".join(items)

    def definition_list(self, node: _Node) -> str:
        lines = []
        for child in node.children:
            if isinstance(child, _Node) and child.tag in ("dt", "dd") and not _hidden(child):
                text = " ".join(self.blocks(child)).replace("\n", " ")
                if text:
                    lines.append(text if child.tag == "dt" else f": {text}")
        return "\n".join(lines)

    def table(self, node: _Node) -> list[str]:
        if self._cell_depth:  # a table inside a cell: its text, on one line
            texts = (
                " ".join(self.blocks(c))
                for row, _ in _table_rows(node)
                for c in row.children
                if isinstance(c, _Node) and c.tag in ("td", "th")
            )
            return [" ".join(t for t in texts if t)]
        rows: list[list[str]] = []
        header_rows = 0
        caption: list[str] = []
        for row, in_head in _table_rows(node):
            cells: list[str] = []
            for cell in row.children:
                if isinstance(cell, _Node) and cell.tag in ("td", "th") and not _hidden(cell):
                    self._cell_depth += 1
                    try:
                        text = " ".join(b.replace("\n", " ") for b in self.blocks(cell))
                    finally:
                        self._cell_depth -= 1
                    cells.append(text.replace("|", "\\|"))
                    cells.extend("" for _ in range(_span(cell) - 1))
            if cells:
                rows.append(cells)
                header_rows += in_head
        for child in node.children:
            if isinstance(child, _Node) and child.tag == "caption":
                caption = self.blocks(child)
        width = max((len(r) for r in rows), default=0)
        if width <= 1:  # a layout table: its cells are just blocks
            return caption + [b for r in rows for b in r if b]
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = [_table_row(rows[0]), "|" + " --- |" * width]
        lines += [_table_row(r) for r in rows[1:]]
        return [*caption, "\n".join(lines)]

    # Inline: a node's content as one run of markdown text.

    def inline_children(self, node: _Node) -> str:
        parts = []
        for child in node.children:
            if isinstance(child, str):
                parts.append(_escape(_clean(child)))
            elif not _hidden(child):
                parts.append(self.inline(child))
        return "".join(parts)

    def inline(self, node: _Node) -> str:
        tag = node.tag
        if tag == "br":
            return "\n"
        if tag == "img":
            return _escape(_clean(node.attrs.get("alt", "")))
        if tag in ("code", "kbd", "samp", "tt"):
            code = _SPACES.sub(" ", _plain_text(node))
            if not code.strip():
                return code
            fence = _fence(code, 1)
            pad = " " if code.startswith("`") or code.endswith("`") else ""
            return f"{fence}{pad}{code}{pad}{fence}"
        text = self.inline_children(node)
        if tag in _BLOCK:  # a block inside inline content (<a><div>..</div></a>): a space
            return f" {text} "
        if tag == "a":
            return self.link(node, text)
        marks = {"strong": "**", "b": "**", "em": "*", "i": "*", "del": "~~", "s": "~~"}
        mark = marks.get(tag)
        if mark is None or not text.strip():
            return text
        # Markers hug the text: "<b> x </b>" is " **x** ", not "** x **".
        stripped = text.strip()
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        return f"{lead}{mark}{stripped}{mark}{trail}"

    def link(self, node: _Node, text: str) -> str:
        url = resolve_url(node.attrs.get("href", ""), self.base)
        label = _SPACES.sub(" ", text).strip()
        if url is None or not label:
            return text
        return f"[{label}]({_encode_url(url)})"


def _paragraph(text: str) -> str:
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def _table_row(cells: list[str]) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def _span(cell: _Node) -> int:
    try:
        return max(1, min(int(cell.attrs.get("colspan", "1")), 50))
    except ValueError:
        return 1


def _table_rows(table: _Node) -> list[tuple[_Node, bool]]:
    """The table's own rows (not those of tables nested in its cells), with "in thead"."""
    found: list[tuple[_Node, bool]] = []
    for child in table.children:
        if not isinstance(child, _Node) or _hidden(child):
            continue
        if child.tag == "tr":
            found.append((child, False))
        elif child.tag in ("thead", "tbody", "tfoot"):
            found += [
                (r, child.tag == "thead")
                for r in child.children
                if isinstance(r, _Node) and r.tag == "tr"
            ]
    return found


# --- images -----------------------------------------------------------------------------


def _largest_in_srcset(srcset: str) -> str:
    best, best_size = "", -1.0
    for candidate in srcset.split(","):
        parts = candidate.split()
        if not parts:
            continue
        size = 1.0
        if len(parts) > 1 and parts[1][:-1].replace(".", "", 1).isdigit():
            size = float(parts[1][:-1])
        if size > best_size:
            best, best_size = parts[0], size
    return best


def _images(root: _Node, meta_images: list[str], base: str) -> list[tuple[str, str]]:
    found: dict[str, str] = {}

    def add(raw: str, alt: str) -> None:
        url = resolve_url(raw, base)
        if url is not None and urlsplit(url).scheme in ("http", "https") and url not in found:
            found[url] = _SPACES.sub(" ", _clean(alt)).strip()

    stack: list[_Node | str] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, str) or (node is not root and _hidden(node)):
            continue
        if node.tag in ("img", "source"):
            srcset = node.attrs.get("srcset", "")
            src = _largest_in_srcset(srcset) if srcset else ""
            add(
                src or node.attrs.get("src", "") or node.attrs.get("data-src", ""),
                node.attrs.get("alt", ""),
            )
        stack.extend(reversed(node.children))
    for raw in meta_images:
        add(raw, "")
    return list(found.items())
