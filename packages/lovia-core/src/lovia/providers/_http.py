"""The HTTP half every adapter shares: keep a client, POST a JSON body, check the response,
read SSE.

Adapters own the wire mapping; this module owns the client's lifecycle, status handling,
content-type sanity checks and translating httpx errors (``errors.py``) at the seam.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from json.scanner import make_scanner
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urlsplit

from ..exceptions import ProviderError
from .errors import error_from_response, error_from_transport, stream_error
from .sse import SSEEvent, SSEParser

if TYPE_CHECKING:
    import httpx

    from .base import ModelDelta

__all__ = [
    "ClientSlot",
    "StreamDecoder",
    "count_of",
    "host_of",
    "merge_headers",
    "merge_options",
    "parse_json_event",
    "post_sse",
    "stop_list",
    "stream_deltas",
    "truncated",
]

_HEAD_LIMIT = 65_536
"""Bytes of a non-stream body kept for the error message."""


def host_of(base_url: str) -> str:
    """The lower-cased host of ``base_url`` ("" when it has none)."""
    return (urlsplit(base_url).hostname or "").lower()


class ClientSlot:
    """Where an adapter keeps its httpx client.

    A client passed in is the caller's: used as is and never closed here. Without one, a
    client is made on first use through ``lovia.http_config`` and closed by ``aclose()``
    (the next use makes a fresh one).
    """

    __slots__ = ("_client", "_owned", "_timeout", "_trust_env")

    def __init__(
        self, client: httpx.AsyncClient | None, *, timeout: float | None, trust_env: bool | None
    ) -> None:
        self._client = client
        self._owned = client is None
        self._timeout = timeout
        self._trust_env = trust_env

    def get(self) -> httpx.AsyncClient:
        """The client, made now if this slot owns it and has none yet."""
        if self._client is None:
            from ..http_config import make_async_client

            self._client = make_async_client(timeout=self._timeout, trust_env=self._trust_env)
        return self._client

    async def ready(self) -> httpx.AsyncClient:
        """``get()`` for async callers: the first one imports httpx and sets up TLS in a
        worker thread, since both block."""
        if self._client is None:
            from ..http_config import prepare_http

            await asyncio.to_thread(prepare_http)
        return self.get()

    async def aclose(self) -> None:
        """Close the client if this slot made it."""
        if self._owned and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


def merge_headers(
    base: Mapping[str, str], extra: Mapping[str, str] | None, *, protected: tuple[str, ...]
) -> dict[str, str]:
    """``base`` plus ``extra`` (case-insensitive); ``extra`` never replaces a ``protected`` header
    that ``base`` already has (an explicit key beats default headers)."""
    out = dict(base)
    lowered = {k.lower(): k for k in out}
    for key, value in (extra or {}).items():
        low = key.lower()
        if low in lowered:
            if low in protected:
                continue
            del out[lowered[low]]
        out[key] = value
        lowered[low] = key
    return out


def merge_options(body: dict[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """Merge vendor ``provider_options`` verbatim into ``body``; a ``None`` value removes."""
    for key, value in options.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


async def post_sse(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: Mapping[str, str],
    *,
    vendor: str,
    model: str,
    parser: SSEParser,
) -> AsyncGenerator[list[SSEEvent], None]:
    """POST ``body`` and yield the SSE events of the reply, a network chunk at a time.

    Non-2xx replies, HTML pages, JSON bodies instead of a stream and transport failures
    raise ``ProviderError`` (or ``ContextOverflowError``). The caller decides whether the
    stream was complete (``parser.done`` and its own finish markers).
    """
    import httpx

    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    send_headers = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    try:
        async with client.stream("POST", url, content=content, headers=send_headers) as response:
            if response.status_code >= 300:
                raw = await _read_head(response)
                raise error_from_response(
                    response.status_code,
                    raw.decode("utf-8", "replace"),
                    response.headers,
                    vendor=vendor,
                    model=model,
                )
            ctype = response.headers.get("content-type", "").lower()
            if "text/html" in ctype:
                raise ProviderError(
                    f"{vendor} answered with an HTML page instead of an event stream "
                    f"(model {model!r})",
                    vendor=vendor,
                    model=model,
                    status_code=response.status_code,
                    hint="base_url points at a web page, not the API; "
                    "OpenAI-compatible servers usually end in /v1",
                )
            if "application/json" in ctype:
                raw = await _read_head(response)
                _raise_for_json_reply(raw, vendor=vendor, model=model, status=response.status_code)
            first = True
            head = b""  # the opening bytes, kept until an event arrives (see below)
            async for chunk in response.aiter_bytes():
                if first and chunk.lstrip()[:9].lower().startswith((b"<!doctype", b"<html")):
                    raise ProviderError(
                        f"{vendor} sent an HTML page instead of an event stream (model {model!r})",
                        vendor=vendor,
                        model=model,
                        status_code=response.status_code,
                        hint="base_url points at a web page, not the API; "
                        "check the URL and any proxy",
                    )
                first = first and not chunk.strip()
                if not parser.events_seen and len(head) < _HEAD_LIMIT:
                    head += chunk
                events = parser.feed(chunk)
                if events:
                    yield events
                if parser.done:
                    return
            tail = parser.close()
            if tail:
                yield tail
            elif not parser.events_seen and head.lstrip()[:1] == b"{":
                # A JSON body under a wrong content type (some gateways send their errors so):
                # report what it says rather than an anonymous truncation.
                _raise_for_json_reply(head, vendor=vendor, model=model, status=response.status_code)
            elif not parser.events_seen and head.lstrip()[:1] == b"<":
                raise ProviderError(
                    f"{vendor} sent markup instead of an event stream (model {model!r}): "
                    f"{head.strip()[:200]!r}",
                    vendor=vendor,
                    model=model,
                    status_code=response.status_code,
                    hint="base_url points at a web page or proxy, not the API; "
                    "check the URL and any proxy",
                )
    except httpx.HTTPError as exc:
        raise error_from_transport(exc, vendor=vendor, model=model) from exc


async def _read_head(response: httpx.Response) -> bytes:
    """At most ``_HEAD_LIMIT`` bytes of a body we only quote (a hostile server may not stop)."""
    head = b""
    async for chunk in response.aiter_bytes():
        head += chunk
        if len(head) >= _HEAD_LIMIT:
            break
    return head[:_HEAD_LIMIT]


class StreamDecoder(Protocol):
    """Turns one vendor's SSE events into deltas (one instance per call)."""

    @property
    def complete(self) -> bool:
        """The vendor's end-of-message event arrived: stop reading."""
        ...

    def handle(self, event: SSEEvent, out: list[ModelDelta]) -> None:
        """Append the deltas of one event to ``out`` (raise ``ProviderError`` for an error)."""
        ...

    def finish(self, parser: SSEParser) -> ModelDelta:
        """The closing ``FinishDelta``; raises the retryable truncation error if incomplete."""
        ...


