"""Worker processes for the scale-out tests: each a real uvicorn on its own free port, all on
one PostgreSQL schema and one RabbitMQ queue; every process stops with its test."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import support
from tests.support import port_open, require

# the shared PostgreSQL fixtures, for this folder's tests
pg_dsn_or_none = support.pg_dsn_or_none
pg_dsn = support.pg_dsn
pg_schema = support.pg_schema

ROOT = Path(__file__).resolve().parents[3]
BROKER = os.environ.get("LOVIA_TEST_BROKER", "amqp://guest:guest@127.0.0.1:5672//")


async def poll(check: Callable[[], Any], what: str, seconds: float = 20) -> Any:
    """Wait until ``check()`` is truthy (other processes give nothing better to wait on)."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    url: str

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Workers:
    folder: Path
    env: dict[str, str]
    workers: list[Worker] = field(default_factory=list)

    async def start(self, n: int) -> list[Worker]:
        started = [self._spawn() for _ in range(n)]
        self.workers.extend(started)
        for worker in started:
            await poll(partial(_healthy, worker), "a worker to start", 30)
        return started

    def _spawn(self) -> Worker:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        command = [sys.executable, "-m", "uvicorn", "--factory"]
        command += ["tests.web.scale.scaleapp:build_with_probe", "--fd", str(sock.fileno())]
        command += ["--log-level", "warning", "--no-access-log"]
        proc = subprocess.Popen(command, env=self.env, cwd=ROOT, pass_fds=(sock.fileno(),))
        sock.close()  # the child has its own copy
        return Worker(proc, url)

    def kill(self, worker: Worker) -> None:
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(10)

    async def owner(self, session_id: str) -> Worker:
        """The worker holding the chat's live run (polled: it may be between workers)."""

        async def find() -> Worker | None:
            async with httpx.AsyncClient(timeout=5) as client:
                for worker in self.workers:
                    if worker.alive:
                        live = (await client.get(f"{worker.url}/test/live")).json()
                        if session_id in live["sessions"]:
                            return worker
            return None

        found: Worker = await poll(find, f"a worker to hold {session_id}")
        return found

    def stop(self) -> None:
        for worker in self.workers:  # SIGTERM first: a graceful stop hands runs back
            if worker.alive:
                worker.proc.terminate()
        for worker in self.workers:
            try:
                worker.proc.wait(15)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait(10)


def _healthy(worker: Worker) -> bool:
    assert worker.alive, "a worker exited"
    try:
        return httpx.get(f"{worker.url}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def _delete_queue(queue: str) -> None:
    from kombu.connection import Connection

    with Connection(BROKER, connect_timeout=5) as conn:  # type: ignore[no-untyped-call]
        conn.default_channel.queue_delete(queue)


@pytest.fixture
async def workers(tmp_path: Path, pg_dsn: str, pg_schema: str) -> AsyncIterator[Workers]:
    require(port_open("127.0.0.1", 5672), "no RabbitMQ at 127.0.0.1:5672 (the run engine)")
    queue = f"lovia-test-{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "LOVIA_SCALE_DB": f"{pg_dsn}?schema={pg_schema}",
        "LOVIA_SCALE_BROKER": BROKER,
        "LOVIA_SCALE_QUEUE": queue,
        "LOVIA_SCALE_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    pool = Workers(tmp_path, env)
    try:
        yield pool
    finally:
        pool.stop()
        _delete_queue(queue)
