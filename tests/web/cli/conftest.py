"""Run the real ``lovia`` console script in a subprocess: ``HOME`` and the working folder in
temp dirs, a free loopback port, readiness from ``/healthz`` within a bounded deadline, and
a stop by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.core.providers.conftest import llmock, llmock_session
from tests.support import free_port

__all__ = ["LOVIA", "Dirs", "WebProcess", "llmock", "llmock_session", "run_lovia"]

LOVIA = str(Path(sys.executable).with_name("lovia"))
_READY_SECONDS = 60.0


@dataclass
class Dirs:
    home: Path
    project: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LOVIA_", "OPENAI_", "ANTHROPIC_", "TAVILY_"))
        }
        return {**env, "HOME": str(self.home), "NO_COLOR": "1", **extra}


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return Dirs(home, project)


def run_lovia(
    dirs: Dirs, *args: str, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``lovia <args>`` to completion."""
    return subprocess.run(
        [LOVIA, *args],
        cwd=dirs.project,
        env=dirs.env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class WebProcess:
    proc: subprocess.Popen[str]
    url: str
    log_path: Path
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def wait_ready(self) -> float:
        """Poll ``/healthz`` until it answers (bounded); returns the seconds it took."""
        start = time.monotonic()
        deadline = start + _READY_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"lovia web exited {self.proc.returncode}:\n{self.output()}")
            try:
                if self.client.get("/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - start
            except httpx.TransportError:
                pass
            time.sleep(0.02)  # polling a real subprocess, bounded by the deadline
        raise AssertionError(f"lovia web not ready in {_READY_SECONDS}s:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> int:
        self.client.close()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode


def start_web(dirs: Dirs, *args: str, **env: str) -> WebProcess:
    port = free_port()
    log = dirs.project.parent / f"lovia-web-{port}.log"
    handle = log.open("w")
    proc = subprocess.Popen(
        [LOVIA, "web", "--port", str(port), *args],
        cwd=dirs.project,
        env=dirs.env(**env),
        stdout=handle,
        stderr=subprocess.STDOUT,
        text=True,
    )
    handle.close()
    return WebProcess(proc, f"http://127.0.0.1:{port}", log)


@pytest.fixture
def web(dirs: Dirs) -> Iterator[list[WebProcess]]:
    """Processes a test started with ``start_web``; stopped by PID at teardown."""
    started: list[WebProcess] = []
    yield started
    for process in started:
        process.stop()
