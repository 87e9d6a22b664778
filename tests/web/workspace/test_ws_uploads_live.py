"""Uploads over a real uvicorn: a huge body, a client that vanishes mid-upload."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import ws_agent


def _uploads(root: Path) -> list[str]:
    uploads = root / "uploads"
    return sorted(os.listdir(uploads)) if uploads.exists() else []


async def _settled(root: Path, expected: list[str], deadline: float = 10.0) -> bool:
    """The server cleans up on its own task after the client is gone: poll, bounded."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while loop.time() < end:
        if _uploads(root) == expected:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_thirty_megabyte_upload_is_refused_over_the_wire(
    make_app: Any, serve: Any, root: Path
) -> None:
    live = await serve(make_app(ws_agent(root)))
    try:
        r = await live.client.post(
            "/api/workspace/upload", files={"file": ("big.txt", b"z" * (30 * 1024 * 1024))}
        )
        assert r.status_code == 413
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        pass  # the server answered 413 and closed while the client was still sending
    assert await _settled(root, [])
    ok = await live.client.post("/api/workspace/upload", files={"file": ("a.txt", b"a")})
    assert ok.status_code == 201  # the server is fine afterwards


async def test_a_client_that_disconnects_mid_upload_leaves_nothing(
    make_app: Any, serve: Any, root: Path
) -> None:
    live = await serve(make_app(ws_agent(root)))
    host, port = live.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = b'--b\r\nContent-Disposition: form-data; name="file"; filename="cut.txt"\r\n\r\n'
    writer.write(
        b"POST /api/workspace/upload HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: multipart/form-data; boundary=b\r\n"
        b"Content-Length: 10000000\r\n\r\n" + head + b"q" * 200_000
    )
    await writer.drain()
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    streaming = False
    while loop.time() < end and not streaming:  # the temporary file appears as bytes arrive
        streaming = any(n.endswith(".part") for n in _uploads(root))
        await asyncio.sleep(0.02)
    assert streaming, "the upload never started"
    writer.close()
    await writer.wait_closed()
    assert await _settled(root, []), _uploads(root)
    del reader


async def test_uploads_can_be_turned_off_and_secret_names_are_refused(
    make_app: Any, asgi_client: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    secret = await client.post("/api/workspace/upload", files={"file": ("id_rsa", b"k")})
    assert secret.status_code == 422 and "denies" in secret.json()["detail"]
    monkeypatch.setenv("LOVIA_MAX_UPLOAD_MB", "0")
    off = await client.post("/api/workspace/upload", files={"file": ("a.txt", b"a")})
    assert off.status_code == 409
    assert (await client.get("/api/workspace")).json()["uploads"] is False
    assert _uploads(root) == []
