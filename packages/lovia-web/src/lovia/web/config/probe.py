"""The connection probe: is this endpoint there, does it take this key, does it serve this
model? Used by ``lovia web --check`` and ``POST /api/config/test``.

``validate_connection`` asks the endpoint's model list with the flavour's own auth headers
(``Authorization: Bearer`` for OpenAI-compatible servers, ``x-api-key`` plus
``anthropic-version`` for Anthropic's), and, when the list is missing (404/405: some servers
have none), sends the smallest completion instead. The answer is classified: ``ok``,
``auth`` (401/403), ``wrong_path`` (nothing answers there), ``unreachable`` (no connection),
``error`` (the server failed). A model the list does not name is reachable with a note and
close suggestions; a window the list states is adopted for the answer only, never stored,
and never over a configured one.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Literal

from lovia.providers.discovery import window_from_models_payload
from pydantic import BaseModel

from .schema import Connection

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ProbeResult",
    "probe_headers",
    "unlisted_model_note",
    "validate_connection",
]

ProbeStatus = Literal["ok", "auth", "wrong_path", "unreachable", "error"]
_MAX_LISTED = 200
_ANTHROPIC_VERSION = "2023-06-01"


class ProbeResult(BaseModel):
    """What the probe found; ``ok`` is true only for ``status == "ok"``."""

    status: ProbeStatus
    ok: bool
    message: str
    hint: str | None = None
    http_status: int | None = None
    note: str | None = None
    """Set when the endpoint does not list the model."""
    suggestions: list[str] = []
    context_window: int | None = None
    """The configured window, else the one the endpoint states (not saved)."""
    window_source: Literal["configured", "endpoint"] | None = None


def probe_headers(conn: Connection) -> dict[str, str]:
    """The flavour's auth headers (the configured key, else the flavour's key variable)."""
    key = conn.api_key or conn.env_key
    if conn.flavor == "anthropic":
        headers = {"anthropic-version": _ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers
    return {"authorization": f"Bearer {key}"} if key else {}


def _norm(model_id: str) -> str:
    return model_id.lower().rsplit("/", 1)[-1]


def unlisted_model_note(model: str, listed: list[str]) -> tuple[str | None, list[str]]:
    """A note when ``listed`` (non-empty) lacks ``model``, with up to three close names."""
    if not listed or model in listed or _norm(model) in {_norm(m) for m in listed}:
        return None, []
    suggestions = difflib.get_close_matches(model, listed, n=3, cutoff=0.4)
    note = f"the endpoint does not list model {model!r} among its {len(listed)} models"
    if suggestions:
        note += "; did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
    return note, suggestions


def _urls(conn: Connection) -> tuple[str, str, dict[str, Any]]:
    ping = [{"role": "user", "content": "ping"}]
    if conn.flavor == "anthropic":
        root = conn.base_url + "/v1"
        body = {"model": conn.model, "max_tokens": 1, "messages": ping}
        return root + "/models", root + "/messages", body
    body = {"model": conn.model, "max_tokens": 1, "messages": ping}
    return conn.base_url + "/models", conn.base_url + "/chat/completions", body


def _result(status: ProbeStatus, message: str, **fields: Any) -> ProbeResult:
    return ProbeResult(status=status, ok=status == "ok", message=message, **fields)


def _auth_failure(code: int, conn: Connection) -> ProbeResult:
    key = conn.api_key or conn.env_key
    return _result(
        "auth",
        f"the endpoint refused the {'key' if key else 'request without a key'} (HTTP {code})",
        hint="check the API key" if key else "this endpoint needs an API key",
        http_status=code,
    )


def _window(conn: Connection, payload: Any) -> dict[str, Any]:
    if conn.context_window is not None:
        return {"context_window": conn.context_window, "window_source": "configured"}
    window = window_from_models_payload(payload, conn.model)
    return {"context_window": window, "window_source": "endpoint" if window else None}


def _listed(payload: Any) -> list[str] | None:
    items = payload.get("data") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        return None
    return [i["id"] for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)]


async def validate_connection(
    conn: Connection,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout: float = 10.0,
) -> ProbeResult:
    """Probe ``conn`` (see the module docstring); never raises for what the endpoint does."""
    import httpx

    models_url, chat_url, body = _urls(conn)
    headers = probe_headers(conn)
    where = conn.base_url
    try:
        async with httpx.AsyncClient(
            transport=transport, timeout=timeout, follow_redirects=True, trust_env=False
        ) as client:
            response = await client.get(models_url, headers=headers)
            code = response.status_code
            if code in (401, 403):
                return _auth_failure(code, conn)
            if code == 200:
                try:
                    payload = response.json()
                except ValueError:
                    payload = None
                listed = _listed(payload)
                if listed is None:
                    return _result(
                        "wrong_path",
                        f"{models_url} answered, but not with a model list",
                        hint=_path_hint(conn),
                        http_status=code,
                    )
                note, suggestions = unlisted_model_note(conn.model, listed[:_MAX_LISTED])
                return _result(
                    "ok",
                    f"{where} is reachable",
                    http_status=code,
                    note=note,
                    suggestions=suggestions,
                    **_window(conn, payload),
                )
            if code not in (404, 405):
                return _server_error(code, where)
            # No model list here: the smallest completion tells the path apart.
            response = await client.post(chat_url, headers=headers, json=body)
    except httpx.TransportError as exc:
        return _result(
            "unreachable",
            f"cannot reach {where}: {type(exc).__name__}",
            hint="check the URL and that the server is running",
        )
    code = response.status_code
    if code in (401, 403):
        return _auth_failure(code, conn)
    if code in (404, 405):
        if "model" in response.text.lower() and _is_json(response):
            return _result(
                "ok",
                f"{where} is reachable",
                http_status=code,
                note=f"the endpoint does not know model {conn.model!r}",
            )
        return _result(
            "wrong_path",
            f"nothing answers at {chat_url} (HTTP {code})",
            hint=_path_hint(conn),
            http_status=code,
        )
    if code >= 500:
        return _server_error(code, where)
    window = {"context_window": conn.context_window, "window_source": "configured"}
    return _result(
        "ok", f"{where} is reachable", http_status=code, **(window if conn.context_window else {})
    )


def _is_json(response: httpx.Response) -> bool:
    return "json" in response.headers.get("content-type", "")


def _server_error(code: int, where: str) -> ProbeResult:
    return _result(
        "error",
        f"{where} answered HTTP {code}",
        hint="the server is reachable but failing; retry, or check its logs",
        http_status=code,
    )


def _path_hint(conn: Connection) -> str:
    if conn.flavor == "openai" and not conn.base_url.endswith("/v1"):
        return f"OpenAI-compatible servers usually live under /v1: try {conn.base_url}/v1"
    return "check base_url: it should be the API root (e.g. http://localhost:11434/v1)"
