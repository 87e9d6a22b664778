"""MCP tools as lovia ``Tool``s: filters, ``name__tool`` prefixes, per-server policy, and
the deferred pair ``search_mcp_tools`` / ``call_mcp_tool``.

A server's options reach each of its tools: ``needs_approval``, ``retries`` and
``max_output_chars`` become the ``Tool``'s own fields (the run applies them); the deadline
(``timeout``) is enforced by the connection, which cancels the call on the server. Deferred
tools are dispatched through ``run_tool`` with the same ``Tool`` value, so their approval
predicate, retries, renderer and cap apply exactly as if they had been exposed.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lovia.exceptions import InvalidToolArguments, ToolError, UserError
from lovia.tools.base import Tool, run_tool

from .render import normalize_schema, render_mcp_content

if TYPE_CHECKING:
    from lovia.run_context import RunContext

    from .config import MCPServerConfig
    from .connection import MCPConnection

__all__ = ["DeferredCatalog", "build_tools", "check_unique", "exposed_name", "selected"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
_SEARCH_LIMIT = 8
_DESCRIPTION_CHARS = 300


def exposed_name(server: MCPServerConfig, raw: str) -> str:
    """The tool name the model sees: ``prefix__raw`` when the server is named.

    Characters providers refuse become ``_`` and the name is capped at 64 characters.
    """
    name = f"{server.name}__{raw}" if server.name else raw
    return _UNSAFE.sub("_", name)[:_MAX_NAME]


def selected(server: MCPServerConfig, listing: Iterable[Any]) -> list[Any]:
    """The listed tools that pass ``include_tools``/``exclude_tools`` (raw names)."""
    include = None if server.include_tools is None else set(server.include_tools)
    exclude = set(server.exclude_tools)
    return [t for t in listing if (include is None or t.name in include) and t.name not in exclude]


def build_tools(conn: MCPConnection, listing: Iterable[Any]) -> list[Tool]:
    """One lovia ``Tool`` per selected MCP tool of ``conn``'s server."""
    server = conn.server
    return [_tool(conn, server, t) for t in selected(server, listing)]


def _tool(conn: MCPConnection, server: MCPServerConfig, spec: Any) -> Tool:
    raw = spec.name
    renderer = server.result_renderer or render_mcp_content

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        result = await conn.call_tool(raw, args)
        return renderer(result)

    description = (spec.description or spec.title or f"MCP tool {raw}").strip()
    return Tool(
        name=exposed_name(server, raw),
        description=description,
        parameters=normalize_schema(spec.input_schema),
        invoke=invoke,
        needs_approval=server.needs_approval,
        retries=server.retries,
        max_output_chars=server.max_output_chars,
    )


def check_unique(tools: Sequence[Tool], where: str) -> None:
    """Raise ``UserError`` when two tools share a name."""
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise UserError(
                f"two MCP tools are named {tool.name!r} ({where})",
                hint="give each server a distinct name= (it prefixes its tools as name__tool), "
                "or filter one out with exclude_tools",
            )
        seen.add(tool.name)


@dataclass(frozen=True, slots=True)
class _Entry:
    tool: Tool
    server: str


class DeferredCatalog:
    """The tools of deferred servers, reached through one search tool and one call tool."""

    def __init__(self, entries: Sequence[tuple[Tool, str]]) -> None:
        check_unique([t for t, _ in entries], "among deferred servers")
        self._entries = {t.name: _Entry(t, server) for t, server in entries}

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def servers(self) -> list[str]:
        return sorted({e.server for e in self._entries.values()})

    def instructions(self) -> str:
        return (
            f"More tools from MCP servers ({', '.join(self.servers)}) are available but not "
            "listed: find them with search_mcp_tools(query), then run one with "
            "call_mcp_tool(name, arguments)."
        )

    def tools(self) -> tuple[Tool, Tool]:
        return self._search_tool(), self._call_tool()

    # -- search -----------------------------------------------------------------------

    def search(self, query: str) -> str:
        words = [w for w in re.split(r"[\s_\-.]+", query.lower()) if w]
        if not words:
            raise InvalidToolArguments("`query` must name what the tool should do")
        scored: list[tuple[int, str]] = []
        for name, entry in self._entries.items():
            score = _score(query.lower(), words, name.lower(), entry.tool.description.lower())
            if score:
                scored.append((score, name))
        if not scored:
            return (
                f"No MCP tool matches {query!r}. Try a shorter or different word; the deferred "
                f"servers are: {', '.join(self.servers)}."
            )
        scored.sort(key=lambda item: (-item[0], item[1]))
        lines = [self._describe(self._entries[name].tool) for _, name in scored[:_SEARCH_LIMIT]]
        more = len(scored) - _SEARCH_LIMIT
        if more > 0:
            lines.append(f"({more} more match; refine the query to see them)")
        return "\n".join(lines)

    @staticmethod
    def _describe(tool: Tool) -> str:
        description = " ".join(tool.description.split())[:_DESCRIPTION_CHARS]
        schema = json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))
        return f"- {tool.name}: {description}\n  arguments: {schema}"

    def _search_tool(self) -> Tool:
        async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            query = args.get("query")
            if not isinstance(query, str):
                raise InvalidToolArguments("`query` is required and must be a string")
            return self.search(query)

        return Tool(
            name="search_mcp_tools",
            description="Search the deferred MCP tools by name or purpose; returns names, "
            "descriptions and argument schemas to use with call_mcp_tool.",
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for."}},
                "required": ["query"],
            },
            invoke=invoke,
        )

    # -- call -------------------------------------------------------------------------

    def _target(self, args: dict[str, Any]) -> tuple[Tool, dict[str, Any]]:
        name = args.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidToolArguments("`name` is required: a tool name from search_mcp_tools")
        entry = self._entries.get(name)
        if entry is None:
            near = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(near)}?" if near else ""
            raise InvalidToolArguments(
                f"no deferred MCP tool is named {name!r}.{hint} Use search_mcp_tools to find one."
            )
        arguments = args.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidToolArguments("`arguments` must be a JSON object")
        return entry.tool, arguments

    def _call_tool(self) -> Tool:
        async def needs_approval(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
            try:
                tool, arguments = self._target(args)
            except InvalidToolArguments:
                return False  # the call itself reports the bad name
            gate = tool.needs_approval
            if not callable(gate):
                return bool(gate)
            verdict = gate(arguments, ctx)
            return bool(await verdict) if inspect.isawaitable(verdict) else bool(verdict)

        async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            tool, arguments = self._target(args)
            agent = ctx.agent
            outcome = await run_tool(
                tool,
                arguments,
                ctx,
                default_retries=agent.default_tool_retries,
                max_output_chars=agent.max_tool_output_chars,
            )
            if outcome.is_error:
                # Already "Tool error: ..."; strip it so the outer layer does not say it twice.
                raise ToolError(outcome.output.removeprefix("Tool error: "))
            return outcome.output

        return Tool(
            name="call_mcp_tool",
            description="Run a deferred MCP tool found with search_mcp_tools.",
            parameters={
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's exact name."},
                    "arguments": {"type": "object", "description": "The tool's arguments."},
                },
                "required": ["name"],
            },
            invoke=invoke,
            needs_approval=needs_approval,
            retries=0,  # the target's own retries run inside
        )


def _score(query: str, words: list[str], name: str, description: str) -> int:
    if name == query or name.endswith("__" + query):
        return 100
    score = 0
    for word in words:
        if word in name:
            score += 10
        elif word in description:
            score += 3
    return score
