"""lovia-web SSE delivery: events per second from one supervised run to 1 and 10 watchers,
and the per-event cost the supervisor adds over iterating ``Runner.stream`` in process.

A scripted reply of ``CHARS`` characters streams one ``text_delta`` per character. Every
event of a supervised run is appended to the SQLite event log (WAL) before it is published,
so the log write dominates the supervisor's cost.

* ``in-process``: ``Runner.stream`` iterated directly (no supervisor, no log, no HTTP).
* ``supervisor``: ``RunSupervisor.start`` + ``follow`` (the log and the hub, no HTTP).
* ``http x1`` / ``http x10``: a real uvicorn on 127.0.0.1, each watcher a streaming httpx
  client reading frames to ``done``; the figure is events delivered per watcher per second.

Run: ``uv run python benchmarks/bench_web_sse.py`` (prints medians of ``REPS`` repetitions).
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import uvicorn
from lovia import Agent, Runner
from lovia.testing import ScriptedProvider, text
from lovia.web import ChatStore, RunSupervisor, create_app

CHARS = 2000
REPS = 5


def _agent(replies: int = 1) -> Agent[None]:
    return Agent("bench", model=ScriptedProvider([text("x" * CHARS) for _ in range(replies)]))


async def _in_process() -> float:
    start = time.perf_counter()
    async for _ in Runner.stream(_agent(), "go"):
        pass
    return time.perf_counter() - start


async def _supervised(folder: Path) -> tuple[float, int]:
    store = ChatStore.sqlite(str(folder / "sup.db"))
    supervisor = RunSupervisor({"bench": _agent()}, store)
    start = time.perf_counter()
    started = await supervisor.start("go")
    count = sum([1 async for _ in supervisor.follow(started.run.run_id)])
    elapsed = time.perf_counter() - start
    await supervisor.aclose()
    await store.aclose()
    return elapsed, count


async def _watch(client: httpx.AsyncClient, session_id: str) -> int:
    frames = 0
    params = {"session_id": session_id}
    async with client.stream("GET", "/api/chat/stream", params=params) as response:
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                frames += 1
                if line == "event: done":
                    break
    return frames


async def _http(folder: Path, watchers: int) -> float:
    app = create_app(_agent(), db_path=folder / f"http{watchers}.db")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.005)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        start = time.perf_counter()
        started = await app.state.lovia.supervisor.start("go")
        counts = await asyncio.gather(
            *(_watch(client, started.run.session_id) for _ in range(watchers))
        )
        elapsed = time.perf_counter() - start
    server.should_exit = True
    await task
    assert len(set(counts)) == 1, counts
    return counts[0] / elapsed


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        direct, supervised, per_event, http1, http10 = [], [], [], [], []
        for rep in range(REPS):
            d = await _in_process()
            rep_folder = folder / str(rep)
            rep_folder.mkdir()
            s, events = await _supervised(rep_folder)
            direct.append(events / d)
            supervised.append(events / s)
            per_event.append((s - d) / events * 1e6)
            http1.append(await _http(rep_folder, 1))
            http10.append(await _http(rep_folder, 10))
        print(f"events per run: {events}")
        print(f"in-process Runner.stream: {statistics.median(direct):>10,.0f} events/s")
        print(f"supervisor (log + hub):   {statistics.median(supervised):>10,.0f} events/s")
        print(f"supervisor cost per event: {statistics.median(per_event):>9.1f} us (median)")
        print(f"http, 1 watcher:          {statistics.median(http1):>10,.0f} events/s")
        print(f"http, 10 watchers:        {statistics.median(http10):>10,.0f} events/s each")


if __name__ == "__main__":
    asyncio.run(main())
