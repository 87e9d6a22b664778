"""Hostile panel requests: traversal, NUL, symlinks out, secrets, huge directories."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .conftest import ws_agent

ENDPOINTS = ("/api/workspace/file", "/api/workspace/raw", "/api/workspace/files")


def _clean(response: Any, root: Path) -> None:
    body = response.text
    assert str(root.parent) not in body and "Traceback" not in body and "SECRET" not in body


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("../outside.txt", 422),
        ("src/../../outside.txt", 422),
        ("%2e%2e/outside.txt", 422),
        ("%2e%2e%2foutside.txt", 422),
        ("/etc/passwd", 422),
        ("~/outside.txt", 422),
        ("src%00.txt", 422),
        ("src\\..\\..\\outside.txt", 422),
        (".env", 404),
        (".git/config", 404),
        ("src/%2E%2E/.env", 422),
        ("nope.txt", 404),
    ],
)
async def test_bad_paths_are_refused_everywhere(
    make_app: Any, asgi_client: Any, root: Path, query: str, status: int
) -> None:
    (root.parent / "outside.txt").write_text("SECRET outside")
    client = await asgi_client(make_app(ws_agent(root, mode="trusted")))
    for endpoint in ENDPOINTS:
        r = await client.get(f"{endpoint}?path={query}")
        expected = status if not (endpoint.endswith("files") and status == 404) else 404
        assert r.status_code == expected, (endpoint, query, r.text)
        _clean(r, root)


async def test_symlinks_out_of_the_root_or_to_secrets_are_refused_and_unlisted(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    (root.parent / "outside.txt").write_text("SECRET outside")
    (root.parent / "outdir").mkdir()
    os.symlink(root.parent / "outside.txt", root / "escape.txt")
    os.symlink(root.parent / "outdir", root / "escape_dir")
    os.symlink(root / ".env", root / "env_link.txt")
    os.symlink(root / "private" / "keys.txt", root / "keys_link.txt")
    os.symlink(root / "README.md", root / "readme_link.md")
    os.symlink(root / "missing", root / "dangling")
    client = await asgi_client(make_app(ws_agent(root, denied_paths=("private",))))
    for name in ("escape.txt", "keys_link.txt"):
        for endpoint in ENDPOINTS[:2]:
            r = await client.get(endpoint, params={"path": name})
            assert r.status_code == 403, (endpoint, name)
            _clean(r, root)
    assert (
        await client.get("/api/workspace/file", params={"path": "env_link.txt"})
    ).status_code == 404
    assert (
        await client.get("/api/workspace/files", params={"path": "escape_dir"})
    ).status_code == 403
    ok = await client.get("/api/workspace/file", params={"path": "readme_link.md"})
    assert ok.json()["content"] == "# Project\n"
    names = {e["name"] for e in (await client.get("/api/workspace/files")).json()["entries"]}
    assert "readme_link.md" in names
    assert not names & {"escape.txt", "escape_dir", "env_link.txt", "keys_link.txt", "dangling"}


async def test_secret_rules_hold_under_an_innocent_name(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    (root / "id_rsa").write_text("SECRET key")
    (root / "prod.env").write_text("SECRET=2")
    client = await asgi_client(make_app(ws_agent(root, mode="trusted")))
    names = {e["name"] for e in (await client.get("/api/workspace/files")).json()["entries"]}
    assert "id_rsa" not in names
    r = await client.get("/api/workspace/raw", params={"path": "id_rsa"})
    assert r.status_code == 403
    _clean(r, root)


async def test_a_ten_thousand_file_directory_is_listed_in_bounded_pages(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    big = root / "big"
    big.mkdir()
    for i in range(10_000):
        (big / f"f{i:05d}.txt").touch()
    client = await asgi_client(make_app(ws_agent(root)))
    first = await client.get("/api/workspace/files", params={"path": "big"})
    body = first.json()
    assert body["total"] == 10_000 and len(body["entries"]) == 200
    assert len(first.content) < 100_000
    pages = {}
    for offset in (0, 5_000, 9_500):
        params = {"path": "big", "offset": offset, "limit": 1000}
        page = (await client.get("/api/workspace/files", params=params)).json()
        pages[offset] = [e["name"] for e in page["entries"]]
    assert pages[0][0] == "f00000.txt" and pages[5_000][0] == "f05000.txt"
    assert len(pages[9_500]) == 500 and pages[9_500][-1] == "f09999.txt"
    too_big = await client.get("/api/workspace/files", params={"path": "big", "limit": 100_000})
    assert too_big.status_code == 422


async def test_fifo_and_directories_are_not_read_as_files(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    os.mkfifo(root / "pipe.txt")
    client = await asgi_client(make_app(ws_agent(root)))
    r = await client.get("/api/workspace/file", params={"path": "pipe.txt"})
    assert r.status_code == 404
    assert (await client.get("/api/workspace/raw", params={"path": "src"})).status_code == 422
    _clean(r, root)
