"""Where the MCP tests find their real servers, and how they start and stop them.

* the fixture server (``mcp_fixture_server.py``), run with this interpreter;
* npm ``@modelcontextprotocol/server-everything``, pinned in ``mcp_everything/`` (``npm ci``);
* PyPI ``mcp-server-time`` and ``mcp-server-git``, in their own virtualenv under
  ``.lovia-test-venvs/mcp-servers`` (``.ci/run`` creates it; run the same two lines locally).

A missing peer skips the test with the command that installs it, and fails under
``LOVIA_CI=1`` (``tests.support.require``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lovia.plugins.mcp import MCPServerStdio

from tests.support import free_port, port_open, require

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
FIXTURE = HERE / "mcp_fixture_server.py"
EVERYTHING = (
    HERE / "mcp_everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
SERVER_VENV = ROOT / ".lovia-test-venvs" / "mcp-servers"
VENV_HINT = (
    "uv venv --allow-existing .lovia-test-venvs/mcp-servers && uv pip install --python "
    ".lovia-test-venvs/mcp-servers mcp-server-time==2026.10.19 mcp-server-git==2026.10.19"
)


def fixture_server(markers: Path, **options: Any) -> MCPServerStdio:
    """The fixture server, writing its markers (``cancelled``, ``calls``) into ``markers``."""
    return MCPServerStdio(command=sys.executable, args=[str(FIXTURE), str(markers)], **options)


def fixture_command(markers: Path) -> str:
    """The fixture server as one shell command (for wrappers that record a pid or fail)."""
    return f'"{sys.executable}" "{FIXTURE}" "{markers}"'


def require_node_everything() -> None:
    require(
        shutil.which("node") is not None and EVERYTHING.is_file(),
        f"server-everything is not installed: run `npm ci` in {HERE / 'mcp_everything'}",
    )


def everything_stdio(pid_file: Path | None = None, **options: Any) -> MCPServerStdio:
    """server-everything over stdio; with ``pid_file``, its pid is written there (to kill it)."""
    require_node_everything()
    if pid_file is None:
        return MCPServerStdio(command="node", args=[str(EVERYTHING), "stdio"], **options)
    script = f'echo $$ > "{pid_file}"; exec node "{EVERYTHING}" stdio'
    return MCPServerStdio(command="sh", args=["-c", script], **options)


def venv_server(name: str) -> str:
    """The path of a console script in the servers' virtualenv (skips when missing)."""
    path = SERVER_VENV / "bin" / name
    require(path.is_file(), f"{name} is not installed; run: {VENV_HINT}")
    return str(path)


class HTTPServer:
    """An MCP server over streamable HTTP on a free port, spoken to on 127.0.0.1 only.

    ``restart()`` replaces the process on the same port, which forgets every session id.
    The default is server-everything (it binds all interfaces and reads env ``PORT``);
    ``fixture=markers`` serves the fixture server instead (modern, stateless protocol).
    """

    def __init__(self, fixture: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        if fixture is None:
            require_node_everything()
            self._argv = ["node", str(EVERYTHING), "streamableHttp"]
        else:
            self._argv = [sys.executable, str(FIXTURE), str(fixture), "--http", str(self.port)]
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PORT": str(self.port)}
        self._proc = subprocess.Popen(
            self._argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while not port_open("127.0.0.1", self.port):  # polling with a deadline: no event to wait on
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self._argv[0]} (HTTP) did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def http_server(fixture: Path | None = None) -> Iterator[HTTPServer]:
    server = HTTPServer(fixture)
    server.start()
    try:
        yield server
    finally:
        server.stop()
