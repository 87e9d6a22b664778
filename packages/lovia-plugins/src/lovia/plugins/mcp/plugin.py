"""``MCP``: tools from Model Context Protocol servers, as a plugin.

``setup`` (once per run) opens the connections concurrently, lists their tools and builds
the tool set; ``aclose`` closes the connections this run opened. Servers are independent: one
that fails to start is logged (with its stderr), reported in the system prompt and left
out, and the run goes on with the others. When this plugin listed that server in an earlier
run, those tools stay offered, and calling one tries to reconnect and otherwise returns a
clear tool error, so the model is told rather than silently missing a tool.

Ownership: a config makes the run own its connection (opened and closed per run, or kept on
the plugin across runs with ``close_after_run=False`` until ``MCP.aclose()``); a live
``MCPConnection`` passed in is used as is and never closed by the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

from lovia.exceptions import UserError
from lovia.plugin import PluginInstance

from .config import MCPServerStdio, MCPServerStreamableHTTP
from .connection import MCPConnection, StateListener
from .tools import DeferredCatalog, build_tools, check_unique

if TYPE_CHECKING:
    from lovia.run_context import RunContext
    from lovia.tools.base import Tool

__all__ = ["MCP", "MCPServerLike"]

_log = logging.getLogger("lovia.plugins.mcp")

MCPServerLike = Union[MCPServerStdio, MCPServerStreamableHTTP, MCPConnection]
"""What ``MCP(...)`` takes: a server config, or a live connection."""


class MCP:
    """Tools from MCP servers: ``Agent(plugins=[MCP(MCPServerStdio(command=...), ...)])``.

    ``on_state`` is told about every server state change (starting, ready, reconnecting,
    failed, closed) of the connections this plugin opens.
    """

    def __init__(
        self, *servers: MCPServerLike, on_state: StateListener | None = None, name: str = "mcp"
    ) -> None:
        if not servers:
            raise UserError("MCP() needs at least one server", hint="MCP(MCPServerStdio(...))")
        for server in servers:
            if not isinstance(server, (MCPServerStdio, MCPServerStreamableHTTP, MCPConnection)):
                raise UserError(
                    f"MCP() takes server configs or MCPConnections, got {type(server).__name__}",
                    hint="use MCPServerStdio(command=...) or MCPServerStreamableHTTP(url=...)",
                )
        self.name = name
        self.servers: tuple[MCPServerLike, ...] = servers
        self._on_state = on_state
        self._kept: dict[int, MCPConnection] = {}  # close_after_run=False, by server index
        self._listings: dict[int, tuple[Any, ...]] = {}  # last good listing, by server index
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"MCP({', '.join(self._label(s) for s in self.servers)})"

    @staticmethod
    def _label(server: MCPServerLike) -> str:
        return server.server.label if isinstance(server, MCPConnection) else server.label

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        async with self._lock:  # the kept connections and listings are cross-run state
            connections, owned = self._connections()
        try:
            # Every listing settles before anything is closed, so no start races a close.
            settled = await asyncio.gather(
                *(self._listing(i, c) for i, c in enumerate(connections)), return_exceptions=True
            )
            for outcome in settled:
                if isinstance(outcome, BaseException):
                    raise outcome
            tools, instructions = self._assemble(connections, settled)  # type: ignore[arg-type]
        except BaseException:
            await _close_all(owned)  # only what this run opened
            raise

        async def aclose() -> None:
            await _close_all(owned)

        return PluginInstance(tools=tools, instructions=instructions, aclose=aclose)

    async def aclose(self) -> None:
        """Close the connections kept across runs (``close_after_run=False``)."""
        async with self._lock:
            kept, self._kept = list(self._kept.values()), {}
        await _close_all(kept)

    # -- pieces -------------------------------------------------------------------------

    def _connections(self) -> tuple[list[MCPConnection], list[MCPConnection]]:
        connections: list[MCPConnection] = []
        owned: list[MCPConnection] = []
        for i, server in enumerate(self.servers):
            if isinstance(server, MCPConnection):
                connections.append(server)
                continue
            if not server.close_after_run:
                conn = self._kept.get(i)
                if conn is None:
                    conn = self._kept[i] = MCPConnection(server, on_state=self._on_state)
                connections.append(conn)
                continue
            conn = MCPConnection(server, on_state=self._on_state)
            connections.append(conn)
            owned.append(conn)
        return connections, owned

    async def _listing(self, index: int, conn: MCPConnection) -> tuple[Any, ...] | str:
        """The server's tools, or why it is unavailable (a string) when it has none known."""
        try:
            listing = await conn.tools()
        except UserError:
            raise  # the mcp package is missing: a usage problem, not a broken server
        except Exception as exc:  # noqa: BLE001 - one broken server never blocks the run
            _log.warning("mcp server %r is unavailable for this run: %s", conn.server.label, exc)
            known = self._listings.get(index)
            return known if known is not None else str(exc).split("\n", 1)[0]
        self._listings[index] = listing
        return listing

    def _assemble(
        self, connections: Sequence[MCPConnection], listings: Sequence[tuple[Any, ...] | str]
    ) -> tuple[tuple[Tool, ...], str]:
        exposed: list[Tool] = []
        deferred: list[tuple[Tool, str]] = []
        down: list[str] = []
        for conn, listing in zip(connections, listings, strict=True):
            if isinstance(listing, str):
                down.append(f"- {conn.server.label}: {listing}")
                continue
            tools = build_tools(conn, listing)
            if conn.server.defer:
                deferred.extend((t, conn.server.label) for t in tools)
            else:
                exposed.extend(tools)
        lines: list[str] = []
        if deferred:
            catalog = DeferredCatalog(deferred)
            exposed.extend(catalog.tools())
            lines.append(catalog.instructions())
        check_unique(exposed, "across the servers of one MCP plugin")
        if down:
            lines.append("These MCP servers are unavailable in this run:\n" + "\n".join(down))
        return tuple(exposed), "\n\n".join(lines)


async def _close_all(connections: Sequence[MCPConnection]) -> None:
    results = await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
    for conn, result in zip(connections, results, strict=True):
        if isinstance(result, Exception):
            _log.warning("closing mcp server %r failed: %s", conn.server.label, result)
