"""A real HTTP server on 127.0.0.1 for the built-in tool tests, with routes set per test,
and ``run_tool``, which calls one tool through a real run.

Each route is a function of the request handler that writes the whole response itself, so a
test can send exactly the bytes a hostile or broken server would: wrong charsets, gzip,
bodies without an end, dropped connections. Requests are recorded for assertions.
"""

from __future__ import annotations

import gzip
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lovia import Agent, Runner, ToolResultEntry
from lovia.testing import ScriptedProvider, call, text

Route = Callable[["Handler"], None]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Site:
    """The running server: ``routes`` maps a path to its route, ``seen`` records requests."""

    port: int = 0
    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    """Set at teardown: routes that stall wait on it, so no thread outlives the test."""

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


class Handler(BaseHTTPRequestHandler):
    site: Site
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the test output clean

    def _dispatch(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        self.site.seen.append(
            Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        route = self.site.routes.get(path)
        if route is None:
            send(self, 404, b"no such page", "text/plain")
            return
        route(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch


def send(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    content_type: str | None = "text/html; charset=utf-8",
    *,
    headers: dict[str, str] | None = None,
    compress: bool = False,
) -> None:
    """Write one complete response."""
    if compress:
        body = gzip.compress(body)
    handler.send_response(status)
    if content_type is not None:
        handler.send_header("Content-Type", content_type)
    if compress:
        handler.send_header("Content-Encoding", "gzip")
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


def page(body: bytes | str, content_type: str | None = "text/html; charset=utf-8") -> Route:
    """A route answering 200 with ``body``."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return lambda h: send(h, 200, raw, content_type)


def redirect(location: str, status: int = 302) -> Route:
    return lambda h: send(h, status, b"", None, headers={"Location": location})


@contextmanager
def serve(tls: ssl.SSLContext | None = None) -> Iterator[Site]:
    """Run a server on a free port for the duration of the block (HTTPS with ``tls``)."""
    site = Site()
    handler = type("BoundHandler", (Handler,), {"site": site})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:  # the handshake runs in the handler's thread, on its first read
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


async def run_tool(tool: Any, args: dict[str, Any], **agent_options: Any) -> ToolResultEntry:
    """Run an agent whose scripted model calls ``tool`` once; return the call's result."""
    provider = ScriptedProvider([call(tool.name, args), text("done")])
    agent = Agent(name="a", model=provider, tools=[tool], **agent_options)
    result = await Runner.run(agent, "go")
    (entry,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    return entry
