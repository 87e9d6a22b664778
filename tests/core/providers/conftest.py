"""Fixtures for the provider tests: real mock servers on free loopback ports.

``llmock`` (PyPI) and ``aimock`` (npm, installed by ``npm ci`` in ``aimock/``) run as
subprocesses for the whole session. Readiness is taken from the servers' own "listening"
log line, not from a sleep; a thread keeps draining their output so they never block.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from lovia.providers.discovery import clear_discovery_cache

from tests.support import free_port, require

_AIMOCK_DIR = Path(__file__).parent / "aimock"
_AIMOCK_CLI = _AIMOCK_DIR / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"


@dataclass
class Server:
    """A running mock server."""

    url: str
    proc: subprocess.Popen[str]
    log: list[str]


def _start(
    cmd: list[str], ready: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    log: list[str] = []
    started = threading.Event()
    seen_ready = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line)
            if ready in line:
                seen_ready.set()
                started.set()
        started.set()  # the process ended: let the waiter see it

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    _readers[proc.pid] = reader
    # Readiness is the ready line itself: at the end of a failed start (its port taken)
    # the output closes a moment before the process can be reaped, so ``poll()`` alone
    # could take a dying server for a running one, and its tests would talk to whatever
    # holds the port.
    if not started.wait(60) or not seen_ready.is_set() or proc.poll() is not None:
        _stop(proc)
        raise RuntimeError(f"server did not start: {cmd}\n{''.join(log)}")
    return proc, log


def _serve_on_a_free_port(
    cmd_for: Callable[[int], list[str]], ready: str
) -> tuple[int, subprocess.Popen[str], list[str]]:
    """Start a server on a free port, trying another if the port was taken meanwhile.

    ``free_port`` releases the port before the server binds it, so another process of the
    suite (one starting in the same moment) can take it first.
    """
    for attempt in range(3):
        port = free_port()
        try:
            proc, log = _start(cmd_for(port), ready=ready)
        except RuntimeError:
            if attempt == 2:
                raise
            continue
        return port, proc, log
    raise AssertionError("unreachable")


_readers: dict[int, threading.Thread] = {}


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader = _readers.pop(proc.pid, None)
    if reader is not None:
        reader.join(10)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="session")
def llmock_session() -> Iterator[Server | None]:
    exe = shutil.which("llmock", path=str(Path(sys.executable).parent)) or shutil.which("llmock")
    if exe is None:
        yield None
        return
    port, proc, log = _serve_on_a_free_port(
        lambda port: [
            exe,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "info",
            "--response-style",
            "static",
        ],
        ready="Uvicorn running",
    )
    try:
        yield Server(f"http://127.0.0.1:{port}", proc, log)
    finally:
        _stop(proc)


@pytest.fixture
def llmock(llmock_session: Server | None) -> Server:
    """The llmock server, its scenario and journal reset for this test."""
    require(llmock_session is not None, "llmock is not installed (uv sync --group dev)")
    assert llmock_session is not None
    httpx.post(llmock_session.url + "/_llmock/reset", timeout=10).raise_for_status()
    return llmock_session


@pytest.fixture(scope="session")
def aimock_session() -> Iterator[Server | None]:
    node = shutil.which("node")
    if node is None or not _AIMOCK_CLI.exists():
        yield None
        return
    port, proc, log = _serve_on_a_free_port(
        lambda port: [
            node,
            str(_AIMOCK_CLI),
            "-p",
            str(port),
            "-h",
            "127.0.0.1",
            "-f",
            str(_AIMOCK_DIR / "fixtures"),
            "--log-level",
            "info",
        ],
        ready="listening on",
    )
    try:
        yield Server(f"http://127.0.0.1:{port}", proc, log)
    finally:
        _stop(proc)


@pytest.fixture
def aimock(aimock_session: Server | None) -> Server:
    """The aimock server (fixtures in ``aimock/fixtures``)."""
    require(
        aimock_session is not None,
        "aimock is not installed: run `npm ci` in tests/core/providers/aimock (needs node >= "
        "20.15)",
    )
    assert aimock_session is not None
    return aimock_session


@pytest.fixture(autouse=True)
def _fresh_discovery_memo() -> Iterator[None]:
    clear_discovery_cache()
    yield
    clear_discovery_cache()
