"""Uploads: sanitised names, collisions, the extension allow-list and the streaming cap."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider
from lovia.web.uploads import UploadLimits, sanitize_filename

from .conftest import ws_agent


def _upload(client: Any, name: str, data: bytes, **params: str) -> Any:
    return client.post("/api/workspace/upload", params=params, files={"file": (name, data)})


def _leftovers(root: Path) -> list[str]:
    uploads = root / "uploads"
    return sorted(os.listdir(uploads)) if uploads.exists() else []


async def test_an_upload_lands_in_uploads_and_is_listed(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root, mode="readonly")))
    r = await _upload(client, "notes.txt", b"hello")
    assert r.status_code == 201, r.text
    assert r.json() == {"path": "uploads/notes.txt", "name": "notes.txt", "size": 5}
    assert (root / "uploads" / "notes.txt").read_bytes() == b"hello"
    listed = (await client.get("/api/workspace/files", params={"path": "uploads"})).json()
    assert [e["name"] for e in listed["entries"]] == ["notes.txt"]


async def test_collisions_get_numbered_names_and_nothing_is_overwritten(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    paths = [(await _upload(client, "report.pdf", b"v%d" % i)).json()["path"] for i in range(3)]
    assert paths == ["uploads/report.pdf", "uploads/report (1).pdf", "uploads/report (2).pdf"]
    assert (root / "uploads" / "report.pdf").read_bytes() == b"v0"
    plain = [(await _upload(client, "Makefile", b"all:")).json()["name"] for _ in range(2)]
    assert plain == ["Makefile", "Makefile (1)"]


async def test_fifty_concurrent_uploads_of_one_name_all_survive(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    replies = await asyncio.gather(*(_upload(client, "same.txt", b"%d" % i) for i in range(50)))
    assert all(r.status_code == 201 for r in replies)
    names = [r.json()["name"] for r in replies]
    assert len(set(names)) == 50
    contents = {(root / "uploads" / n).read_bytes() for n in names}
    assert contents == {b"%d" % i for i in range(50)}
    assert len(_leftovers(root)) == 50  # no temporary file left behind


async def test_empty_and_disallowed_files_are_refused(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    empty = await _upload(client, "empty.txt", b"")
    assert empty.status_code == 422 and "empty" in empty.json()["detail"]
    exe = await _upload(client, "tool.exe", b"MZ")
    assert exe.status_code == 422 and "extension" in exe.json()["detail"]
    assert _leftovers(root) == []
    no_file = await client.post("/api/workspace/upload", data={"other": "x"})
    assert no_file.status_code == 422
    not_multipart = await client.post("/api/workspace/upload", json={"file": "x"})
    assert not_multipart.status_code == 422
    garbage = await client.post(
        "/api/workspace/upload",
        content=b"--xyz\r\nnonsense",
        headers={"content-type": "multipart/form-data; boundary=xyz"},
    )
    assert garbage.status_code == 422
    assert _leftovers(root) == []


async def test_the_extension_list_comes_from_the_environment(
    make_app: Any, asgi_client: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_UPLOAD_ALLOWED_EXT", "exe, .BIN")
    client = await asgi_client(make_app(ws_agent(root)))
    assert (await _upload(client, "tool.EXE", b"MZ")).status_code == 201
    assert (await _upload(client, "a.txt", b"x")).status_code == 422
    assert (await _upload(client, "README", b"x")).status_code == 201  # extensionless
    monkeypatch.setenv("LOVIA_UPLOAD_ALLOWED_EXT", "*")
    assert (await _upload(client, "a.weird", b"x")).status_code == 201


async def test_a_thirty_megabyte_upload_is_a_413_and_leaves_nothing(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    r = await _upload(client, "big.bin.txt", b"x" * (30 * 1024 * 1024))
    assert r.status_code == 413 and "25 MB" in r.json()["detail"]
    assert _leftovers(root) == []


async def test_the_cap_holds_while_streaming_without_a_content_length(
    make_app: Any, asgi_client: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_MAX_UPLOAD_MB", "1")
    client = await asgi_client(make_app(ws_agent(root)))
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="s.txt"\r\n\r\n'
        for _ in range(100):  # 6.4 MB if the server kept reading
            sent += 1
            yield b"y" * 65536
        yield b"\r\n--b--\r\n"

    r = await client.post(
        "/api/workspace/upload",
        content=body(),
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 413
    assert sent < 30, "the server read far past the cap"
    assert _leftovers(root) == []


async def test_a_cut_off_body_leaves_no_partial_file(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    r = await client.post(
        "/api/workspace/upload",
        content=b'--b\r\nContent-Disposition: form-data; name="file"; filename="c.txt"\r\n\r\nhalf',
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 422 and "ended early" in r.json()["detail"]
    assert _leftovers(root) == []


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("CON", "_CON"),
        ("con.txt", "_con.txt"),
        ("LPT1.md", "_LPT1.md"),
        ("..", "upload"),
        (".", "upload"),
        ("...hidden.txt", "hidden.txt"),
        ("a/../../b.txt", "b.txt"),
        ("..\\..\\win.txt", "win.txt"),
        ("/etc/passwd", "passwd"),
        ("evil\u202etxt.exe", "eviltxt.exe"),
        ("zero\u200bwidth.txt", "zerowidth.txt"),
        ("nul\x00byte.txt", "nulbyte.txt"),
        ("ﬁle\uff0etxt", "file.txt"),
        ("e\u0301.txt", "\u00e9.txt"),
        ("tabs\tand\nlines.txt", "tabs and lines.txt"),
        ("trailing. . .", "trailing"),
    ],
)
def test_filenames_are_sanitised(raw: str, stored: str) -> None:
    assert sanitize_filename(raw) == stored


def test_long_names_are_capped_and_keep_their_extension() -> None:
    name = sanitize_filename("é" * 300 + ".pdf")
    assert name.endswith(".pdf") and len(name.encode()) <= 200
    assert sanitize_filename("x" * 300) == "x" * 200


async def test_hostile_names_over_http_stay_inside_uploads(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    for raw in ("../../escape.txt", "CON", "..", "a/../../b.txt", "rtl\u202egpj.txt"):
        r = await _upload(client, raw, b"data")
        assert r.status_code == 201, (raw, r.text)
        assert r.json()["path"].startswith("uploads/") and "/" not in r.json()["name"]
    assert not (root.parent / "escape.txt").exists() and not (root / "b.txt").exists()
    assert sorted(_leftovers(root)) == sorted(
        ["escape.txt", "_CON", "upload", "b.txt", "rtlgpj.txt"]
    )


async def test_uploads_need_a_workspace_and_a_real_uploads_directory(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    os.symlink(outside, root / "uploads")
    agents = {"plain": Agent(name="plain", model=ScriptedProvider([])), "ws": ws_agent(root)}
    client = await asgi_client(make_app(agents))
    assert (await _upload(client, "a.txt", b"x", agent="plain")).status_code == 404
    refused = await _upload(client, "a.txt", b"x", agent="ws")
    assert refused.status_code == 409 and "symlink" in refused.json()["detail"]
    assert os.listdir(outside) == []
    info = (await client.get("/api/workspace", params={"agent": "ws"})).json()
    assert info["uploads"] is False


def test_limits_from_the_environment_tolerate_junk() -> None:
    assert UploadLimits.from_env({"LOVIA_MAX_UPLOAD_MB": "abc"}).max_bytes == 25 * 1024 * 1024
    assert UploadLimits.from_env({"LOVIA_MAX_UPLOAD_MB": "0.5"}).max_bytes == 512 * 1024
    assert UploadLimits.from_env({"LOVIA_UPLOAD_ALLOWED_EXT": "*"}).allowed_ext is None
