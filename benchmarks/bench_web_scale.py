"""lovia web scale-out: several worker processes on one PostgreSQL, runs on Celery/RabbitMQ.

Every server is a uvicorn **subprocess** (``--factory benchmarks.bench_web_scale:build``) on
its own port; the clients are httpx streams in this process, each choosing a worker (no
balancer). The model is scripted from the conversation (any worker continues any chat).

* throughput: ``CHATS`` chats at once (``POST /api/chat/stream`` read to ``done``), spread
  over 1, 2 and 3 engine workers, and on one plain server (no engine) for comparison.
* per run and per tool call: ``SEQUENTIAL`` chats one after the other on one worker with the
  engine and on one plain server, a plain answer and an answer after ``TOOLS`` tool calls;
  the medians' difference is the engine's added latency per run, and the per-call slope's
  difference its cost per tool call.
* recovery: ``KILLS`` times, a run blocked in a tool, its worker SIGKILLed; the time until
  another worker has resumed it (the tool entered again there). p50 / max.

Needs PostgreSQL (``BENCH_PG``, default ``postgresql://postgres@127.0.0.1:5432/test``) and
RabbitMQ (``BENCH_BROKER``); each phase uses its own schema and queue, dropped at the end.
Run: ``uv run python benchmarks/bench_web_scale.py``; ``BENCH_CHATS``, ``BENCH_SEQUENTIAL``
and ``BENCH_KILLS`` shrink it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

CHATS = int(os.environ.get("BENCH_CHATS", "200"))
SEQUENTIAL = int(os.environ.get("BENCH_SEQUENTIAL", "30"))
TOOLS = 5
KILLS = int(os.environ.get("BENCH_KILLS", "10"))
PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
BROKER = os.environ.get("BENCH_BROKER", "amqp://guest:guest@127.0.0.1:5672//")
ROOT = Path(__file__).resolve().parents[1]


# -- the served app (in each worker process) -----------------------------------------------


def build() -> Any:
    """The app a worker serves: ``BENCH_SCALE_QUEUE`` empty means a plain server."""
    from lovia import Agent, tool
    from lovia.testing import ScriptedProvider, call, text
    from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
    from lovia.web import create_app
    from lovia.web.scale import RunEngine
    from lovia.web.store.postgres import PostgresChatStore

    folder = Path(os.environ["BENCH_SCALE_DIR"])

    def reply(entries: Sequence[TranscriptEntry]) -> Any:
        first = next(e for e in entries if isinstance(e, InputEntry) and e.role == "user")
        said = first.content if isinstance(first.content, str) else ""
        done = sum(isinstance(e, ToolResultEntry) for e in entries)
        if said.startswith("block "):
            return call("block", {"key": said[6:]}) if done == 0 else text("released")
        if said.startswith("tools") and done < TOOLS:
            return call("quick")
        return text("ok " * 10)

    class Model(ScriptedProvider):
        async def stream(
            self, entries: Sequence[TranscriptEntry], **options: Any
        ) -> AsyncIterator[Any]:
            async for delta in ScriptedProvider([reply(entries)]).stream(entries, **options):
                yield delta

    @tool
    def quick() -> str:
        """Answer at once."""
        return "quick"

    @tool
    async def block(key: str) -> str:
        """Note where it runs, then wait for the release file of ``key``."""
        with (folder / "entered.log").open("a") as f:
            f.write(f"{key} {os.getpid()} {time.time()}\n")
        while not (folder / f"release-{key}").exists():
            await asyncio.sleep(0.005)
        return "released"

    queue = os.environ.get("BENCH_SCALE_QUEUE") or None
    return create_app(
        Agent(name="bench", model=Model(), tools=[quick, block]),
        store=PostgresChatStore(os.environ["BENCH_SCALE_DB"], max_connections=5),
        engine=RunEngine(BROKER, queue=queue) if queue else None,
        generate_titles=False,
        scheduler_poll=None,
        max_background_runs=CHATS + 16,  # every chat at once, queued or not
        ui=False,
    )


# -- the harness ---------------------------------------------------------------------------


class Deployment:
    """Worker processes sharing one schema (and one queue, with the engine)."""

    def __init__(self, folder: Path, *, engine: bool) -> None:
        self.folder = folder
        self.schema = f"lovia_bench_{uuid.uuid4().hex[:10]}"
        self.queue = f"lovia-bench-{uuid.uuid4().hex[:10]}" if engine else ""
        self.procs: list[tuple[subprocess.Popen[bytes], str]] = []

    def spawn(self) -> tuple[subprocess.Popen[bytes], str]:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        env = {
            **os.environ,
            "BENCH_SCALE_DB": f"{PG}?schema={self.schema}",
            "BENCH_SCALE_QUEUE": self.queue,
            "BENCH_SCALE_DIR": str(self.folder),
            "PYTHONPATH": str(ROOT),
        }
        command = [sys.executable, "-m", "uvicorn", "--factory"]
        command += ["benchmarks.bench_web_scale:build", "--fd", str(sock.fileno())]
        command += ["--log-level", "error", "--no-access-log"]
        proc = subprocess.Popen(command, env=env, cwd=ROOT, pass_fds=(sock.fileno(),))
        sock.close()
        self.procs.append((proc, url))
        return proc, url

    async def start(self, n: int) -> list[str]:
        started = [self.spawn() for _ in range(n)]
        for proc, url in started:
            await ready(proc, url)
        return [url for _, url in started]

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        import psycopg

        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        if self.queue:
            from kombu.connection import Connection

            with Connection(BROKER) as broker:  # type: ignore[no-untyped-call]
                broker.default_channel.queue_delete(self.queue)


async def ready(proc: subprocess.Popen[bytes], url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=2) as client:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"a worker exited with {proc.returncode}")
            try:
                if (await client.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("a worker did not start")
            await asyncio.sleep(0.05)


async def chat(client: httpx.AsyncClient, url: str, message: str) -> float:
    """Send ``message``, read the stream to ``done``; the seconds it took."""
    started = time.perf_counter()
    async with client.stream("POST", f"{url}/api/chat/stream", json={"message": message}) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {(await r.aread())[:200]!r}")
        async for line in r.aiter_lines():
            if line == "event: done":
                break
    return time.perf_counter() - started


async def throughput(workers: int, *, engine: bool, folder: Path) -> float:
    deployment = Deployment(folder, engine=engine)
    try:
        urls = await deployment.start(workers)
        limits = httpx.Limits(max_connections=CHATS + 10)
        async with httpx.AsyncClient(timeout=300, limits=limits) as client:
            await chat(client, urls[0], "warm up")
            started = time.perf_counter()
            await asyncio.gather(*(chat(client, urls[i % workers], "hi") for i in range(CHATS)))
            return CHATS / (time.perf_counter() - started)
    finally:
        deployment.stop()


async def latency(folder: Path) -> dict[str, dict[str, float]]:
    """Median seconds of a plain chat and of a chat with ``TOOLS`` tool calls, on one plain
    server and on one engine worker, sent alternately (both see the same machine load)."""
    plain, engine = Deployment(folder, engine=False), Deployment(folder, engine=True)
    try:
        urls = {"plain": (await plain.start(1))[0], "engine": (await engine.start(1))[0]}
        times: dict[str, dict[str, list[float]]] = {k: {"run": [], "tools": []} for k in urls}
        async with httpx.AsyncClient(timeout=60) as client:
            for url in urls.values():
                await chat(client, url, "warm up")
            for _ in range(SEQUENTIAL):
                for kind, url in urls.items():
                    times[kind]["run"].append(await chat(client, url, "hi"))
                    times[kind]["tools"].append(await chat(client, url, "tools"))
        return {
            kind: {name: statistics.median(values) for name, values in found.items()}
            for kind, found in times.items()
        }
    finally:
        plain.stop()
        engine.stop()


async def recovery(folder: Path) -> list[float]:
    """Seconds from a SIGKILL to the run's tool entered again on another worker."""
    deployment = Deployment(folder, engine=True)
    entered = folder / "entered.log"
    times: list[float] = []
    try:
        urls = await deployment.start(3)
        async with httpx.AsyncClient(timeout=60) as client:
            for i in range(KILLS):
                key = f"k{i}"
                live = [(p, u) for p, u in deployment.procs if p.poll() is None]
                task = asyncio.create_task(chat(client, live[i % len(live)][1], f"block {key}"))
                first = await _entered(entered, key, 1)
                victim = next(p for p, _ in live if p.pid == first[0][0])
                victim.send_signal(signal.SIGKILL)
                killed = time.time()
                victim.wait()
                second = await _entered(entered, key, 2)
                times.append(second[1][1] - killed)
                (folder / f"release-{key}").touch()
                try:
                    await asyncio.wait_for(task, 60)
                except httpx.HTTPError:
                    pass  # its stream was on the killed worker
                proc, url = deployment.spawn()  # keep three workers
                await ready(proc, url)
        del urls
        return times
    finally:
        deployment.stop()


