"""lovia-web under load: 100 concurrent chats of 5 turns each through a real uvicorn, and the
time to re-attach to a run of 10,000 events with ``Last-Event-ID``.

The server is a uvicorn **subprocess** (``--factory bench_web_chats:build``) so its peak
memory (``VmHWM`` from ``/proc``) is the server's alone; the clients are httpx streams in
this process. The model is scripted: every turn streams a ``REPLY``-character answer, one
``text_delta`` per character.

* chats: ``CHATS`` sessions at once, each sending ``TURNS`` messages one after the other
  (``POST /api/chat/stream``, read to ``done``). Figures: wall time, p50 / p99 of the time
  from sending a message to its first run event (``turn_started``), the server's peak RSS.
* re-attach: one run of ``LONG`` deltas, finished; then ``GET /api/chat/stream`` with
  ``Last-Event-ID`` at its end (only ``done`` left to send), in its middle, and at 0 (the
  whole log), each timed to ``done`` (median of ``REPS``).

Run: ``uv run python benchmarks/bench_web_chats.py`` (Linux: reads ``/proc``); the
``BENCH_CHATS``, ``BENCH_TURNS``, ``BENCH_REPLY`` and ``BENCH_LONG`` variables shrink it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

CHATS = int(os.environ.get("BENCH_CHATS", "100"))
TURNS = int(os.environ.get("BENCH_TURNS", "5"))
REPLY = int(os.environ.get("BENCH_REPLY", "100"))
LONG = int(os.environ.get("BENCH_LONG", "10000"))
REPS = 5


def build() -> object:
    """The app the subprocess serves: ``chat`` answers every turn, ``long`` streams once."""
    from lovia import Agent
    from lovia.testing import ScriptedProvider, text
    from lovia.web import create_app

    replies = [text("y" * REPLY) for _ in range(CHATS * TURNS)]
    agents = {
        "chat": Agent("chat", model=ScriptedProvider(replies)),
        "long": Agent("long", model=ScriptedProvider([text("z" * LONG)])),
    }
    return create_app(agents, db_path=os.environ["BENCH_DB"], max_background_runs=CHATS)


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _turn(client: httpx.AsyncClient, body: dict[str, str]) -> tuple[str, float, int]:
    sent = time.perf_counter()
    first: float | None = None
    session_id = ""
    events = 0
    async with client.stream("POST", "/api/chat/stream", json=body) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("data: ") and not session_id:
                session_id = line.split('"session_id":"', 1)[1].split('"', 1)[0]
            if line.startswith("event: "):
                events += 1
                if first is None and line != "event: session":
                    first = time.perf_counter() - sent
                if line == "event: done":
                    break
    assert first is not None
    return session_id, first, events


async def _chat(client: httpx.AsyncClient, firsts: list[float]) -> int:
    body = {"message": "hello", "agent": "chat"}
    events = 0
    for _ in range(TURNS):
        session_id, first, n = await _turn(client, body)
        firsts.append(first)
        events += n
        body = {"message": "and then?", "session_id": session_id}
    return events


async def _reattach(client: httpx.AsyncClient, session_id: str, after: int) -> tuple[float, int]:
    start = time.perf_counter()
    frames = 0
    params = {"session_id": session_id}
    headers = {"Last-Event-ID": str(after)}
    async with client.stream("GET", "/api/chat/stream", params=params, headers=headers) as r:
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                frames += 1
                if line == "event: done":
                    break
    return time.perf_counter() - start, frames


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        env = {**os.environ, "BENCH_DB": str(Path(tmp) / "bench.db")}
        command = [sys.executable, "-m", "uvicorn", "--factory", "bench_web_chats:build"]
        command += ["--fd", str(sock.fileno()), "--log-level", "warning", "--no-access-log"]
        here = Path(__file__).resolve().parent
        proc = subprocess.Popen(command, env=env, cwd=here, pass_fds=(sock.fileno(),))
        sock.close()
        limits = httpx.Limits(max_connections=CHATS * 2, max_keepalive_connections=CHATS * 2)
        try:
            async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
                while True:  # the subprocess gives nothing better to wait on than polling
                    try:
                        if (await client.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.05)
                idle_mb = _peak_rss_mb(proc.pid)

                firsts: list[float] = []
                start = time.perf_counter()
                counts = await asyncio.gather(*(_chat(client, firsts) for _ in range(CHATS)))
                wall = time.perf_counter() - start
                peak_mb = _peak_rss_mb(proc.pid)
                firsts.sort()
                p50 = firsts[len(firsts) // 2] * 1e3
                p99 = firsts[min(len(firsts) - 1, int(0.99 * len(firsts)))] * 1e3
                print(f"{CHATS} chats x {TURNS} turns ({sum(counts):,} events): {wall:.2f} s wall")
                print(f"time to first run event: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
                print(f"server peak RSS: {peak_mb:.0f} MB (idle after startup: {idle_mb:.0f} MB)")

                session_id, _, events = await _turn(client, {"message": "go", "agent": "long"})
                last = events - 1  # the ids of the run's records are 1..events-1 (no session)
                print(f"long run: {last:,} logged events")
                for label, after in (
                    ("at the end", last - 1),
                    ("in the middle", last // 2),
                    ("from 0", 0),
                ):
                    runs = [await _reattach(client, session_id, after) for _ in range(REPS)]
                    took = statistics.median(t for t, _ in runs) * 1e3
                    frames = runs[0][1]
                    print(
                        f"re-attach {label} (Last-Event-ID {after}): {took:.1f} ms, {frames} frames"
                    )
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
