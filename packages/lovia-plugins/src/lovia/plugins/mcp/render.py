"""How an MCP tool result becomes the text the model sees, and how schemas are tidied.

Text passes through; an embedded text resource is inlined; images, audio and binary
resources become size placeholders (base64 never reaches the model); resource links become
``[resource link: uri]``. A result with ``isError`` renders as ``[tool error] ...``: the server
answered, so it is a result the model reads, not an exception.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MCPToolResult", "normalize_schema", "render_mcp_content"]


@dataclass(frozen=True, slots=True)
class MCPToolResult:
    """The two fields rendering reads, for results built by hand (an SDK result works too)."""

    content: Sequence[Any] = field(default_factory=tuple)
    """``mcp`` content blocks (text, image, audio, embedded resource, resource link)."""
    is_error: bool = False
    structured_content: Any = None


def render_mcp_content(result: Any) -> str:
    """Render a ``CallToolResult`` (or ``MCPToolResult``) as text (see the module docstring).

    With no content blocks, structured content is rendered as JSON instead.
    """
    blocks = [_render_block(block) for block in (getattr(result, "content", None) or ())]
    text = "\n".join(b for b in blocks if b)
    structured = getattr(result, "structured_content", None)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=str)
    if getattr(result, "is_error", False):
        return f"[tool error] {text or 'the tool reported an error without details'}"
    return text


def _render_block(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_size(_b64_bytes(block.data))}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return text
        mime = getattr(resource, "mime_type", None) or "application/octet-stream"
        blob = getattr(resource, "blob", "") or ""
        return f"[resource: {resource.uri}, {mime}, {_size(_b64_bytes(blob))}]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    return f"[unsupported MCP content: {kind or type(block).__name__}]"


def _b64_bytes(data: str) -> int:
    """The decoded size of base64 ``data``, without decoding it."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def normalize_schema(schema: Any) -> dict[str, Any]:
    """An MCP ``inputSchema`` as a provider-safe arguments schema.

    Always an object schema with ``properties`` (providers reject a bare ``{}`` or a missing
    ``type``); ``$schema`` is dropped (some providers refuse unknown meta keys). The input is
    not modified.
    """
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    out = {k: v for k, v in schema.items() if k != "$schema"}
    if out.get("type") != "object":
        out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    return out