async def _entered(log: Path, key: str, count: int, seconds: float = 60) -> list[tuple[int, float]]:
    deadline = time.monotonic() + seconds
    while True:
        lines = log.read_text().splitlines() if log.exists() else []
        found = [(int(p), float(t)) for k, p, t in (x.split() for x in lines) if k == key]
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {key} was not resumed within {seconds} s")
        await asyncio.sleep(0.005)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"throughput: {CHATS} concurrent chats (chats/s)")
        plain = await throughput(1, engine=False, folder=folder)
        print(f"  1 plain server (no engine): {plain:7.1f}")
        for n in (1, 2, 3):
            rate = await throughput(n, engine=True, folder=folder)
            print(f"  {n} engine worker(s):         {rate:7.1f}")

        print(f"latency: median of {SEQUENTIAL} sequential chats, one server each, alternating")
        found = await latency(folder)
        per_call = {k: (v["tools"] - v["run"]) / TOOLS for k, v in found.items()}
        for kind in ("plain", "engine"):
            print(
                f"  {kind:6}: run {found[kind]['run'] * 1000:6.1f} ms, "
                f"per tool call {per_call[kind] * 1000:5.2f} ms"
            )
        added = (found["engine"]["run"] - found["plain"]["run"]) * 1000
        print(
            f"  engine adds: {added:6.1f} ms per run, "
            f"{(per_call['engine'] - per_call['plain']) * 1000:5.2f} ms per tool call"
        )

        print(f"recovery: {KILLS} SIGKILLs of the worker running a run")
        times = await recovery(folder)
        print(
            f"  death to resumed elsewhere: p50 {statistics.median(times) * 1000:6.0f} ms, "
            f"max {max(times) * 1000:6.0f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
