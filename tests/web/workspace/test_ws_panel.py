"""The read-only panel: info, listings, recent files, text pages, raw bytes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider

from .conftest import PNG, ws_agent


def _no_internals(response: Any, root: Path) -> None:
    body = response.text
    assert str(root.parent) not in body and "Traceback" not in body


async def test_info_names_the_root_the_mode_and_uploads(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root, mode="readonly")))
    info = (await client.get("/api/workspace")).json()
    assert info["agent"] == "helper" and info["root"] == "project"
    assert info["mode"] == "readonly" and info["uploads"] is True
    assert info["max_upload_bytes"] == 25 * 1024 * 1024 and "pdf" in info["allowed_extensions"]
    _no_internals((await client.get("/api/workspace")), root)


async def test_a_listing_hides_dotfiles_junk_and_denied_entries(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    agent = ws_agent(root, denied_paths=("private",))
    client = await asgi_client(make_app(agent))
    listing = (await client.get("/api/workspace/files")).json()
    names = [e["name"] for e in listing["entries"]]
    assert names == [
        "src", "blob.bin", "doc.pdf", "icon.svg", "logo.png", "pic.avif", "README.md",
    ]  # fmt: skip
    assert listing["entries"][0]["is_dir"] and listing["entries"][0]["size"] is None
    assert listing["total"] == 7 and listing["truncated"] is False
    sub = (await client.get("/api/workspace/files", params={"path": "src"})).json()
    assert [e["path"] for e in sub["entries"]] == ["src/app.py"]
    assert (await client.get("/api/workspace/files", params={"path": "private"})).status_code == 403
    assert (
        await client.get("/api/workspace/files", params={"path": "src/app.py"})
    ).status_code == 422


async def test_recent_files_are_newest_first_without_junk(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    for i, name in enumerate(["README.md", "src/app.py", "logo.png"]):
        os.utime(root / name, (1_000_000 + i, 1_000_000 + i))
    os.utime(root / "__pycache__" / "app.cpython-311.pyc", (2_000_000_000, 2_000_000_000))
    (root / "src" / "new.txt").write_text("new")
    client = await asgi_client(make_app(ws_agent(root, denied_paths=("private",))))
    files = (await client.get("/api/workspace/recent", params={"limit": 3})).json()["files"]
    assert [f["path"] for f in files][0] == "src/new.txt"
    everything = (await client.get("/api/workspace/recent", params={"limit": 100})).json()
    paths = [f["path"] for f in everything["files"]]
    assert "logo.png" in paths and not any(".pyc" in p or p.startswith(".") for p in paths)
    assert "private/keys.txt" not in paths


async def test_text_is_paginated_and_binary_is_flagged(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    (root / "long.txt").write_text("".join(f"line {i}\n" for i in range(25)))
    client = await asgi_client(make_app(ws_agent(root)))
    page = (
        await client.get(
            "/api/workspace/file", params={"path": "long.txt", "offset": 10, "limit": 5}
        )
    ).json()
    assert page["content"] == "".join(f"line {i}\n" for i in range(10, 15))
    assert page["total_lines"] == 25 and page["next_offset"] == 15 and not page["binary"]
    last = (
        await client.get("/api/workspace/file", params={"path": "long.txt", "offset": 20})
    ).json()
    assert last["lines"] == 5 and last["next_offset"] is None
    binary = (await client.get("/api/workspace/file", params={"path": "blob.bin"})).json()
    assert binary["binary"] is True and binary["content"] is None and binary["size"] == 9


async def test_raw_serves_images_and_pdf_inline_and_svg_as_a_download(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    png = await client.get("/api/workspace/raw", params={"path": "logo.png"})
    assert png.status_code == 200 and png.content == PNG
    assert png.headers["content-type"] == "image/png"
    assert png.headers["content-disposition"].startswith("inline")
    assert png.headers["x-content-type-options"] == "nosniff"
    avif = await client.get("/api/workspace/raw", params={"path": "pic.avif"})
    assert avif.headers["content-type"] == "image/avif"
    pdf = await client.get("/api/workspace/raw", params={"path": "doc.pdf"})
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["content-disposition"].startswith("inline")
    svg = await client.get("/api/workspace/raw", params={"path": "icon.svg"})
    assert svg.headers["content-disposition"].startswith("attachment")
    assert svg.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in svg.headers["content-security-policy"]
    other = await client.get("/api/workspace/raw", params={"path": "src/app.py"})
    assert other.headers["content-type"] == "application/octet-stream"
    assert other.headers["content-disposition"].startswith("attachment")


async def test_raw_answers_304_to_a_matching_etag(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    first = await client.get("/api/workspace/raw", params={"path": "logo.png"})
    etag = first.headers["etag"]
    again = await client.get(
        "/api/workspace/raw", params={"path": "logo.png"}, headers={"If-None-Match": etag}
    )
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    (root / "logo.png").write_bytes(PNG + b"changed")
    changed = await client.get(
        "/api/workspace/raw", params={"path": "logo.png"}, headers={"If-None-Match": etag}
    )
    assert changed.status_code == 200 and changed.headers["etag"] != etag


async def test_raw_refuses_a_file_over_the_cap(
    make_app: Any, asgi_client: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lovia.web.files as files

    monkeypatch.setattr(files, "MAX_RAW_BYTES", 1024)
    (root / "big.png").write_bytes(b"x" * 2048)
    client = await asgi_client(make_app(ws_agent(root)))
    r = await client.get("/api/workspace/raw", params={"path": "big.png"})
    assert r.status_code == 413 and "limit" in r.json()["detail"]


async def test_the_panel_is_read_only_whatever_the_mode(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root, mode="trusted")))
    for method in ("PUT", "PATCH", "DELETE"):
        r = await client.request(method, "/api/workspace/file", params={"path": "README.md"})
        assert r.status_code == 405
    assert (root / "README.md").read_text() == "# Project\n"


async def test_an_agent_without_a_workspace_has_no_panel(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    agents = {"plain": Agent(name="plain", model=ScriptedProvider([])), "ws": ws_agent(root)}
    client = await asgi_client(make_app(agents))
    assert (await client.get("/api/workspace", params={"agent": "plain"})).status_code == 404
    assert (await client.get("/api/workspace", params={"agent": "ws"})).json()["agent"] == "ws"
    r = await client.get("/api/workspace")
    assert r.status_code == 404 and "several agents" in r.json()["detail"]
    assert (await client.get("/api/workspace", params={"agent": "x"})).status_code == 404
    listing = await client.get("/api/workspace/files", params={"agent": "plain"})
    assert listing.status_code == 404
