"""MCP server configurations: frozen, keyword-only values that say how to reach a server.

A config holds no connection. ``server.session()`` returns a fresh, unopened
``MCPConnection`` (use it as ``async with server.session() as conn``); the ``MCP`` plugin
opens one per run from a config, or uses a live connection it was handed (and then never
closes it).

The shared options shape the tools a server contributes: ``include_tools``/``exclude_tools``
match the server's raw tool names; ``name`` prefixes them as ``name__tool``; ``needs_approval``,
``retries``, ``max_output_chars`` and ``result_renderer`` reach each tool; ``timeout`` is the
per-call deadline (the call is cancelled on the server when it passes); ``connect_timeout``
bounds a start or a reconnection; ``auto_reconnect`` reopens a lost connection and retries
the call once (connection errors only, so a call is at-least-once); ``defer`` hides the
server's tools behind ``search_mcp_tools``/``call_mcp_tool``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union, cast

from lovia.exceptions import UserError
from lovia.tools.base import ApprovalPredicate

if TYPE_CHECKING:
    from .connection import MCPConnection

__all__ = ["MCPResultRenderer", "MCPServerConfig", "MCPServerStdio", "MCPServerStreamableHTTP"]

MCPResultRenderer = Callable[[Any], str]
"""Renders a raw ``mcp`` ``CallToolResult`` into the string the model sees."""

_PREFIX = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


@dataclass(frozen=True, kw_only=True)
class _ServerOptions:
    name: str | None = None
    """Tool-name prefix (``name__tool``) and the label in logs and errors."""
    include_tools: Sequence[str] | None = None
    """Only these raw tool names (``None``: all)."""
    exclude_tools: Sequence[str] = ()
    """Never these raw tool names."""
    needs_approval: bool | ApprovalPredicate = False
    """Gate every tool of this server on a human decision (or a predicate over args, ctx)."""
    retries: int | None = None
    """Extra attempts per call on failure; ``None`` inherits the agent's default."""
    timeout: float | None = 60.0
    """Per-call deadline in seconds; the call is cancelled when it passes (``None``: none)."""
    connect_timeout: float = 30.0
    """Deadline for one start or reconnection, handshake and tool listing included."""
    max_output_chars: int | None = None
    """Cap on a rendered result; ``None`` inherits the agent's cap."""
    result_renderer: MCPResultRenderer | None = None
    """Receives the raw ``CallToolResult``; ``None`` uses ``render_mcp_content``."""
    auto_reconnect: bool = True
    """Reopen a lost connection (process died, session expired) and retry the call once."""
    close_after_run: bool = True
    """``False`` keeps the plugin's connection open across runs (close it with ``MCP.aclose``)."""
    defer: bool = False
    """Keep the tools out of the tool list; reach them through search/call tools."""

    def __post_init__(self) -> None:
        if self.name is not None and not _PREFIX.match(self.name):
            raise UserError(
                f"invalid MCP server name {self.name!r}",
                hint="use 1-40 characters from A-Z, a-z, 0-9, '_' and '-' (it prefixes tool names)",
            )
        if isinstance(self.include_tools, str) or isinstance(self.exclude_tools, str):
            raise UserError(
                "include_tools/exclude_tools take a list of tool names, not a string",
                hint="wrap a single name in a list: include_tools=['echo']",
            )
        if self.retries is not None and self.retries < 0:
            raise UserError(f"retries must be >= 0, got {self.retries!r}", hint="use 0 or more")
        for option in ("timeout", "connect_timeout"):
            value = getattr(self, option)
            if value is not None and value <= 0:
                raise UserError(f"{option} must be > 0 seconds, got {value!r}", hint="use None")
        if self.max_output_chars is not None and self.max_output_chars <= 0:
            raise UserError(
                f"max_output_chars must be > 0, got {self.max_output_chars!r}",
                hint="use None to inherit the agent's cap",
            )

    @property
    def label(self) -> str:
        """How logs, events and errors name this server."""
        return self.name or self._default_label()

    def _default_label(self) -> str:
        raise NotImplementedError

    def session(self) -> MCPConnection:
        """A new, unopened connection to this server (``async with server.session() as c``)."""
        from .connection import MCPConnection

        return MCPConnection(cast("MCPServerConfig", self))  # only subclasses are built


@dataclass(frozen=True, kw_only=True)
class MCPServerStdio(_ServerOptions):
    """A server started as a subprocess and spoken to over its stdin/stdout.

    ``env`` is merged over the SDK's safe default environment. The server's stderr is
    captured, and its tail is shown in the error when the server fails to start or dies.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    stderr_tail_chars: int = field(default=4000)
    """How much of the server's stderr an error quotes."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.command:
            raise UserError("MCPServerStdio needs a command", hint="e.g. command='uvx'")
        if isinstance(self.args, str):
            raise UserError(
                "MCPServerStdio(args=) takes a list of arguments, not a string",
                hint="split it: args=['mcp-server-time', '--local-timezone', 'UTC']",
            )

    def _default_label(self) -> str:
        # "python server.py", "uvx mcp-server-time": short, yet tells servers apart.
        first = next((a for a in self.args if not a.startswith("-")), None)
        words = [self.command, first] if first else [self.command]
        return " ".join(os.path.basename(w.rstrip("/")) or w for w in words)


@dataclass(frozen=True, kw_only=True)
class MCPServerStreamableHTTP(_ServerOptions):
    """A server reached over streamable HTTP at ``url`` (for example ``http://host/mcp``)."""

    url: str
    headers: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.url.startswith(("http://", "https://")):
            raise UserError(
                f"MCPServerStreamableHTTP needs an http(s) URL, got {self.url!r}",
                hint="e.g. url='http://127.0.0.1:3001/mcp'",
            )

    def _default_label(self) -> str:
        return self.url


MCPServerConfig = Union[MCPServerStdio, MCPServerStreamableHTTP]
"""Either transport's configuration."""
