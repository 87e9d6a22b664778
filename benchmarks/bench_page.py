"""read_page conversion time: a 1 MB HTML page (documentation, a blog post, tables, lists,
scripts and hostile markup, repeated) through ``html_to_markdown``, the step ``HttpReader``
runs on every fetched page. Also times one full ``HttpReader.read`` of the same page from a
local server (download, decoding and conversion).

Usage: uv run python benchmarks/bench_page.py [REPEATS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from lovia.tools import HttpReader, html_to_markdown

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test pages live in tests/
from tests.core.tools.builtin_pages import BLOG, DOCS, HOSTILE, TABLES

SIZE = 1_000_000


def make_page() -> str:
    body = "".join(
        part.split("<body", 1)[-1].split(">", 1)[-1].rsplit("</body>", 1)[0]
        for part in (DOCS, BLOG, TABLES, HOSTILE)
    )
    chunks = ["<!doctype html><html><head><title>Bench</title></head><body>"]
    size = len(chunks[0])
    while size < SIZE:
        chunks.append(body)
        size += len(body)
    chunks.append("</body></html>")
    return "".join(chunks)


def time_conversion(html: str, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        html_to_markdown(html, "https://bench.example/page")
        times.append(time.perf_counter() - started)
    return times


def time_reads(html: str, repeats: int) -> list[float]:
    raw = html.encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"

    async def run() -> list[float]:
        reader = HttpReader(max_bytes=2 * SIZE, cache_ttl=0, allow_private=True)
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            await reader.read(url)
            times.append(time.perf_counter() - started)
        return times

    try:
        return asyncio.run(run())
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    html = make_page()
    markdown = html_to_markdown(html)
    print(f"page: {len(html.encode()):,} bytes of HTML -> {len(markdown):,} characters of markdown")
    conversion = statistics.median(time_conversion(html, repeats))
    print(f"html_to_markdown, 1 MB page: median {conversion * 1000:.0f} ms over {repeats} runs")
    read = statistics.median(time_reads(html, repeats))
    print(f"HttpReader.read from 127.0.0.1, 1 MB page: median {read * 1000:.0f} ms")


if __name__ == "__main__":
    main()
