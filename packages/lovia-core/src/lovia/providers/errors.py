"""Turn HTTP failures into ``ProviderError`` / ``ContextOverflowError``.

The rules the retry policy and the context policy rely on:

* 408, 429, 5xx (and 529), timeouts, disconnects and truncated streams are retryable;
  other 4xx are not.
* ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms`` become ``retry_after``.
* A prompt that did not fit is a ``ContextOverflowError`` (never retryable: the context
  policy gets it). It is recognised from the status and message needles, because gateways
  re-wrap vendor errors: OpenAI's ``context_length_exceeded``, "maximum context length",
  413, Anthropic's "prompt is too long: N tokens > M maximum" and "input length and
  `max_tokens` exceed context limit: N + M > L", xAI's "maximum prompt length is L".
* ``reported_window`` is the smallest number tied to a window phrase; rate-limit numbers
  (tokens per minute) and implausible values are refused.
* ``reply_room`` reads a rejection that states the prompt and the reply budget apart
  (Anthropic's "N + M > L", OpenAI's and vLLM's "N in the messages, M in the completion"):
  when the prompt fits and the room left is worth a reply, the adapter re-sends the call
  once with that smaller budget instead of raising.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from ..exceptions import ContextOverflowError, ProviderError
from ..http_config import ProviderTimeouts

__all__ = [
    "error_event",
    "error_from_response",
    "error_from_transport",
    "error_message_of",
    "is_context_overflow",
    "no_first_byte",
    "note_attempts",
    "parse_retry_after",
    "reply_room",
    "reported_window_of",
    "stream_error",
]

_OVERFLOW_NEEDLES = (
    "context_length_exceeded",
    "maximum context length",
    "model's context length",
    "context length of",
    "context length exceeded",
    "prompt is too long",
    "input is too long",
    "exceeds the context",
    "exceed_context_size",
    "exceeds the available context",
    "context window",
    "too many tokens",
    "reduce the length",
    "input tokens exceed",
    "max_model_len",
    "request_too_large",
    "input token count",
    "`inputs` tokens",
    "`inputs` must have less than",
    "exceed context limit",
    "maximum prompt length",
)
_TRANSIENT_NEEDLES = (
    "overloaded",
    "server_error",
    "rate_limit",
    "timeout",
    "internal",
    "api_error",
    "unavailable",
    "capacity",
    "disconnect",
)
"""Words of an error sent inside a stream, with no status, that a retry can outlast."""
_RATE_LIMIT_NEEDLES = ("rate limit", "rate_limit", "per minute", "per min", "tpm", "rpm", "quota")

# Numbers that state a window: "maximum context length is 8192", "> 200000 maximum",
# "context window of 32768", "n_ctx: 4096", "max_model_len=2048", "limit of 16385 tokens",
# Mistral's "32768 maximum context length", Gemini's "maximum number of tokens allowed
# (1048576)", TGI's "must be <= 4096" / "must have less than 4096 tokens".
_WINDOW_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"maximum context length\s*(?:is|of|:)\s*(\d[\d,]*)",
        r"context length (?:is|of)\s*(?:only\s*)?(\d[\d,]*)",
        r"exceed context limit:\s*\d[\d,]*\s*\+\s*\d[\d,]*\s*>\s*(\d[\d,]*)",
        r"maximum prompt length is\s*(\d[\d,]*)",
        r">\s*(\d[\d,]*)\s*maximum",
        r"maximum (?:of|is)\s*(\d[\d,]*)\s*tokens",
        r"context (?:window|size) (?:is|of)\s*(\d[\d,]*)",
        r"\bn_ctx\"?\s*[:=]\s*(\d+)",
        r"max_model_len\"?\s*[:=]?\s*(\d+)",
        r"limit (?:of|is)\s*(\d[\d,]*)\s*(?:input\s+)?tokens",
        r"model(?:'s)? (?:context )?limit (?:of|is)\s*(\d[\d,]*)",
        r"(\d[\d,]*)\s*maximum context length",
        r"maximum number of tokens allowed\s*\(?(\d[\d,]*)",
        r"`inputs` tokens \+ `max_new_tokens` must be <=\s*(\d[\d,]*)",
        r"must have less than\s*(\d[\d,]*)\s*tokens",
    )
)
# Rejections that state the prompt and the reply budget apart: (prompt, reply, window)
# groups, in the order each wording names them.
_SPLIT_PATTERNS = (
    (  # Anthropic: "input length and `max_tokens` exceed context limit: 190000 + 16384 > 200000"
        re.compile(r"exceed context limit:\s*(\d[\d,]*)\s*\+\s*(\d[\d,]*)\s*>\s*(\d[\d,]*)", re.I),
        (1, 2, 3),
    ),
    (  # OpenAI, vLLM: "maximum context length is 8192 tokens. However, you requested 9000
        # tokens (4000 in the messages, 5000 in the completion)"
        re.compile(
            r"maximum context length is\s*(\d[\d,]*).*?\((\d[\d,]*) in the messages, "
            r"(\d[\d,]*) in the completion\)",
            re.I | re.S,
        ),
        (2, 3, 1),
    ),
    (  # vLLM: "'max_tokens' ... is too large: 1000. This model's maximum context length is
        # 4096 tokens and your request has 3500 input tokens"
        re.compile(
            r"is too large:\s*(\d[\d,]*)\..*?maximum context length is\s*(\d[\d,]*) tokens "
            r"and your request has\s*(\d[\d,]*) input tokens",
            re.I | re.S,
        ),
        (3, 1, 2),
    ),
)
_MIN_REPLY = 1_024
"""A lowered reply budget must be at least this many tokens, or half of what was asked:
less would only truncate the reply, so the context policy shrinks the prompt instead."""
_MIN_WINDOW, _MAX_WINDOW = 256, 20_000_000
_OVERFLOW_HINT = "the prompt is larger than the model's context window; compaction shrinks the view"


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    raw = (lowered.get("retry-after") or "").strip()
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_message_of(body: str) -> str:
    """The vendor's error message from a JSON error body, the title of an HTML error page
    (a proxy's), else the body itself (trimmed)."""
    text = body.strip()
    if text[:1] == "<":
        return _html_summary(text)
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    return _message_in(data) or text[:500]


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_TAG = re.compile(r"<!--.*?-->|<(script|style)\b.*?</\1>|<[^>]*>", re.I | re.S)


def _html_summary(page: str) -> str:
    """What an HTML error page says: its title, else its text, on one line."""
    import html

    found = _TITLE.search(page)
    text = found.group(1) if found else _TAG.sub(" ", page)
    words = " ".join(html.unescape(text).split())
    return f"an HTML page: {words[:300] or 'no text'}"


def _message_in(data: Any) -> str:
    if isinstance(data, list) and len(data) == 1:
        data = data[0]  # Gemini's OpenAI-compatible endpoint wraps its error in a list
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            parts = [str(err[k]) for k in ("message", "code", "type") if err.get(k)]
            if isinstance(err.get("n_ctx"), int):  # llama.cpp states its window here
                parts.append(f"n_ctx: {err['n_ctx']}")
            if parts:
                return " | ".join(parts)
        elif isinstance(err, str):
            return err
        if isinstance(data.get("message"), str):
            return str(data["message"])
        if isinstance(data.get("detail"), str):
            return str(data["detail"])
    return ""


def is_context_overflow(status_code: int | None, message: str) -> bool:
    """Whether a rejection means the prompt did not fit the model's window."""
    if status_code == 429:
        return False
    if status_code == 413:
        return True
    if status_code is not None and status_code not in (400, 422, 500):
        return False
    lowered = message.lower()
    if any(n in lowered for n in _RATE_LIMIT_NEEDLES) and "context" not in lowered:
        return False
    return any(n in lowered for n in _OVERFLOW_NEEDLES)


def reported_window_of(message: str) -> int | None:
    """The window a rejection states (the smallest anchored, plausible number), if any."""
    lowered = message.lower()
    if any(n in lowered for n in ("per minute", "per min", "tokens per", "tpm", "rate limit")):
        return None
    found: list[int] = []
    for pattern in _WINDOW_PATTERNS:
        for match in pattern.finditer(message):
            value = int(match.group(1).replace(",", ""))
            if _MIN_WINDOW <= value <= _MAX_WINDOW:
                found.append(value)
    return min(found) if found else None


def reply_room(message: str) -> int | None:
    """The reply budget that fits when only prompt + reply overflowed, else ``None``.

    ``None`` when the rejection does not state the prompt and the reply apart, when the
    prompt alone does not fit, or when the room left is under both 1,024 tokens and half
    of the budget asked.
    """
    for pattern, (prompt_at, reply_at, window_at) in _SPLIT_PATTERNS:
        match = pattern.search(message)
        if match is None:
            continue
        prompt, reply, window = (
            int(match.group(i).replace(",", "")) for i in (prompt_at, reply_at, window_at)
        )
        room = window - prompt
        useful = room >= _MIN_REPLY or 2 * room >= reply
        return room if 0 < room < reply and useful else None
    return None


_HINTS = {
    400: "the endpoint rejected the request body; check the model name and provider_options",
    401: "check the API key (OPENAI_API_KEY / ANTHROPIC_API_KEY or api_key=)",
    403: "the key is not allowed to use this model or endpoint",
    404: "check the model name and base_url (OpenAI-compatible servers usually end in /v1)",
    408: "the server timed out; the call is retried",
    429: "rate limited; the call is retried after Retry-After",
}


def _hint_for(status: int, vendor: str) -> str:
    if status == 404 and vendor == "anthropic":
        return (
            "check the model name and base_url (the host root, such as "
            "https://api.anthropic.com, or the same with /v1: the adapter appends /v1/messages)"
        )
    if status in _HINTS:
        return _HINTS[status]
    if 300 <= status < 400:
        return "the endpoint redirected; set base_url to the final URL (scheme, host and /v1)"
    if status >= 500:
        return "the provider failed or is overloaded; the call is retried"
    return "see the provider's error message above"


def error_event(data: str, *, vendor: str, model: str) -> ProviderError:
    """The error for an ``event: error`` frame (or llama.cpp's ``error:`` line), whatever its
    data holds: an ``{"error": ...}`` wrapper, a bare error object, or plain text."""
    try:
        payload = json.loads(data)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        payload = {"error": {"message": data.strip()[:500] or "an empty error event"}}
    return stream_error(payload, vendor=vendor, model=model)


def error_from_response(
    status_code: int,
    body: str,
    headers: Mapping[str, str] | None = None,
    *,
    vendor: str,
    model: str,
) -> ProviderError:
    """The error for a non-2xx response."""
    message = error_message_of(body)
    text = f"{vendor} returned HTTP {status_code} for model {model!r}: {message}"
    if is_context_overflow(status_code, message):
        return ContextOverflowError(
            text,
            reported_window=reported_window_of(message),
            vendor=vendor,
            model=model,
            status_code=status_code,
            hint=_OVERFLOW_HINT,
        )
    retryable = status_code in (408, 429) or status_code >= 500
    return ProviderError(
        text,
        vendor=vendor,
        model=model,
        status_code=status_code,
        retryable=retryable,
        retry_after=parse_retry_after(headers) if retryable else None,
        hint=_hint_for(status_code, vendor),
    )


def _status_in(payload: Any) -> int | None:
    """An HTTP status stated inside an error object (``code: 429``, vLLM's ``code: 400``)."""
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    if not isinstance(payload, dict):
        return None
    for holder in (payload.get("error"), payload):
        if isinstance(holder, dict):
            for key in ("code", "status"):
                value = holder.get(key)
                if isinstance(value, str) and value.isdigit():
                    value = int(value)
                if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
                    return value
    return None


def stream_error(payload: Any, *, vendor: str, model: str) -> ProviderError:
    """The error for an ``error`` object sent inside a 200 stream."""
    message = _message_in(payload) or json.dumps(payload)[:500]
    lowered = message.lower()
    if is_context_overflow(None, message):
        return ContextOverflowError(
            f"{vendor} rejected the prompt mid-stream for model {model!r}: {message}",
            reported_window=reported_window_of(message),
            vendor=vendor,
            model=model,
            hint=_OVERFLOW_HINT,
        )
    status = _status_in(payload)
    retryable = (status is not None and (status in (408, 429) or status >= 500)) or any(
        n in lowered for n in _TRANSIENT_NEEDLES
    )
    return ProviderError(
        f"{vendor} sent an error in the stream for model {model!r}: {message}",
        vendor=vendor,
        model=model,
        status_code=status,
        retryable=retryable,
        hint="the provider failed mid-stream; the partial turn is discarded"
        + (" and the call is retried" if retryable else ""),
    )


def no_first_byte(seconds: float, *, vendor: str, model: str) -> ProviderError:
    """The retryable error for a server that took the request and sent nothing back."""
    return ProviderError(
        f"{vendor} sent no response within {seconds:g} s (model {model!r}): the server "
        "accepted the request but did not answer",
        vendor=vendor,
        model=model,
        retryable=True,
        hint="the endpoint is stuck or overloaded; check that it serves requests "
        "(LOVIA_PROVIDER_FIRST_BYTE_TIMEOUT sets this limit); the call is retried",
    )


def error_from_transport(
    exc: Exception, *, vendor: str, model: str, timeouts: ProviderTimeouts | None = None
) -> ProviderError:
    """The error for an httpx transport failure (all retryable but invalid URLs and TLS
    verification failures, which no retry can fix); ``timeouts`` names the limit hit."""
    import httpx

    limits = timeouts or ProviderTimeouts()
    if isinstance(exc, httpx.ConnectTimeout):
        what = f"could not connect within {_applied(exc, 'connect', limits.connect):g} s"
        hint = "check base_url, the network and any proxy; the call is retried"
    elif isinstance(exc, httpx.ReadTimeout):
        what = f"sent nothing for {_applied(exc, 'read', limits.read):g} s while replying"
        hint = "the server stalled mid-reply; the partial turn is discarded and the call is retried"
    elif isinstance(exc, httpx.TimeoutException):
        what, hint = "timed out", "the call is retried"
    elif isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        what, hint = (
            "dropped the connection",
            "the partial turn is discarded and the call is retried",
        )
    elif isinstance(exc, httpx.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return ProviderError(
            f"{vendor}: TLS certificate verification failed (model {model!r}): {exc}",
            vendor=vendor,
            model=model,
            retryable=False,
            hint="point LOVIA_HTTP_CA_BUNDLE at your CA file (e.g. a corporate proxy's), "
            "or install truststore to use the system store",
        )
    elif isinstance(exc, httpx.ConnectError):
        what, hint = "could not be reached", "check base_url and that the server is running"
    elif isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return ProviderError(
            f"{vendor}: invalid endpoint URL for model {model!r}: {exc}",
            vendor=vendor,
            model=model,
            retryable=False,
            hint="base_url must be an http(s) URL such as https://host/v1",
        )
    else:
        what, hint = "failed", "a transport error; the call is retried"
    detail = f": {exc}" if str(exc) else ""
    return ProviderError(
        f"{vendor} {what} (model {model!r}; {type(exc).__name__}{detail})",
        vendor=vendor,
        model=model,
        retryable=True,
        hint=hint,
    )


def _applied(exc: Exception, kind: str, fallback: float) -> float:
    """The limit httpx applied to the failed request (a caller's client has its own)."""
    try:
        value = exc.request.extensions["timeout"][kind]  # type: ignore[attr-defined]
    except (AttributeError, KeyError, RuntimeError, TypeError):
        return fallback
    return float(value) if isinstance(value, (int, float)) else fallback


_RETRY_PROMISE = re.compile(r"(?:;|,| and)? the call is retried(?: after Retry-After)?")


def note_attempts(exc: BaseException, attempts: int, seconds: float) -> None:
    """Make a ``ProviderError`` the final word: say how many calls were made and over how
    long, and drop the hint's promise of a retry that will not come."""
    if not isinstance(exc, ProviderError):
        return
    if attempts > 1:
        exc.message = f"{exc.message} [gave up after {attempts} attempts over {seconds:.1f} s]"
        exc.args = (exc.message,)
    if exc.hint:
        exc.hint = _RETRY_PROMISE.sub("", exc.hint).strip(" ;,") or None
