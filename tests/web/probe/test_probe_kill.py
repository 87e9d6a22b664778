"""SIGKILL a real server process in the middle of a run, restart it on the same SQLite file:
the run record, the event log and the transcript agree, and the run resumes once."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import httpx

from ..conftest import frames_until_done

WORKER = str(Path(__file__).with_name("server_worker.py"))
TIMEOUT = 60.0
"""Only a guard against a hung child."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _spawn(db: Path, mode: str) -> tuple[Any, str]:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, WORKER, str(db), str(port), mode, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)
    assert line.strip() == b"READY", line
    return proc, f"http://127.0.0.1:{port}"


async def test_a_run_killed_mid_tool_is_interrupted_then_resumes_once(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    proc, url = await _spawn(db, "park")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
            body = {"message": "park it", "session_id": "k1"}
            async with client.stream("POST", "/api/chat/stream", json=body) as r:
                assert r.status_code == 200
                assert proc.stdout is not None
                parked = await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)
                assert parked.strip() == b"PARKED"
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    proc, url = await _spawn(db, "resume")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
            assert (await client.get("/api/runs")).json()["runs"] == []
            [record] = (await client.get("/api/runs/history")).json()["runs"]
            assert record["status"] == "interrupted", record
            run_id = record["run_id"]
            params = {"session_id": "k1"}
            async with client.stream("GET", "/api/chat/stream", params=params) as r:
                assert r.status_code == 200, await r.aread()
                frames = await frames_until_done(r)
            assert frames[-1].event == "done" and frames[-1].data["status"] == "completed"
            ids = [int(f.id) for f in frames[1:] if f.id is not None]
            assert ids == sorted(set(ids)), "a seq repeated or went back"
            runs = (await client.get("/api/runs/history")).json()["runs"]
            assert [(r["run_id"], r["status"], r["source"]) for r in runs] == [
                (run_id, "completed", "resume")
            ]
            detail = (await client.get("/api/sessions/k1")).json()
            assert detail["active_run_id"] is None and not detail["live"]
            users = [e for e in detail["entries"] if e.get("role") == "user"]
            assert [u["content"] for u in users] == ["park it"]
            assert detail["entries"][-1]["content"] == "resumed"
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), TIMEOUT)


async def test_a_run_killed_before_its_first_checkpoint_ends_for_its_watchers(
    tmp_path: Path, make_app: Any, asgi_client: Any
) -> None:
    # What a process SIGKILLed during its run's first model call leaves behind: the chat's
    # pointer, a `running` record and an open-ended log, but no checkpoint.
    from lovia.testing import text
    from lovia.web import ChatStore, EventRecord
    from lovia.web.store.base import RunRecord

    from ..conftest import scripted_agent

    db = tmp_path / "chat.db"
    store = ChatStore.sqlite(str(db))
    await store.create_session("k2", agent="helper", title="t")
    run_id = "f" * 32
    await store.set_active_run("k2", run_id)
    await store.record_run_started(RunRecord(run_id, "k2", "helper", "chat", "running"))
    await store.append_events(
        "k2", [EventRecord(run_id, 1, "turn_started", {"turn": 1, "agent": "helper"})]
    )
    await store.aclose()

    app = make_app(scripted_agent(text("fresh")), db_path=db)
    client = await asgi_client(app)
    r = await asyncio.wait_for(client.get("/api/chat/stream", params={"session_id": "k2"}), 10)
    if r.status_code == 200:
        events = [line for line in r.text.splitlines() if line.startswith("event:")]
        assert events[-1] == "event: done", r.text  # else an EventSource reconnects forever
    else:
        assert r.status_code == 404, r.text
    [record] = (await client.get("/api/runs/history")).json()["runs"]
    assert record["status"] != "running"
    meta = (await client.get("/api/sessions/k2")).json()
    assert meta["active_run_id"] is None
