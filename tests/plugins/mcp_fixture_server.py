"""A small MCP server over stdio whose every answer the MCP tests control.

Run as ``python mcp_fixture_server.py MARKER_DIR`` (stdio), or with ``--http PORT`` appended
to serve streamable HTTP on 127.0.0.1. It lists its tools over three pages (so listing must
paginate), and its tools return each kind of content block. ``slow`` writes
``MARKER_DIR/started``, sleeps until cancelled, then writes ``MARKER_DIR/cancelled`` (proof
that a deadline or a run cancellation really cancelled the call on the server). ``crash``
exits the process (a server dying mid-call). ``count`` appends to ``MARKER_DIR/calls`` (to
count at-least-once retries); ``flaky`` fails its first call. The server prints a line to
stderr on start, which the client's error messages must quote.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

MARKERS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}}
EMPTY = {"type": "object"}
TOOLS = [
    types.Tool(name="echo", description="Echo the text back.", input_schema=OBJECT),
    types.Tool(name="image", description="Return a 300-byte PNG.", input_schema=EMPTY),
    types.Tool(name="audio", description="Return a 2048-byte WAV clip.", input_schema=EMPTY),
    types.Tool(
        name="resource",
        description="Embedded text and blob resources.",
        input_schema=EMPTY,
    ),
    types.Tool(name="link", description="A link to a resource.", input_schema=EMPTY),
    types.Tool(name="fail", description="Report an error result.", input_schema=EMPTY),
    types.Tool(name="boom", description="Answer with a protocol error.", input_schema=EMPTY),
    types.Tool(name="slow", description="Sleep until cancelled.", input_schema=EMPTY),
    types.Tool(name="crash", description="Exit the server process.", input_schema=EMPTY),
    types.Tool(name="count", description="Count calls in a file.", input_schema=EMPTY),
    types.Tool(name="weather.today", description="A dotted name.", input_schema=OBJECT),
    types.Tool(name="flaky", description="Fail once, then succeed.", input_schema=EMPTY),
]
PAGE = 4


def _text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    next_cursor = str(end) if end < len(TOOLS) else None
    return types.ListToolsResult(tools=TOOLS[start:end], next_cursor=next_cursor)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name, args = params.name, params.arguments or {}
    content: list[Any]
    if name in ("echo", "weather.today"):
        content = [_text(f"echo: {args.get('text', '')}")]
    elif name == "image":
        data = base64.b64encode(b"\x89PNG" + b"\0" * 296).decode()
        content = [types.ImageContent(type="image", data=data, mime_type="image/png")]
    elif name == "audio":
        data = base64.b64encode(b"\0" * 2048).decode()
        content = [types.AudioContent(type="audio", data=data, mime_type="audio/wav")]
    elif name == "resource":
        text = types.TextResourceContents(uri="file:///notes.txt", text="inline notes")
        blob = types.BlobResourceContents(
            uri="file:///data.bin",
            mime_type="application/zip",
            blob=base64.b64encode(b"z" * 10).decode(),
        )
        content = [
            types.EmbeddedResource(type="resource", resource=text),
            types.EmbeddedResource(type="resource", resource=blob),
        ]
    elif name == "link":
        content = [types.ResourceLink(type="resource_link", name="readme", uri="file:///README.md")]
    elif name == "fail":
        return types.CallToolResult(content=[_text("disk full")], is_error=True)
    elif name == "boom":
        from mcp.shared.exceptions import MCPError

        raise MCPError(code=types.INVALID_PARAMS, message="boom is not allowed")
    elif name == "slow":
        (MARKERS / "started").write_text("started")
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            (MARKERS / "cancelled").write_text("cancelled")
            raise
        content = []
    elif name == "crash":
        os._exit(3)
    elif name == "flaky":
        marker = MARKERS / "flaky"
        if not marker.exists():
            marker.write_text("failed once")
            raise RuntimeError("flaky failed on its first call")
        content = [_text("recovered")]
    elif name == "count":
        with open(MARKERS / "calls", "a") as f:
            f.write("x")
        content = [_text("counted")]
    else:
        content = [_text(f"unknown tool {name}")]
    return types.CallToolResult(content=content)


async def main() -> None:
    print("fixture server starting", file=sys.stderr, flush=True)
    server = Server("lovia-fixture", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main_http(port: int) -> None:
    """Serve over streamable HTTP on 127.0.0.1:``port`` at ``/mcp``."""
    import uvicorn

    server = Server("lovia-fixture", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[2] == "--http":
        main_http(int(sys.argv[3]))
    else:
        anyio.run(main)
