"""Time from starting `lovia web` to its first successful `GET /healthz` (median of N).

Each run is a fresh process in a fresh folder with an empty HOME (so it starts in the setup
state, as on a fresh clone), on a free loopback port; it is stopped by its PID afterwards.

Usage: uv run python benchmarks/bench_cli_startup.py [N]   (default 5)
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

LOVIA = str(Path(sys.executable).with_name("lovia"))
DEADLINE_SECONDS = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def one_run() -> float:
    """Seconds from Popen to the first 200 from /healthz."""
    with tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp, "home"), Path(tmp, "project")
        home.mkdir()
        project.mkdir()
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOVIA_")}
        env["HOME"] = str(home)
        start = time.perf_counter()
        proc = subprocess.Popen(
            [LOVIA, "web", "--port", str(port)],
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}/healthz"
            while time.perf_counter() - start < DEADLINE_SECONDS:
                if proc.poll() is not None:
                    raise RuntimeError(f"lovia web exited with {proc.returncode}")
                if _healthy(url):
                    return time.perf_counter() - start
                time.sleep(0.01)
            raise RuntimeError("lovia web did not become healthy in time")
        finally:
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    samples = [one_run() for _ in range(runs)]
    load = os.getloadavg()[0]
    print(
        f"lovia web -> first GET /healthz: median {statistics.median(samples) * 1000:.0f} ms "
        f"(min {min(samples) * 1000:.0f}, max {max(samples) * 1000:.0f}, n={runs}, "
        f"load {load:.1f})"
    )


if __name__ == "__main__":
    main()
