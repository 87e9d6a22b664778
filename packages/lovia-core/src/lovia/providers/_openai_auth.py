"""The API key rule of the two OpenAI adapters (Chat Completions and Responses).

The key comes from ``api_key=`` or ``OPENAI_API_KEY`` and is sent as a Bearer
``authorization`` header. The official API refuses to start without one, unless
``default_headers`` already authorise; other hosts (local servers) may need none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..exceptions import UserError
from ._http import merge_headers

__all__ = ["openai_headers"]


def openai_headers(
    api_key: str | None,
    default_headers: Mapping[str, str] | None,
    *,
    host: str,
    official: bool,
    missing_key_hint: str,
) -> dict[str, str]:
    """The request headers for ``host``: the Bearer key merged with ``default_headers``.

    An ``api_key=`` argument beats an ``authorization`` in ``default_headers``; a key from
    the environment does not. Raises ``UserError`` (with ``missing_key_hint``) when an
    ``official`` host has no key at all.
    """
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or None
    extra = dict(default_headers or {})
    if official and not key and not any(k.lower() == "authorization" for k in extra):
        raise UserError(f"no API key for {host!r}", hint=missing_key_hint)
    base_headers = {"authorization": f"Bearer {key}"} if key else {}
    protected = ("authorization",) if api_key is not None else ()
    return merge_headers(base_headers, extra, protected=protected)