async def stream_deltas(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: Mapping[str, str],
    *,
    vendor: str,
    model: str,
    decoder: StreamDecoder,
) -> AsyncGenerator[ModelDelta, None]:
    """POST ``body`` and yield the decoded deltas, ending with the decoder's finish."""
    parser = SSEParser()
    out: list[ModelDelta] = []
    batches = post_sse(client, url, body, headers, vendor=vendor, model=model, parser=parser)
    async with aclosing(batches):  # release the connection even when we stop early
        async for events in batches:
            try:
                for event in events:
                    decoder.handle(event, out)
            except (AttributeError, TypeError, KeyError, IndexError) as exc:
                # Valid JSON of the wrong shape: the endpoint speaks another dialect.
                raise _unexpected_shape(event, exc, vendor=vendor, model=model) from exc
            for delta in out:
                yield delta
            out.clear()
            if decoder.complete:
                break
    yield decoder.finish(parser)


def _unexpected_shape(event: SSEEvent, exc: Exception, *, vendor: str, model: str) -> ProviderError:
    return ProviderError(
        f"{vendor} sent a stream chunk of an unexpected shape (model {model!r}): "
        f"{event.data[:200]!r} ({type(exc).__name__}: {exc})",
        vendor=vendor,
        model=model,
        hint=f"the endpoint does not speak the {vendor} streaming format; "
        "check base_url and the provider prefix",
    )


def _raise_for_json_reply(raw: bytes, *, vendor: str, model: str, status: int) -> None:
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if isinstance(data, dict) and "error" in data:
        raise stream_error(data, vendor=vendor, model=model)
    raise ProviderError(
        f"{vendor} answered with a JSON document instead of an event stream (model {model!r})",
        vendor=vendor,
        model=model,
        status_code=status,
        hint="the endpoint ignored stream=true; use a server that supports streaming",
    )


_scan = make_scanner(cast(Any, json.JSONDecoder()))  # typeshed types the C scanner oddly


def parse_json_event(data: str, *, vendor: str, model: str) -> Any:
    """``json.loads`` for one event; malformed JSON is a retryable ``ProviderError``."""
    try:
        # The C scanner skips json.loads' whitespace regexes: this runs once per chunk.
        value, end = _scan(data, 0)
    except (StopIteration, ValueError):
        end = -1
    if end == len(data):
        return value
    try:
        return json.loads(data)  # surrounding whitespace, or a real error to report
    except ValueError as exc:
        raise ProviderError(
            f"{vendor} sent a malformed stream chunk (model {model!r}): {data[:200]!r}",
            vendor=vendor,
            model=model,
            retryable=True,
            hint="the stream was corrupted in transit; "
            "the partial turn is discarded and the call is retried",
        ) from exc


def stop_list(stop: Sequence[str] | str) -> list[str]:
    """``ModelSettings.stop`` as a list; a lone string is one sequence, not its characters."""
    return [stop] if isinstance(stop, str) else list(stop)


def count_of(value: Any) -> int:
    """A token count from a usage payload: a non-negative int, else 0 (gateways send junk)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def truncated(vendor: str, model: str, *, empty: bool) -> ProviderError:
    """The retryable error for a stream that ended before its finish."""
    what = "an empty stream" if empty else "a stream that ended before it finished"
    return ProviderError(
        f"{vendor} sent {what} (model {model!r})",
        vendor=vendor,
        model=model,
        retryable=True,
        hint="the connection or server cut the reply short; "
        "the partial turn is discarded and the call is retried",
    )
