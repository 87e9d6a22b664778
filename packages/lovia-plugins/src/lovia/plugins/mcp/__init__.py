"""MCP: tools from Model Context Protocol servers (extra ``lovia-plugins[mcp]``).

The ``mcp`` package is imported only when a connection opens, so importing this module
is cheap and works without it. See docs/mcp.md.
"""

from .config import MCPResultRenderer, MCPServerConfig, MCPServerStdio, MCPServerStreamableHTTP
from .connection import MCPConnection, MCPServerStateChanged, ServerState, StateListener
from .plugin import MCP, MCPServerLike
from .render import MCPToolResult, normalize_schema, render_mcp_content

__all__ = [
    "MCP",
    "MCPConnection",
    "MCPResultRenderer",
    "MCPServerConfig",
    "MCPServerLike",
    "MCPServerStateChanged",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "MCPToolResult",
    "ServerState",
    "StateListener",
    "normalize_schema",
    "render_mcp_content",
]
