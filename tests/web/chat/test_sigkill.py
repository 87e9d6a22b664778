"""A real uvicorn subprocess killed with SIGKILL mid-tool, restarted on the same database."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from ..conftest import Frame, read_frames

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc = proc
        self.url = url


async def _poll(check: Callable[[], bool], what: str, seconds: float = 20) -> None:
    """Wait for ``check()`` (a real subprocess gives nothing better to wait on)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def launch(tmp_path: Path) -> AsyncIterator[Callable[[str], Awaitable[Server]]]:
    procs: list[subprocess.Popen[bytes]] = []

    async def start(phase: str) -> Server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        env = {
            **os.environ,
            "LOVIA_KILL_DB": str(tmp_path / "chat.db"),
            "LOVIA_KILL_DIR": str(tmp_path),
            "LOVIA_KILL_PHASE": phase,
            "PYTHONPATH": str(ROOT),
        }
        command = [sys.executable, "-m", "uvicorn", "--factory", "tests.web.chat.killapp:build"]
        command += ["--fd", str(sock.fileno()), "--log-level", "warning", "--no-access-log"]
        proc = subprocess.Popen(command, env=env, cwd=ROOT, pass_fds=(sock.fileno(),))
        sock.close()  # the child has its own copy
        procs.append(proc)

        def healthy() -> bool:
            assert proc.poll() is None, "the server exited"
            try:
                return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        await _poll(healthy, "the server to start")
        return Server(proc, url)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_sigkill_mid_tool_then_restart_and_resume_loses_nothing(
    launch: Callable[[str], Awaitable[Server]], tmp_path: Path
) -> None:
    first = await launch("first")
    seen: list[Frame] = []
    async with httpx.AsyncClient(base_url=first.url, timeout=30) as client:
        with pytest.raises((httpx.TransportError, httpx.RemoteProtocolError)):
            async with client.stream("POST", "/api/chat/stream", json={"message": "go"}) as r:
                async for frame in read_frames(r):
                    seen.append(frame)
                    if frame.event == "tool_call" and frame.data["name"] == "block":
                        await _poll((tmp_path / "entered.log").exists, "the tool to start")
                        first.proc.send_signal(signal.SIGKILL)
                        first.proc.wait(10)
    assert first.proc.returncode == -signal.SIGKILL
    session, events = seen[0], seen[1:]
    sid, run_id = session.data["session_id"], session.data["run_id"]
    last_id = events[-1].id
    assert last_id is not None
    (tmp_path / "release").touch()

    second = await launch("second")
    async with httpx.AsyncClient(base_url=second.url, timeout=30) as client:
        params = {"session_id": sid}
        headers = {"Last-Event-ID": last_id}
        async with client.stream("GET", "/api/chat/stream", params=params, headers=headers) as r:
            assert r.status_code == 200
            after = []
            async for frame in read_frames(r):
                after.append(frame)
                if frame.event == "done":
                    break
        assert after[0].data["run_id"] == run_id
        ids = [int(f.id or "") for f in events + after[1:]]
        assert ids == list(range(1, len(ids) + 1))  # no gap, no duplicate, across the kill
        assert after[-1].data["status"] == "completed"
        assert after[-1].data["output"] == "finished after the kill"
        # Completed tools are never re-run; the one cut off by the kill is (at least once).
        assert (tmp_path / "note.log").read_text().count("ran") == 1
        assert (tmp_path / "entered.log").read_text().count("entered") == 2
        results = [f.data["output"] for f in events + after if f.event == "tool_result"]
        assert results == ["noted", "released"]
        # Everything the first life logged is still there, unchanged.
        params = {"session_id": sid, "run_id": run_id}
        async with client.stream("GET", "/api/chat/stream", params=params) as r:
            replay = [f async for f in read_frames(r)]
        assert [(f.id, f.event, f.data) for f in replay[1 : len(events) + 1]] == [
            (f.id, f.event, f.data) for f in events
        ]
        detail = (await client.get(f"/api/sessions/{sid}")).json()
        assert detail["active_run_id"] is None
        assert [e["type"] for e in detail["entries"]] == [
            "input",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "assistant_text",
        ]
