"""html_to_markdown on real-world-shaped documents, asserted line by line."""

from __future__ import annotations

import pytest
from lovia.tools import html_to_markdown
from lovia.tools._html import convert

from tests.core.tools.builtin_pages import BLOG, DOCS, HOSTILE, TABLES

PAGE_URL = "https://site.example/posts/2024/parser.html"


def lines(html: str) -> list[str]:
    return html_to_markdown(html, PAGE_URL).split("\n")


def test_a_documentation_page() -> None:
    assert lines(DOCS) == [
        # <base href> wins over the page URL for every relative link.
        "[Home](https://docs.example.org/) | [Library](https://docs.example.org/3/library/index.html)",
        "",
        "# Coroutines and Tasks¶",
        "",
        "This section outlines the *high-level* asyncio APIs. See",
        "[Awaitables](https://docs.example.org/3/library/asyncio-task.html#awaitables) and "
        "[the glossary](https://docs.example.org/3/glossary.html).",
        "",
        "## Timeouts",
        "",
        "Use `asyncio.wait_for(aw, timeout)` to wait for **at most** timeout seconds.",
        "",
        # Highlighted code comes out verbatim: spans gone, entities decoded, indentation kept.
        "```",
        "async def main():",
        "    try:",
        "        await asyncio.wait_for(eternity(), timeout=1.0)",
        "    except TimeoutError:",
        "        print('timeout!')  # a <comment> & more",
        "```",
        "",
        "Note",
        "",
        "If a timeout occurs, it cancels the task and raises "
        "[`TimeoutError`](https://docs.example.org/3/library/exceptions.html#TimeoutError).",
        "",
        "| Parameter | Type | Meaning |",
        "| --- | --- | --- |",
        "| `aw` | awaitable | What to wait for |",
        "| `timeout` | float \\| None | Seconds; `None` waits forever |",
        "",
        "© Copyright 2001 Python Software Foundation.",
    ]
    # Scripts, styles and <head> never leak into the text.
    assert "dataLayer" not in html_to_markdown(DOCS) and "#333" not in html_to_markdown(DOCS)


def test_a_blog_post_with_nested_lists_a_figure_and_definitions() -> None:
    assert lines(BLOG) == [
        "# Ten things I learned",
        "",
        "By [Ana](https://site.example/authors/ana) · 5 min read",
        "",
        "Parsers are *everywhere*. Here is what **went wrong**, in order:",
        "",
        "3. We trusted the input.",  # <ol start="3">, items left unclosed
        "4. We had no tests:",
        "   - no unit tests,",
        "   - no fuzzing, and",
        "     - no corpus at all.",
        "5. We shipped on a Friday.",
        "   Never again.",
        "",
        "Error rate by week",
        "",
        "Figure 1: errors per week",
        "",
        "---",
        "",
        "Fuzzing",
        ": Feeding random input to find crashes.",
        "Corpus",
        ": The inputs you keep.",
        "",
        # Parentheses in a link target are encoded, so the link does not end early.
        "Questions? Mail [ana@example.com](mailto:ana@example.com) or read "
        "[Parsing (computer science)](https://en.wikipedia.org/wiki/Parsing_%28computer_science%29).",
    ]


def test_a_hostile_page() -> None:
    assert lines(HOSTILE) == [
        # javascript: and data: links (even split by a newline) keep only their text, and a
        # javascript: <base href> cannot make relative links executable.
        "Visible click me and again and data.",
        "",
        # Page text that looks like markdown stays text.
        "\\# Not a heading",
        "",
        "\\* not a list, \\[not\\](a link), \\`not code\\`, 1. not ordered, "
        "\\<b>not bold\\</b>, snake_case_name and \\_emph\\_",
        "",
        # NUL becomes U+FFFD (as in browsers); bidi overrides are removed.
        "Null:\ufffdhere, bidi:txet desrever end.",
        "broken",
        "",
        # Unclosed inline tags close with their paragraph.
        "Unclosed **bold *and italic***",
        "",
        "Next paragraph after",
        "",
        # A one-column layout table is just its content.
        "only one cell per row",
        "",
        "layout table",
    ]
    text = html_to_markdown(HOSTILE)
    for leaked in (
        "injected",
        "IGNORE PREVIOUS",
        "Ignore previous instructions",  # display: none
        "hidden text",
        "aria hidden",
        "commented out",
        "svg text",
        "alert",
        "Enable JavaScript",  # <noscript>
        "template",
    ):
        assert leaked not in text, leaked


