"""The UI's server side without a browser: the page, static files, the CSP, and
``POST /api/render`` (markdown-it-py + Pygments + nh3)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia.testing import text
from lovia.web.render import render_markdown
from lovia.web.ui import CSP

from tests.web.conftest import scripted_agent
from tests.web.ui.conftest import ui_app

STATIC = Path(__file__).resolve().parents[3] / "packages/lovia-web/src/lovia/web/static"


@pytest.fixture
async def client(tmp_path: Path, asgi_client: Any) -> httpx.AsyncClient:
    result: httpx.AsyncClient = await asgi_client(
        ui_app(scripted_agent(text("hi")), tmp_path / "c.db")
    )
    return result


async def test_the_page_carries_a_strict_csp_and_the_served_api_paths(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP and "unsafe" not in CSP and "frame-ancestors 'none'" in CSP
    assert r.headers["x-content-type-options"] == "nosniff"
    boot = re.search(r'<script type="application/json" id="boot">(.*?)</script>', r.text, re.S)
    assert boot is not None
    data = json.loads(boot.group(1))
    assert "/api/chat/stream" in data["paths"] and "/api/sessions/{}" in data["paths"]
    assert "/api/render" in data["paths"]
    # No inline script, no inline style, no other origin.
    assert "<script>" not in r.text and "style=" not in r.text
    assert not re.search(r'(src|href)="(https?:)?//', r.text)


async def test_the_boot_data_is_escaped_for_a_hostile_title(
    tmp_path: Path, asgi_client: Any
) -> None:
    app = ui_app(
        scripted_agent(text("hi")), tmp_path / "c.db", title="</script><script>alert(1)</script>"
    )
    client = await asgi_client(app)
    page = (await client.get("/")).text
    assert "<script>alert(1)" not in page
    assert page.count("</script>") == 2  # the boot data's and the module's own


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/static/js/app.js", "text/javascript; charset=utf-8"),
        ("/static/js/state.js", "text/javascript; charset=utf-8"),
        ("/static/css/app.css", "text/css; charset=utf-8"),
        ("/static/icon.svg", "image/svg+xml"),
        ("/static/highlight.css", "text/css"),
    ],
)
async def test_static_files_have_explicit_content_types(
    client: httpx.AsyncClient, path: str, kind: str
) -> None:
    r = await client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith(kind)
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"] == CSP


async def test_static_refuses_traversal_and_unknown_files(client: httpx.AsyncClient) -> None:
    for path in (
        "/static/../ui.py",
        "/static/%2e%2e/ui.py",
        "/static/js/nope.js",
        "/static/..%2fui.py",
    ):
        r = await client.get(path)
        assert r.status_code == 404, path
        assert "def mount_ui" not in r.text


async def test_static_revalidates_by_etag(client: httpx.AsyncClient) -> None:
    first = await client.get("/static/js/api.js")
    again = await client.get("/static/js/api.js", headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304
    assert first.headers["cache-control"] == "no-cache"


def test_no_module_loads_from_another_origin() -> None:
    for file in STATIC.rglob("*"):
        if file.suffix in {".js", ".css", ".svg"}:
            body = file.read_text(encoding="utf-8")
            assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", body), file
            assert "eval(" not in body and "new Function" not in body, file


async def test_render_returns_sanitised_html_in_order(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/render", json={"texts": ["**a**", "<script>x()</script>", "`c`"]})
    assert r.status_code == 200
    html = r.json()["html"]
    assert html[0] == "<p><strong>a</strong></p>\n"
    assert "<script" not in html[1] and "&lt;script&gt;" in html[1]
    assert html[2] == "<p><code>c</code></p>\n"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body.texts"),
        ({"texts": []}, "body.texts"),
        ({"texts": ["x"], "extra": 1}, "body.extra"),
        ({"texts": [1]}, "body.texts.0"),
        ({"texts": ["x"] * 201}, "body.texts"),
        ({"texts": ["x" * 400_001]}, "body.texts"),
        ({"texts": ["x" * 400_000] * 3}, "body.texts"),
    ],
)
async def test_render_validates_its_body(client: httpx.AsyncClient, body: Any, field: str) -> None:
    r = await client.post("/api/render", json=body)
    assert r.status_code == 422
    assert r.json()["detail"].startswith(field), r.json()


HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](  javascript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "![x](https://tracker.example/pixel.png)",
    '<svg onload="alert(1)"><script>alert(1)</script></svg>',
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=javascript:alert(1)>",
    "<style>*{display:none}</style>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "[x](<javascript:alert(1)>)",
    "<details open ontoggle=alert(1)>",
    "```\n</code></pre><script>alert(1)</script>\n```",
    "```js\n</span><img src=x onerror=alert(1)>\n```",
]


@pytest.mark.parametrize("source", HOSTILE)
def test_hostile_markdown_is_inert(source: str) -> None:
    for base in (None, "/api/workspace/raw?path="):
        html = render_markdown(source, image_base=base)
        tags = " ".join(re.findall(r"<[a-z][^>]*>", html.lower()))  # real tags, not escaped text
        assert not re.search(r"<(script|svg|iframe|style|math|details|object|embed)\b", tags), html
        assert "style=" not in tags and not re.search(r"\son\w+\s*=", tags), html
        assert not re.search(r'(href|src)="\s*(javascript|vbscript|data):', tags), html
        assert not re.search(r'src="https?:', tags), html  # no image from another origin


def test_code_is_highlighted_with_classes_and_mermaid_stays_code() -> None:
    html = render_markdown(
        "```python\ndef f():\n    return 1\n```\n\n```mermaid\ngraph TD; A-->B\n```"
    )
    assert '<span class="hl-k">def</span>' in html
    assert '<code class="language-mermaid">graph TD; A--&gt;B' in html


def test_tables_links_and_workspace_images() -> None:
    html = render_markdown(
        "| a | b |\n|---|:-:|\n| 1 | 2 |\n\n[docs](https://example.com) ![plot](out/plot 1.png)",
        image_base="/api/workspace/raw?path=",
    )
    assert "<table>" in html and "<td>1</td>" in html
    assert '<a href="https://example.com" rel="noopener noreferrer nofollow">docs</a>' in html
    html = render_markdown("![plot](<out/plot 1.png>)", image_base="/api/workspace/raw?path=")
    assert '<img src="/api/workspace/raw?path=out%2Fplot%201.png" alt="plot">' in html
    # Without a workspace (or for another origin) an image is only a link.
    assert "<img" not in render_markdown("![plot](out/plot.png)")
    assert "<img" not in render_markdown("![p](https://example.com/p.png)", image_base="/x?p=")


async def test_mount_ui_twice_is_one_mount(tmp_path: Path, asgi_client: Any) -> None:
    from lovia.web.ui import mount_ui

    app = ui_app(scripted_agent(text("hi")), tmp_path / "c.db")
    before = len(app.routes)
    mount_ui(app, app.state.lovia)
    assert len(app.routes) == before
    client = await asgi_client(app)
    assert (await client.get("/static/js/app.js")).status_code == 200


async def test_dozens_of_renders_at_once_all_answer(client: httpx.AsyncClient) -> None:
    import asyncio

    texts = [f"# {i}\n\n```python\nx = {i}\n```" for i in range(40)]
    answers = await asyncio.gather(
        *(client.post("/api/render", json={"texts": [t]}) for t in texts)
    )
    assert [a.status_code for a in answers] == [200] * 40
    assert all(f"<h1>{i}</h1>" in a.json()["html"][0] for i, a in enumerate(answers))


def test_unicode_and_nul_render_safely() -> None:
    html = render_markdown("naïve 中文 \x00 \ud800 **ok**")
    assert "<strong>ok</strong>" in html and "中文" in html and "\x00" not in html


async def test_a_lone_surrogate_over_http_is_not_a_500(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/api/render",
        content=b'{"texts": ["a \\ud800 b"]}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200 and r.json()["html"] == ["<p>a ? b</p>\n"]
