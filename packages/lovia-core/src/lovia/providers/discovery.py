"""Context-window discovery: ask an endpoint's ``/models`` for the model's window.

* Payload shapes: vLLM ``max_model_len``, Groq ``context_window``, Anthropic
  ``max_input_tokens``, Together ``context_length``, OpenRouter ``top_provider.context_length``.
  Model ids match exactly first, then without a vendor prefix (``org/``) or a ``:variant``.
* Answers, misses included, are memoised per ``(endpoint, model)`` for the process, so they
  outlive the provider that probed. Concurrent probes for the same key share one request.
* The official OpenAI API is never asked (its ``/models`` has no windows).
* The probe fails open (``None``) within its own short deadline for the whole exchange
  (``ProviderTimeouts.probe``, 2 s by default, ``LOVIA_PROVIDER_PROBE_TIMEOUT``), so a hung
  endpoint costs the run that much before its first request, and follows redirects.
* ``table_window`` is the bundled fallback, keyed by host: a foreign host gets nothing, and
  the longest matching model prefix wins.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from typing import Any

__all__ = [
    "clear_discovery_cache",
    "discover_window",
    "host_of",
    "is_official_openai_host",
    "table_window",
    "window_from_models_payload",
]

_log = logging.getLogger("lovia.providers")


def host_of(base_url: str) -> str:
    """The lower-cased host of ``base_url`` ("" when it has none)."""
    from urllib.parse import urlsplit

    return (urlsplit(base_url).hostname or "").lower()


_memo: dict[tuple[str, str], int | None] = {}
_inflight: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Task[int | None]]
] = weakref.WeakKeyDictionary()

_TABLES: dict[str, dict[str, int]] = {
    "api.openai.com": {
        "gpt-3.5-turbo": 16_385,
        "gpt-4": 8_192,
        "gpt-4-turbo": 128_000,
        "gpt-4o": 128_000,
        "gpt-4.1": 1_047_576,
        "gpt-5": 400_000,
        "o1": 200_000,
        "o3": 200_000,
        "o4-mini": 200_000,
    },
    "api.anthropic.com": {"claude-": 200_000},
    "api.deepseek.com": {"deepseek-": 128_000},
    "api.mistral.ai": {"mistral-large": 128_000, "mistral-small": 128_000, "codestral": 256_000},
}


def is_official_openai_host(host: str) -> bool:
    """``api.openai.com`` or one of its regional hosts (``eu.api.openai.com``)."""
    return host == "api.openai.com" or host.endswith(".api.openai.com")


def table_window(host: str, model: str) -> int | None:
    """The bundled window for ``model`` on ``host`` (longest prefix wins), or ``None``."""
    if is_official_openai_host(host):
        host = "api.openai.com"
    table = _TABLES.get(host)
    if not table:
        return None
    name = model.lower()
    best = max((p for p in table if name.startswith(p)), key=len, default=None)
    return table[best] if best is not None else None


def _normalise(model_id: str) -> str:
    return model_id.lower().rsplit("/", 1)[-1].split(":", 1)[0]


def _window_of(item: Mapping[str, Any]) -> int | None:
    for key in ("max_model_len", "context_window", "max_input_tokens", "context_length"):
        value = item.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    top = item.get("top_provider")
    if isinstance(top, Mapping):
        value = top.get("context_length")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def window_from_models_payload(payload: Any, model: str) -> int | None:
    """The window stated for ``model`` in a ``/models`` (or ``/models/{id}``) payload."""
    if isinstance(payload, Mapping) and isinstance(payload.get("data"), list):
        items = payload["data"]
    elif isinstance(payload, list):
        items = payload
    elif isinstance(payload, Mapping):
        items = [payload]
    else:
        return None
    entries = [i for i in items if isinstance(i, Mapping) and isinstance(i.get("id"), str)]
    for item in entries:
        if item["id"] == model:
            return _window_of(item)
    wanted = _normalise(model)
    for item in entries:
        if _normalise(item["id"]) == wanted:
            window = _window_of(item)
            if window is not None:
                return window
    return None


async def _ask(
    models_url: str, model: str, headers: Mapping[str, str], seconds: float
) -> int | None:
    from ..http_config import make_async_client, prepare_http

    await asyncio.to_thread(prepare_http)  # httpx's import and TLS setup block
    async with make_async_client(timeout=seconds, follow_redirects=True) as client:
        response = await client.get(models_url, headers=dict(headers))
        if response.status_code != 200:
            return None
        return window_from_models_payload(response.json(), model)


async def _probe(
    models_url: str, model: str, headers: Mapping[str, str], seconds: float
) -> int | None:
    try:
        return await asyncio.wait_for(_ask(models_url, model, headers, seconds), seconds)
    except Exception:  # noqa: BLE001 - fail-open boundary: discovery must never fail a run
        _log.debug("context-window probe of %s failed", models_url, exc_info=True)
        return None


async def discover_window(
    base_url: str, model: str, headers: Mapping[str, str], *, timeout: float | None = None
) -> int | None:
    """The window ``base_url``'s ``/models`` states for ``model`` (memoised, shared, fail-open).

    ``timeout`` bounds the whole probe (default: ``resolve_timeouts().probe``).
    """
    from ..http_config import resolve_timeouts

    endpoint = base_url.rstrip("/")
    if is_official_openai_host(host_of(endpoint)):
        return None
    key = (endpoint, model)
    if key in _memo:
        return _memo[key]
    loop = asyncio.get_running_loop()
    pending = _inflight.setdefault(loop, {})
    task = pending.get(key)
    if task is None:
        seconds = resolve_timeouts().probe if timeout is None else timeout
        task = loop.create_task(_probe(endpoint + "/models", model, headers, seconds))
        pending[key] = task
        task.add_done_callback(lambda _t: pending.pop(key, None))
    # shield: one caller's cancellation must not cancel the probe the others wait on
    window = await asyncio.shield(task)
    _memo[key] = window
    return window


def clear_discovery_cache() -> None:
    """Forget memoised windows (tests)."""
    _memo.clear()