def test_tables_and_code_inside_lists() -> None:
    assert lines(TABLES) == [
        "### Release matrix",
        "",
        "Supported versions",
        "",
        # colspan keeps the columns aligned; short rows are padded; pipes are escaped.
        "| Version | Status | Support window | |",
        "| --- | --- | --- | --- |",
        "| [2.x](https://site.example/v/2) | **current** | 2024-01 | 2026-01 |",
        "| 1.x | security \\| fixes | until 2025-06 | |",
        "| 0.9 | nested table | | |",  # a table inside a cell is flattened
        "",
        "- First with `code`",
        "  ```bash",
        "  pip install lovia",
        "  lovia --help",
        "  ```",
        "- Second",
        "",
        "Inline \\`ticks\\` in code: ``a `b` c`` and `` `start ``",
    ]


def test_title_images_and_the_base_url() -> None:
    result = convert(BLOG, PAGE_URL)
    assert result.title == "Ten things I learned shipping a parser"
    assert result.images == [
        ("https://site.example/posts/2024/chart-1200.png", "Error rate by week"),  # srcset max
        ("https://site.example/img/cover.jpg", ""),  # og:image
    ]


def test_images_drop_data_and_script_urls_and_are_deduplicated() -> None:
    html = """
    <img src="data:image/png;base64,AAAA" alt="inline">
    <img src="javascript:alert(1)">
    <picture><source srcset="/a.webp 1x, /a@2x.webp 2x"><img src="/a.png" alt="A"></picture>
    <img src="/a.png" alt="again"><img data-src="/lazy.jpg" alt="lazy">
    """
    assert convert(html, "https://x.example/p/").images == [
        ("https://x.example/a@2x.webp", ""),
        ("https://x.example/a.png", "A"),
        ("https://x.example/lazy.jpg", "lazy"),
    ]


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<a href="/x y">sp</a>', "[sp](https://site.example/x%20y)"),
        ('<a href="#top">top</a>', "top"),  # in-page anchors are not links worth keeping
        ('<a href="ftp://files/x">ftp</a>', "ftp"),
        ('<a href="http://[::1">bad</a>', "bad"),  # an unparsable URL
        ('<a href="/x"></a>', ""),  # no text, no link
        ("<a href='/x'><img alt='Logo'></a>", "[Logo](https://site.example/x)"),
        ("<p>a<br>b</p>", "a\nb"),
        ("<p>x <strong> y </strong> z</p>", "x **y** z"),
        ("<h2>multi<br>line</h2>", "## multi line"),
        ("<blockquote><p>a</p><blockquote>b</blockquote></blockquote>", "> a\n>\n> > b"),
        ("<pre>\n\nkeep\n  this</pre>", "```\n\nkeep\n  this\n```"),
        ("<pre>has ``` fence</pre>", "````\nhas ``` fence\n````"),
        ("<ul><li></li><li>x</li></ul>", "- x"),
        ("<p>&amp; &lt; &gt; &quot; &nbsp;x</p>", '& \\< > " x'),
        ("<p>Title<br>---<br>===</p>", "Title\n\\---\n\\==="),  # not a setext heading
        ("<p>3) three</p>", "3\\) three"),
        (
            "<p>+ plus</p><p>- minus</p><p>> quote</p><p>12. twelve</p>",
            "\\+ plus\n\n\\- minus\n\n\\> quote\n\n12\\. twelve",
        ),
    ],
)
def test_small_cases(html: str, expected: str) -> None:
    assert html_to_markdown(html, PAGE_URL) == expected


def test_deeply_nested_markup_does_not_exhaust_the_stack() -> None:
    html = "<div>" * 50_000 + "<p>deep</p>" + "</div>" * 50_000 + "<p>after</p>"
    assert html_to_markdown(html) == "deep\n\nafter"


def test_deeply_nested_lists_and_quotes_stay_bounded() -> None:
    html = "<ul><li>x" * 3_000 + "</li></ul>" * 3_000
    text = html_to_markdown(html)
    assert text.startswith("- x\n  - x\n    - x")


def test_a_megabyte_table_converts_every_row() -> None:
    row = "<tr><td><a href='/r'>row</a></td><td><code>v</code></td></tr>"
    text = html_to_markdown("<table>" + row * 16_000 + "</table>", PAGE_URL)
    assert text.count("\n") == 16_000
    assert text.split("\n")[-1] == "| [row](https://site.example/r) | `v` |"
