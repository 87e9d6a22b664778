"""lovia-web SSE delivery: events per second from one supervised run to 1 and 10 watchers,
and the per-event cost the supervisor adds over iterating ``Runner.stream`` in process.

A scripted reply of ``CHARS`` characters streams one ``text_delta`` per character. Every
event of a supervised run is appended to the SQLite event log (WAL) before it is published,
so the log write dominates the supervisor's cost.

* ``in-process``: ``Runner.stream`` iterated directly (no supervisor, no log, no HTTP).
* ``supervisor``: ``RunSupervisor.start`` + ``follow`` (the log and the hub, no HTTP).
* ``http x1`` / ``http x10``: a real uvicorn on 127.0.0.1, each watcher a streaming httpx
  client reading frames to ``done``; the figure is events delivered per watcher per second.
* latency: for each event, the time from the supervisor receiving it from ``Runner.stream``
  (``RunLog.put``, timestamped by wrapping it here) to a watcher receiving it, through
  ``follow`` and through HTTP; p50 / p99 over every event of every repetition. The
  in-process reference is the gap between consecutive events of ``Runner.stream``.
  Measured twice: *saturated* (the scripted model streams as fast as it can, far faster
  than the log commits, so the figure is mostly queueing behind the writer) and *paced*
  (``PACED`` deltas ``PACE`` seconds apart, like a real model: the latency one event adds).

Run: ``uv run python benchmarks/bench_web_sse.py`` (prints medians of ``REPS`` repetitions).
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from lovia import Agent, Runner, tool
from lovia.providers.base import ModelDelta
from lovia.testing import ScriptedProvider, ScriptStep, call, text
from lovia.web import ChatStore, RunSupervisor, create_app
from lovia.web.eventlog import RunLog

_PUT_AT: dict[tuple[str, int], float] = {}
_original_put = RunLog.put


async def _timed_put(self: RunLog, kind: str, data: dict[str, Any]) -> None:
    _PUT_AT[(self.run_id, self.seq + 1)] = time.perf_counter()
    await _original_put(self, kind, data)


RunLog.put = _timed_put  # type: ignore[method-assign]

CHARS = 2000
REPS = 5
PACED = 300
PACE = 0.002


class _Paced(ScriptedProvider):
    """A scripted model that sleeps ``PACE`` seconds before each delta."""

    async def stream(self, entries: Any, **kwargs: Any) -> AsyncIterator[ModelDelta]:
        async for delta in super().stream(entries, **kwargs):
            await asyncio.sleep(PACE)
            yield delta


def _agent(
    replies: int = 1, *, attached: asyncio.Event | None = None, paced: bool = False
) -> Agent[None]:
    """``attached``: the run first waits in a tool until the watcher is connected, so every
    reply event it times is delivered live, not replayed from the log."""
    script: list[ScriptStep] = [text("x" * (PACED if paced else CHARS)) for _ in range(replies)]
    tools = []
    if attached is not None:
        gate = attached

        @tool
        async def wait_for_watcher() -> str:
            """Wait until the benchmark's watcher is connected."""
            await gate.wait()
            return "ok"

        tools.append(wait_for_watcher)
        script.insert(0, call("wait_for_watcher"))
    model = _Paced(script) if paced else ScriptedProvider(script)
    return Agent("bench", model=model, tools=tools)


_GAPS: list[float] = []
_SUP_LAT: list[float] = []
_HTTP_LAT: list[float] = []
_PACED_SUP: list[float] = []
_PACED_HTTP: list[float] = []


async def _in_process() -> float:
    start = last = time.perf_counter()
    async for _ in Runner.stream(_agent(), "go"):
        now = time.perf_counter()
        _GAPS.append(now - last)
        last = now
    return time.perf_counter() - start


async def _supervised(
    folder: Path, latencies: list[float] | None = None, paced: bool = False
) -> tuple[float, int]:
    latencies = _SUP_LAT if latencies is None else latencies
    store = ChatStore.sqlite(str(folder / f"sup{paced}.db"))
    supervisor = RunSupervisor({"bench": _agent(paced=paced)}, store)
    start = time.perf_counter()
    started = await supervisor.start("go")
    count = 0
    async for record in supervisor.follow(started.run.run_id):
        put = _PUT_AT.pop((record.run_id, record.seq), None)
        if put is not None:
            latencies.append(time.perf_counter() - put)
        count += 1
    elapsed = time.perf_counter() - start
    await supervisor.aclose()
    await store.aclose()
    return elapsed, count


async def _watch(
    client: httpx.AsyncClient,
    session_id: str,
    run_id: str,
    timed: list[float] | None,
    attached: asyncio.Event | None,
) -> int:
    frames = 0
    params = {"session_id": session_id}
    async with client.stream("GET", "/api/chat/stream", params=params) as response:
        async for line in response.aiter_lines():
            if attached is not None and line == "event: session":
                attached.set()
            if timed is not None and line.startswith("id: "):
                put = _PUT_AT.get((run_id, int(line[4:])))
                if put is not None:
                    timed.append(time.perf_counter() - put)
            if line.startswith("event: "):
                frames += 1
                if line == "event: done":
                    break
    return frames


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6


async def _http(
    folder: Path, watchers: int, latencies: list[float] | None = None, paced: bool = False
) -> float:
    latencies = _HTTP_LAT if latencies is None else latencies
    attached = asyncio.Event() if watchers == 1 else None
    agent = _agent(attached=attached, paced=paced)
    app = create_app(agent, db_path=folder / f"http{watchers}{paced}.db")
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
        sid, run_id = started.run.session_id, started.run.run_id
        counts = await asyncio.gather(
            *(
                _watch(
                    client, sid, run_id, latencies if i == 0 and watchers == 1 else None, attached
                )
                for i in range(watchers)
            )
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
            await _supervised(rep_folder, _PACED_SUP, paced=True)
            await _http(rep_folder, 1, _PACED_HTTP, paced=True)
        print(f"events per run: {events}")
        print(f"in-process Runner.stream: {statistics.median(direct):>10,.0f} events/s")
        print(f"supervisor (log + hub):   {statistics.median(supervised):>10,.0f} events/s")
        print(f"supervisor cost per event: {statistics.median(per_event):>9.1f} us (median)")
        print(f"http, 1 watcher:          {statistics.median(http1):>10,.0f} events/s")
        print(f"http, 10 watchers:        {statistics.median(http10):>10,.0f} events/s each")
        print(
            f"in-process gap between events: p50 {_pct(_GAPS, 0.5):.1f} us, "
            f"p99 {_pct(_GAPS, 0.99):.1f} us"
        )
        for label, sup, http in (
            ("saturated", _SUP_LAT, _HTTP_LAT),
            (f"paced {PACE * 1e3:g} ms", _PACED_SUP, _PACED_HTTP),
        ):
            print(
                f"{label}: supervisor latency (put -> follow) p50 {_pct(sup, 0.5):.0f} us, "
                f"p99 {_pct(sup, 0.99):.0f} us; + http (put -> client) "
                f"p50 {_pct(http, 0.5):.0f} us, p99 {_pct(http, 0.99):.0f} us"
            )


if __name__ == "__main__":
    asyncio.run(main())
