"""MCP tool-call latency over stdio: the first call (the server start and handshake, the
tool listing and the call) separately, then the median of warm calls.

Two servers: the Python fixture server (tests/plugins/mcp_fixture_server.py, this
interpreter) and npm server-everything when installed (``npm ci`` in
tests/plugins/mcp_everything). Each warm call goes through ``MCPConnection.call_tool`` and
``render_mcp_content``: lovia's whole per-call path, minus the model.

Run: ``uv run python benchmarks/bench_mcp.py`` (prints medians of repetitions).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lovia.plugins.mcp import MCPServerStdio, render_mcp_content

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/plugins/mcp_fixture_server.py"
EVERYTHING = (
    ROOT / "tests/plugins/mcp_everything/node_modules/@modelcontextprotocol/server-everything"
    "/dist/index.js"
)
COLD_REPS = 3
WARM_CALLS = 200


async def _cold(server: MCPServerStdio, tool: str, args: dict[str, str]) -> float:
    start = time.perf_counter()
    async with server.session() as conn:
        await conn.tools()
        render_mcp_content(await conn.call_tool(tool, args))
        elapsed = time.perf_counter() - start
    return elapsed


async def _warm(server: MCPServerStdio, tool: str, args: dict[str, str]) -> list[float]:
    times = []
    async with server.session() as conn:
        await conn.call_tool(tool, args)
        for _ in range(WARM_CALLS):
            start = time.perf_counter()
            render_mcp_content(await conn.call_tool(tool, args))
            times.append(time.perf_counter() - start)
    return times


async def _bench(label: str, server: MCPServerStdio, tool: str, args: dict[str, str]) -> None:
    cold = [await _cold(server, tool, args) for _ in range(COLD_REPS)]
    warm = await _warm(server, tool, args)
    warm.sort()
    p95 = warm[int(len(warm) * 0.95)]
    first = statistics.median(cold) * 1e3
    print(
        f"{label:<26} first call (start + list + call): median {first:7.1f} ms"
        f"   warm call: median {statistics.median(warm) * 1e3:6.2f} ms, p95 {p95 * 1e3:6.2f} ms"
        f"  ({WARM_CALLS} calls)"
    )


async def main() -> None:
    markers = tempfile.mkdtemp()
    fixture = MCPServerStdio(command=sys.executable, args=[str(FIXTURE), markers])
    await _bench("python fixture server", fixture, "echo", {"text": "hi"})
    if shutil.which("node") and EVERYTHING.is_file():
        everything = MCPServerStdio(command="node", args=[str(EVERYTHING), "stdio"])
        await _bench("server-everything (node)", everything, "echo", {"message": "hi"})
    else:
        print("server-everything not installed (npm ci in tests/plugins/mcp_everything): skipped")


if __name__ == "__main__":
    asyncio.run(main())
