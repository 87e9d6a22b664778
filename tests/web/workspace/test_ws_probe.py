"""A hostile user against the panel, uploads, attachments and processes (probe round)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from lovia.web.attachments import AttachmentsInvalid, resolve_attachments
from lovia.web.errors import WebError
from lovia.web.files import WorkspaceFiles

from .conftest import PNG, ws_agent

ENDPOINTS = ("/api/workspace/file", "/api/workspace/raw", "/api/workspace/files")


def _clean(response: Any, root: Path) -> None:
    body = response.text
    assert str(root.parent) not in body and "Traceback" not in body and "SECRET" not in body


@pytest.mark.parametrize(
    "query",
    [
        "%252e%252e/outside.txt",
        "%c0%ae%c0%ae/outside.txt",
        "\uff0e\uff0e\uff0foutside.txt",
        "\uff0e\uff0e/outside.txt",
        "..%2foutside.txt",
        "src/./../../outside.txt",
        "src//..//..//outside.txt",
        "C:/outside.txt",
        "..",
        "../",
        "%2e%2e%5coutside.txt",
        "src/%00",
        "\u2024\u2024/outside.txt",
    ],
)
async def test_every_encoding_of_a_traversal_stays_inside(
    make_app: Any, asgi_client: Any, root: Path, query: str
) -> None:
    (root.parent / "outside.txt").write_text("SECRET outside")
    client = await asgi_client(make_app(ws_agent(root, mode="trusted")))
    for endpoint in ENDPOINTS:
        r = await client.get(f"{endpoint}?path={query}")
        assert r.status_code in (403, 404, 422), (endpoint, query, r.status_code)
        _clean(r, root)


async def test_a_hardlink_to_a_secret_is_not_served(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    os.link(root / ".env", root / "innocent.txt")
    client = await asgi_client(make_app(ws_agent(root)))
    for endpoint in ENDPOINTS[:2]:
        r = await client.get(endpoint, params={"path": "innocent.txt"})
        assert r.status_code == 403, endpoint
        _clean(r, root)
    ok = await client.get("/api/workspace/file", params={"path": "README.md"})
    assert ok.status_code == 200


async def test_a_directory_swapped_for_a_link_after_the_check_reads_nothing_outside(
    root: Path,
) -> None:
    """The race: ``locate`` judged ``box/data.txt`` inside the root, then ``box`` became a
    symlink to a directory outside before the read. The read must not follow it."""
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "data.txt").write_text("SECRET outside\n")
    (root / "box").mkdir()
    (root / "box" / "data.txt").write_text("inside\n")

    class Racing(WorkspaceFiles):
        def locate(self, raw: str) -> tuple[str, Path]:
            found = super().locate(raw)
            (root / "box" / "data.txt").unlink()
            (root / "box").rmdir()
            os.symlink(outside, root / "box")
            return found

    for mode in ("coding", "trusted"):
        if (root / "box").is_symlink():
            (root / "box").unlink()
            (root / "box").mkdir()
            (root / "box" / "data.txt").write_text("inside\n")
        files = Racing(ws_agent(root, mode=mode).workspace)  # type: ignore[arg-type]
        try:
            data = await files.read_bytes("box/data.txt", 1000)
        except WebError as exc:  # refused: fine, as long as nothing leaked
            assert "SECRET" not in str(exc)
            continue
        assert data is None or b"SECRET" not in data, mode
    calm = WorkspaceFiles(ws_agent(root).workspace)  # type: ignore[arg-type]
    assert await calm.read_bytes("README.md", 100) == b"# Project\n"


async def test_html_svg_and_js_uploads_are_never_served_inline(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    payloads = {
        "x.html": b"<script>alert(1)</script>",
        "x.svg": b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        "x.js": b"alert(1)",
        "x.png": b"<html><script>alert(1)</script></html>",
        "x.pdf": b"<html><script>alert(1)</script></html>",
        "x": b"<html><script>alert(1)</script></html>",
    }
    for name, body in payloads.items():
        up = await client.post("/api/workspace/upload", files={"file": (name, body)})
        assert up.status_code == 201, (name, up.text)
        r = await client.get("/api/workspace/raw", params={"path": up.json()["path"]})
        assert r.headers["x-content-type-options"] == "nosniff"
        ctype = r.headers["content-type"]
        assert (
            "html" not in ctype
            and "javascript" not in ctype
            and "svg" not in ctype
            or (r.headers["content-disposition"].startswith("attachment"))
        ), (name, ctype)
        if not ctype.startswith(("image/", "application/pdf")):
            assert r.headers["content-disposition"].startswith("attachment"), name


@pytest.mark.parametrize(
    "header",
    ['W/"nope", *', '"a",,,', "", ",", " * ", '"' + "a" * 5000 + '"'],
)
async def test_odd_if_none_match_headers_never_break_raw(
    make_app: Any, asgi_client: Any, root: Path, header: str
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    r = await client.get(
        "/api/workspace/raw", params={"path": "logo.png"}, headers={"If-None-Match": header}
    )
    assert r.status_code in (200, 304)
    if r.status_code == 200:
        assert r.content == PNG


async def test_a_range_header_is_ignored_or_honoured_never_an_error(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    for value in ("bytes=0-3", "bytes=-1", "bytes=999999-", "bytes=5-1", "items=0-1"):
        r = await client.get(
            "/api/workspace/raw", params={"path": "logo.png"}, headers={"Range": value}
        )
        assert r.status_code in (200, 206, 416), value


@pytest.mark.parametrize(
    "name",
    [
        "..",
        ".",
        "",
        "CON",
        "con.txt",
        "a" * 300 + ".txt",
        "evil\u202etxt.exe",
        "a\x00b.txt",
        "a\r\nContent-Type: text/html.txt",
        "../../../etc/passwd",
        "..\\..\\x.txt",
        "\uff0e\uff0e\uff0fx.txt",
        "x.exe\u200b",
        "x.exe.",
        "x.exe ",
        "uploads",
        "/",
    ],
)
async def test_hostile_upload_names(make_app: Any, asgi_client: Any, root: Path, name: str) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    r = await client.post("/api/workspace/upload", files={"file": (name, b"data")})
    assert r.status_code in (201, 422), (name, r.text)
    _clean(r, root)
    if r.status_code == 201:
        stored = r.json()["path"]
        assert stored.startswith("uploads/") and "/" not in stored[len("uploads/") :]
        assert (root / stored).is_file()
        assert not stored.endswith(".exe")
    if (root / "uploads").exists():
        assert [p for p in (root / "uploads").iterdir() if p.name.startswith(".")] == []


async def test_multipart_edge_cases(make_app: Any, asgi_client: Any, root: Path) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    url = "/api/workspace/upload"
    b = "XyZ"
    no_filename = f'--{b}\r\nContent-Disposition: form-data; name="file"\r\n\r\ndata\r\n--{b}--\r\n'
    r = await client.post(
        url, content=no_filename, headers={"content-type": f"multipart/form-data; boundary={b}"}
    )
    assert r.status_code == 422
    r = await client.post(url, content=no_filename, headers={"content-type": "multipart/form-data"})
    assert r.status_code == 422
    r = await client.post(url, content=b"junk", headers={"content-type": "text/plain"})
    assert r.status_code == 422
    r = await client.post(url)
    assert r.status_code == 422
    two = await client.post(url, files=[("file", ("a.txt", b"one")), ("file", ("b.txt", b"two"))])
    assert two.status_code == 201 and two.json()["name"] == "a.txt"
    assert sorted(p.name for p in (root / "uploads").iterdir()) == ["a.txt"]
    crlf = (
        f"--{b}\r\n"
        'Content-Disposition: form-data; name="file"; filename="a\\"\r\nX-Evil: 1.txt"\r\n'
        f"\r\ndata\r\n--{b}--\r\n"
    )
    r = await client.post(
        url, content=crlf, headers={"content-type": f"multipart/form-data; boundary={b}"}
    )
    assert r.status_code in (201, 422)
    assert all(not p.name.startswith(".") for p in (root / "uploads").iterdir())


async def test_fifty_concurrent_uploads_over_the_wire(
    make_app: Any, serve: Any, root: Path
) -> None:
    live = await serve(make_app(ws_agent(root)))
    results = await asyncio.gather(
        *(
            live.client.post("/api/workspace/upload", files={"file": ("same.txt", f"{i}".encode())})
            for i in range(50)
        )
    )
    assert all(r.status_code == 201 for r in results)
    paths = {r.json()["path"] for r in results}
    assert len(paths) == 50
    contents = {(root / p).read_text() for p in paths}
    assert contents == {str(i) for i in range(50)}
    assert [p for p in (root / "uploads").iterdir() if p.name.startswith(".")] == []


async def test_attachment_edge_cases(root: Path) -> None:
    os.symlink(root.parent, root / "up")
    (root / "fake.png").write_bytes(b"<html>not an image</html>")
    agent = ws_agent(root, vision=True, denied_paths=("private",))
    from lovia.web.attachments import AttachmentRef

    bad = [
        AttachmentRef(path="up/chat.db"),
        AttachmentRef(path="private/keys.txt"),
        AttachmentRef(path="src"),
        AttachmentRef(path="."),
        AttachmentRef(path="/etc/passwd"),
        AttachmentRef(path=".env"),
    ]
    with pytest.raises(AttachmentsInvalid):
        await resolve_attachments(agent, "hi", bad)
    out = await resolve_attachments(
        agent, "hi", [AttachmentRef(path="fake.png", kind="image"), *bad]
    )
    assert isinstance(out, str), "bytes that are not an image are not inlined as one"
    assert "[attached: fake.png" in out


async def test_twenty_one_attachments_are_a_422(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    body = {"message": "hi", "attachments": [{"path": "README.md"}] * 21}
    r = await client.post("/api/chat/stream", json=body)
    assert r.status_code == 422


@pytest.mark.parametrize("pid", ["-1", "0", "p-1", "p0", "1", "p99999", "p1%00", "%2d1"])
async def test_a_pid_that_is_not_the_chats_is_404_or_422(
    make_app: Any, asgi_client: Any, root: Path, pid: str
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    missing = await client.post(f"/api/sessions/{'a' * 32}/processes/{pid}/kill")
    assert missing.status_code in (404, 422)


async def test_a_chat_deleted_while_its_run_is_starting_keeps_no_workspace_session(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    from lovia.testing import text

    app = make_app(ws_agent(root, text("hi"), text("again")))
    client = await asgi_client(app)
    state = app.state.lovia
    supervisor = state.supervisor
    real = state.store.set_active_run
    held, gate = asyncio.Event(), asyncio.Event()

    async def slow(session_id: str, run_id: str | None, **kw: Any) -> Any:
        if run_id is not None and not gate.is_set():  # the run is being set up
            held.set()
            await gate.wait()
        return await real(session_id, run_id, **kw)

    state.store.set_active_run = slow
    sid = "a" * 32
    starting = asyncio.create_task(supervisor.start("hello", session_id=sid))
    await held.wait()
    run = supervisor.live(sid)
    assert run is not None and run.task is None
    stopping = asyncio.Event()
    real_stop = supervisor._stop

    def stop(live: Any, reason: str) -> None:
        real_stop(live, reason)
        stopping.set()

    supervisor._stop = stop
    deleting = asyncio.create_task(client.delete(f"/api/sessions/{sid}"))
    await stopping.wait()
    assert run.stop_reason == "cancel"
    gate.set()
    assert (await deleting).status_code == 204
    await starting
    assert run.task is not None
    await run.task
    assert await state.store.get_session(sid) is None
    assert len(supervisor.workspaces) == 0, "a deleted chat still holds a workspace session"


async def test_a_directory_swapped_for_a_link_after_the_check_lists_nothing_outside(
    root: Path,
) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "SECRET-name.txt").write_text("x")
    (root / "box").mkdir()

    class Racing(WorkspaceFiles):
        def locate(self, raw: str) -> tuple[str, Path]:
            found = super().locate(raw)
            (root / "box").rmdir()
            os.symlink(outside, root / "box")
            return found

    files = Racing(ws_agent(root).workspace)  # type: ignore[arg-type]
    try:
        listing = await files.listing("box")
    except WebError as exc:
        assert "SECRET" not in str(exc)
    else:
        assert [e.name for e in listing.entries] == []


async def test_killing_another_chats_pid_is_a_404_and_leaves_it_running(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    from lovia.testing import call, text

    from ..conftest import chat, until

    sleeper = call("shell", {"command": "sleep 60", "background": True, "description": "sleeper"})
    app = make_app(ws_agent(root, sleeper, text("started"), text("b"), mode="trusted"))
    client = await asgi_client(app)
    async with chat(client, "start it") as (session, frames):
        await until(frames, "done")
    a = session.data["session_id"]
    async with chat(client, "hello") as (session, frames):
        await until(frames, "done")
    b = session.data["session_id"]
    supervisor = app.state.lovia.supervisor
    assert [p.state for p in supervisor.workspaces.processes(a)] == ["running"]
    for pid in ("p1", "p2", "p0"):
        assert (await client.post(f"/api/sessions/{b}/processes/{pid}/kill")).status_code == 404
    for pid in ("-1", "0", "p-1", "1", "p1.0", "p01x"):
        r = await client.post(f"/api/sessions/{a}/processes/{pid}/kill")
        assert r.status_code in (404, 422), pid
    assert [p.state for p in supervisor.workspaces.processes(a)] == ["running"]
    killed = await client.post(f"/api/sessions/{a}/processes/p1/kill")
    assert killed.json()["processes"][0]["state"] == "killed"


async def test_a_lying_content_length_leaves_nothing_over_the_wire(
    make_app: Any, serve: Any, root: Path
) -> None:
    live = await serve(make_app(ws_agent(root)))
    host, port = live.url.removeprefix("http://").split(":")
    b = "XyZ"
    body = (
        f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        + "x" * 1000
        + f"\r\n--{b}--\r\n"
    ).encode()
    for declared in (len(body) // 2, 10):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            (
                f"POST /api/workspace/upload HTTP/1.1\r\nHost: x\r\n"
                f"Content-Type: multipart/form-data; boundary={b}\r\n"
                f"Content-Length: {declared}\r\nConnection: close\r\n\r\n"
            ).encode()
            + body
        )
        await writer.drain()
        status = (await reader.readline()).decode()
        writer.close()
        assert " 422 " in status or " 400 " in status, status
    too_long = len(body) + 500
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        (
            f"POST /api/workspace/upload HTTP/1.1\r\nHost: x\r\n"
            f"Content-Type: multipart/form-data; boundary={b}\r\n"
            f"Content-Length: {too_long}\r\n\r\n"
        ).encode()
        + body
    )
    await writer.drain()
    writer.close()  # the client goes away before sending what it promised
    await writer.wait_closed()
    listing = await live.client.get("/api/workspace/files", params={"path": "uploads"})
    assert listing.status_code in (200, 404)
    if (root / "uploads").exists():
        deadline = asyncio.get_running_loop().time() + 10
        while any((root / "uploads").iterdir()):  # the server notices the cut on its own clock
            assert asyncio.get_running_loop().time() < deadline, list((root / "uploads").iterdir())
            await asyncio.sleep(0.05)


async def test_describe_image_refuses_bytes_that_are_not_that_image(root: Path) -> None:
    from lovia import Runner
    from lovia.events import ToolCallCompleted
    from lovia.testing import ScriptedProvider, call, text
    from lovia.web.vision import with_vision_delegation

    (root / "fake.png").write_text("<html><script>x()</script></html>")
    vision = ScriptedProvider([text("a cat")], supports_vision=True)
    main = ws_agent(root, call("describe_image", {"path": "fake.png"}), text("ok"))
    agent = await with_vision_delegation(main, vision)
    handle = Runner.stream(agent, "go")
    results = [e async for e in handle if isinstance(e, ToolCallCompleted)]
    assert results[0].is_error and "not a png image" in str(results[0].output).lower()
    assert vision.views == [], "the vision model was never asked"


async def test_undecodable_and_control_character_names_list_and_serve_cleanly(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    os.mkdir(os.fsencode(root) + b"/bad\xffdir")
    with open(os.fsencode(root) + b"/bad\xffdir/in\xfe.txt", "wb") as fh:
        fh.write(b"x")
    (root / "line\r\nSet-Cookie: a=b.png").write_bytes(PNG)
    client = await asgi_client(make_app(ws_agent(root)))
    listing = await client.get("/api/workspace/files")
    assert listing.status_code == 200
    recent = await client.get("/api/workspace/recent", params={"limit": 100})
    assert recent.status_code == 200
    assert any(f["path"].endswith(".txt") and "\ufffd" in f["path"] for f in recent.json()["files"])
    raw = await client.get("/api/workspace/raw", params={"path": "line\r\nSet-Cookie: a=b.png"})
    assert raw.status_code == 200 and "set-cookie" not in raw.headers
    assert "\n" not in raw.headers["content-disposition"]


async def test_a_kill_racing_the_chats_delete_is_never_a_500(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    from lovia.testing import call, text

    from ..conftest import chat, until

    # The kill waits for the group to be reaped: the delete closes the session meanwhile.
    sleeper = call("shell", {"command": "sleep 60", "background": True})
    app = make_app(ws_agent(root, sleeper, text("started"), mode="trusted"))
    client = await asgi_client(app)
    async with chat(client, "start it") as (session, frames):
        await until(frames, "done")
    sid = session.data["session_id"]
    kill, delete = await asyncio.gather(
        client.post(f"/api/sessions/{sid}/processes/p1/kill"),
        client.delete(f"/api/sessions/{sid}"),
    )
    assert delete.status_code == 204
    assert kill.status_code in (200, 404), kill.text


async def test_an_upload_never_writes_through_a_name_taken_by_a_dir_or_a_link(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    (root / "uploads" / "notes.md").mkdir(parents=True)
    os.symlink(root.parent / "planted.md", root / "uploads" / "notes (1).md")
    client = await asgi_client(make_app(ws_agent(root)))
    r = await client.post("/api/workspace/upload", files={"file": ("notes.md", b"mine")})
    assert r.status_code == 201 and r.json()["path"] == "uploads/notes (2).md"
    assert not (root.parent / "planted.md").exists()
    assert (root / "uploads" / "notes (2).md").read_bytes() == b"mine"


async def test_uploads_swapped_for_a_link_mid_upload_land_nowhere_outside(
    make_app: Any, serve: Any, root: Path
) -> None:
    """A streamed upload: after its first chunk, ``uploads`` is moved away and replaced by
    a symlink to a directory outside; the finished file must not appear outside."""
    outside = root.parent / "outside"
    outside.mkdir()
    live = await serve(make_app(ws_agent(root)))
    first, swapped = asyncio.Event(), asyncio.Event()

    async def body() -> Any:
        b = "XyZ"
        yield (
            f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        ).encode() + b"x" * 100
        first.set()
        await swapped.wait()
        yield b"y" * 100 + f"\r\n--{b}--\r\n".encode()

    async def swap() -> None:
        await first.wait()
        deadline = asyncio.get_running_loop().time() + 10
        while not any((root / "uploads").glob(".upload-*")):  # the server's own clock
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        os.rename(root / "uploads", root / "moved")
        os.symlink(outside, root / "uploads")
        swapped.set()

    sending = live.client.post(
        "/api/workspace/upload",
        content=body(),
        headers={"content-type": "multipart/form-data; boundary=XyZ"},
    )
    r, _ = await asyncio.gather(sending, swap())
    assert list(outside.iterdir()) == []
    assert r.status_code in (201, 409), r.text


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "Infinity"])
def test_an_infinite_or_nan_upload_cap_keeps_the_default(value: str) -> None:
    from lovia.web.uploads import DEFAULT_MAX_MB, UploadLimits

    limits = UploadLimits.from_env({"LOVIA_MAX_UPLOAD_MB": value})
    assert limits.max_bytes == int(DEFAULT_MAX_MB * 1024 * 1024)


async def test_huge_offsets_and_odd_limits_are_answered_or_422(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    huge = str(10**40)
    for endpoint, params in [
        ("/api/workspace/files", {"offset": huge}),
        ("/api/workspace/file", {"path": "README.md", "offset": huge}),
        ("/api/workspace/files", {"limit": "0"}),
        ("/api/workspace/files", {"limit": "1001"}),
        ("/api/workspace/recent", {"limit": "-1"}),
        ("/api/workspace/file", {"path": "README.md", "offset": "-1"}),
        ("/api/workspace/file", {"path": "README.md", "limit": "1e3"}),
    ]:
        r = await client.get(endpoint, params=params)
        assert r.status_code in (200, 422), (endpoint, params, r.status_code)
        _clean(r, root)


async def test_a_file_swapped_for_a_link_after_the_check_is_refused(root: Path) -> None:
    (root.parent / "outside.txt").write_text("SECRET outside\n")
    (root / "data.txt").write_text("inside\n")

    class Racing(WorkspaceFiles):
        def locate(self, raw: str) -> tuple[str, Path]:
            found = super().locate(raw)
            (root / "data.txt").unlink()
            os.symlink(root.parent / "outside.txt", root / "data.txt")
            return found

    files = Racing(ws_agent(root, mode="trusted").workspace)  # type: ignore[arg-type]
    with pytest.raises(WebError) as info:
        await files.raw("data.txt")
    assert info.value.status == 403 and "SECRET" not in str(info.value)


async def test_a_workspace_opened_through_a_symlinked_path_lists_normally(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    os.symlink(root, root.parent / "alias")
    client = await asgi_client(make_app(ws_agent(root.parent / "alias")))
    names = [e["name"] for e in (await client.get("/api/workspace/files")).json()["entries"]]
    assert "src" in names and "README.md" in names
    recent = (await client.get("/api/workspace/recent")).json()["files"]
    assert "src/app.py" in [f["path"] for f in recent]


async def test_a_304_keeps_nosniff_and_the_cache_policy(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    client = await asgi_client(make_app(ws_agent(root)))
    first = await client.get("/api/workspace/raw", params={"path": "logo.png"})
    again = await client.get(
        "/api/workspace/raw",
        params={"path": "logo.png"},
        headers={"If-None-Match": first.headers["etag"]},
    )
    assert again.status_code == 304 and again.content == b""
    assert again.headers["x-content-type-options"] == "nosniff"
    assert again.headers["cache-control"] == first.headers["cache-control"]


async def test_a_chunked_upload_over_a_tiny_cap_leaves_nothing_over_the_wire(
    make_app: Any, serve: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    monkeypatch.setenv("LOVIA_MAX_UPLOAD_MB", "0.01")  # 10 KB
    live = await serve(make_app(ws_agent(root)))

    async def body() -> Any:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'
        for _ in range(100):
            yield b"z" * 1024
        yield b"\r\n--b--\r\n"

    try:
        r = await live.client.post(
            "/api/workspace/upload",
            content=body(),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        assert r.status_code == 413
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        pass  # answered and closed while the client was still sending
    deadline = asyncio.get_running_loop().time() + 10
    while (root / "uploads").exists() and any((root / "uploads").iterdir()):
        assert asyncio.get_running_loop().time() < deadline, list((root / "uploads").iterdir())
        await asyncio.sleep(0.02)
    small = await live.client.post("/api/workspace/upload", files={"file": ("s.txt", b"s")})
    assert small.status_code == 201


async def test_a_denied_file_is_not_listed_through_a_symlinked_directory(
    make_app: Any, asgi_client: Any, root: Path
) -> None:
    (root / "src" / "hidden_plan.txt").write_text("SECRET plan")
    os.symlink(root / "src", root / "alias")
    agent = ws_agent(root, denied_paths=("src/hidden_plan.txt",))
    client = await asgi_client(make_app(agent))
    for path in ("src", "alias"):
        listing = (await client.get("/api/workspace/files", params={"path": path})).json()
        assert "hidden_plan.txt" not in [e["name"] for e in listing["entries"]], path
    recent = (await client.get("/api/workspace/recent", params={"limit": 100})).json()
    assert not any("hidden_plan" in f["path"] for f in recent["files"])


async def test_a_page_of_a_file_of_tiny_lines_takes_memory_like_the_file(root: Path) -> None:
    """A 2 MB file of 1M two-byte lines: one page must not build a million strings."""
    import tracemalloc

    (root / "lines.txt").write_bytes(b"a\n" * 1_000_000)
    files = WorkspaceFiles(ws_agent(root).workspace)  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        page = await files.text("lines.txt", offset=999_990, limit=20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page.total_lines == 1_000_000 and page.lines == 10 and page.next_offset is None
    assert page.content == "a\n" * 10
    assert peak < 16_000_000, f"peak {peak / 1e6:.0f} MB for a 2 MB file"


@pytest.mark.parametrize(
    "content",
    ["", "a", "a\n", "a\r\nb", "a\rb\r", "x\x0by\x0cz\x1c\x1d\x1e", "\x85\u2028\u2029end", "\n\n"],
)
async def test_line_pages_match_splitlines(root: Path, content: str) -> None:
    (root / "odd.txt").write_text(content, newline="")
    files = WorkspaceFiles(ws_agent(root).workspace)  # type: ignore[arg-type]
    lines = content.splitlines(keepends=True)
    page = await files.text("odd.txt", offset=1, limit=2)
    assert page.total_lines == len(lines)
    assert page.content == "".join(lines[1:3])
    assert page.next_offset == (3 if len(lines) > 3 else None)
