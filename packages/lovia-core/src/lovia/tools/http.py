"""``http_request``: a general HTTP client tool, bounded and guarded.

The response comes back as one text: the status line, the final URL after redirects, the
response headers (``set-cookie`` left out), a blank line, then the body. JSON is
re-serialised compactly, other text passes through (charset from the header, then a
``<meta>`` tag, then UTF-8), and a binary body is described, not shown. Downloads stop at
1 MiB and the shown body at ``max_chars``; both cuts are stated.

Non-public addresses are refused (``lovia.tools._guard``); the ready-made tool has no
constructor, so ``LOVIA_HTTP_ALLOW_PRIVATE=1`` is its switch. Every method but GET, HEAD and
OPTIONS needs approval (``writes_need_approval``), so a write never happens unseen.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidToolArguments
from ._args import int_arg, number_arg, object_schema, optional_text_arg, text_arg
from ._fetch import DEFAULT_MAX_BYTES, Fetched, decode_text, fetch, is_html, is_textual
from .base import Tool

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = ["http_request", "writes_need_approval"]

_METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")
_READ_ONLY = frozenset(("GET", "HEAD", "OPTIONS"))
_HIDDEN_HEADERS = frozenset(("set-cookie", "set-cookie2"))
_FRAMING_HEADERS = frozenset(("content-length", "transfer-encoding"))


def writes_need_approval(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
    """``needs_approval`` predicate: every method except GET, HEAD and OPTIONS asks first."""
    method = args.get("method") or "GET"
    return not (isinstance(method, str) and method.upper() in _READ_ONLY)


async def _invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    url = text_arg(args, "url")
    method = text_arg(args, "method", "GET").upper()
    if method not in _METHODS:
        raise InvalidToolArguments(f"method must be one of {', '.join(_METHODS)}, got {method!r}")
    headers = args.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise InvalidToolArguments("headers must be an object of string values")
    framing = sorted(k for k in headers if k.lower() in _FRAMING_HEADERS)
    if framing:  # a wrong one makes the HTTP library fail mid-request
        raise InvalidToolArguments(
            f"headers must not set {', '.join(framing)}: the tool sets it from the body"
        )
    body = optional_text_arg(args, "body")
    timeout = number_arg(args, "timeout", 30.0, 1.0, 120.0)
    max_chars = int_arg(args, "max_chars", 20_000, 100, 200_000)
    fetched = await fetch(
        url,
        method=method,
        headers=headers,
        body=None if body is None else body.encode("utf-8"),
        timeout=timeout,
    )
    return _render(fetched, method, max_chars)


def _render(fetched: Fetched, method: str, max_chars: int) -> str:
    lines = [f"HTTP {fetched.status} {fetched.reason}".rstrip(), f"URL: {fetched.url}"]
    lines += [f"{k}: {v}" for k, v in fetched.headers if k.lower() not in _HIDDEN_HEADERS]
    text = _body_text(fetched, method)
    if len(text) > max_chars:
        text = f"{text[:max_chars]}\n\n[truncated: showing {max_chars} of {len(text)} characters]"
    if fetched.size_capped:
        text += f"\n\n[download stopped at the {DEFAULT_MAX_BYTES}-byte cap; the body is longer]"
    return "\n".join(lines) + "\n\n" + text


def _body_text(fetched: Fetched, method: str) -> str:
    body = fetched.body
    if not body:
        return "(empty body)"
    if not is_textual(fetched.media_type, body):
        kind = fetched.media_type or "unknown type"
        return f"[binary body not shown: {kind}, {len(body)} bytes]"
    text = decode_text(body, fetched.charset, html=is_html(fetched.media_type, body))
    if "json" in fetched.media_type or not fetched.media_type:
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text


http_request = Tool(
    name="http_request",
    description=(
        "Send an HTTP request and return the status, final URL, response headers and body. "
        "JSON bodies are compacted, binary bodies are described, long bodies are truncated. "
        "Methods other than GET, HEAD and OPTIONS need approval."
    ),
    parameters=object_schema(
        {
            "url": {"type": "string", "description": "Absolute http(s) URL."},
            "method": {"type": "string", "enum": list(_METHODS), "default": "GET"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Request headers (a User-Agent here replaces the default).",
            },
            "body": {"type": "string", "description": "Request body, sent as UTF-8."},
            "timeout": {
                "type": "number",
                "minimum": 1,
                "maximum": 120,
                "default": 30,
                "description": "Seconds for the whole exchange.",
            },
            "max_chars": {
                "type": "integer",
                "minimum": 100,
                "maximum": 200_000,
                "default": 20_000,
                "description": "Characters of body to show.",
            },
        },
        ["url"],
    ),
    invoke=_invoke,
    needs_approval=writes_need_approval,
)
"""The ready-made HTTP tool (approval on writes, 1 MiB download cap, address guard on)."""
