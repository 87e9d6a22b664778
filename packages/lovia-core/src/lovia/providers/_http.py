"""The one HTTP adapter shape: ``HTTPAdapter`` keeps the client, the key and base-URL rules,
window discovery and ``stream()``; an adapter adds its request builder and stream decoder.

``stream()`` POSTs the adapter's JSON body and feeds the SSE events to the adapter's
decoder. This module owns the client's lifecycle, status handling, content-type sanity
checks, the first-byte deadline and translating httpx errors (``errors.py``) at the seam.
A rejection that only the reply budget overflowed is re-sent once with the budget that
fits (``errors.reply_room``); any other ``ContextOverflowError`` goes to the caller.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from json.scanner import make_scanner
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict, cast

from ..exceptions import ContextOverflowError, ProviderError, UserError
from ..http_config import ProviderTimeouts, resolve_timeouts
from .base import ModelSettings
from .discovery import discover_window, host_of, table_window
from .errors import (
    error_event,
    error_from_response,
    error_from_transport,
    no_first_byte,
    reply_room,
    stream_error,
)
from .sse import SSEEvent, SSEParser

if TYPE_CHECKING:
    from typing import TypeAlias

    import httpx
    from typing_extensions import Unpack

    from ..tools.base import Tool
    from ..transcript import TranscriptEntry
    from .base import ModelDelta

    Body: TypeAlias = dict[str, Any]
    """A JSON request body."""
    Entries: TypeAlias = Sequence[TranscriptEntry]
    Tools: TypeAlias = Sequence[Tool]

__all__ = [
    "AdapterRules",
    "ClientSlot",
    "ConnectionOptions",
    "HTTPAdapter",
    "StreamDecoder",
    "count_of",
    "host_of",
    "key_headers",
    "merge_headers",
    "merge_options",
    "parse_json_event",
    "stop_list",
    "truncated",
]

_log = logging.getLogger("lovia.providers")

_HEAD_LIMIT = 65_536
"""Bytes of a non-stream body kept for the error message."""


class ClientSlot:
    """Where an adapter keeps its httpx client.

    A client passed in is the caller's: used as is and never closed here. Without one, a
    client is made on first use through ``lovia.http_config`` and closed by ``aclose()``
    (the next use makes a fresh one).
    """

    __slots__ = ("_client", "_owned", "_trust_env", "timeouts")

    def __init__(
        self,
        client: httpx.AsyncClient | None,
        *,
        timeout: float | ProviderTimeouts | None,
        trust_env: bool | None,
    ) -> None:
        self._client = client
        self._owned = client is None
        self.timeouts = resolve_timeouts(timeout)
        """The limits of each call (a caller's client keeps its own read and connect)."""
        self._trust_env = trust_env

    def get(self) -> httpx.AsyncClient:
        """The client, made now if this slot owns it and has none yet."""
        if self._client is None:
            from ..http_config import make_async_client

            self._client = make_async_client(timeout=self.timeouts, trust_env=self._trust_env)
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


def key_headers(
    rules: AdapterRules,
    api_key: str | None,
    default_headers: Mapping[str, str] | None,
    *,
    host: str,
    official: bool,
    fixed: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The request headers: ``fixed``, the key (``api_key=`` or the key variable) in the
    adapter's header, merged with ``default_headers``.

    An ``api_key=`` argument beats the same header in ``default_headers``; a key from the
    environment does not. Raises ``UserError`` when an ``official`` host has no key at all
    and no default header authorises.
    """
    key = api_key if api_key is not None else os.environ.get(rules.key_env) or None
    extra = dict(default_headers or {})
    if official and not key and not any(k.lower() in rules.authorising for k in extra):
        raise UserError(f"no API key for {host!r}", hint=rules.missing_key_hint)
    base = dict(fixed or {})
    if key:
        base[rules.key_header] = rules.key_prefix + key
    protected = (rules.key_header,) if api_key is not None else ()
    return merge_headers(base, extra, protected=protected)


@dataclass(frozen=True, slots=True)
class AdapterRules:
    """Where an adapter goes by default and how it finds and sends its key."""

    base_url_env: str
    """The variable read when ``base_url=`` is not given (``OPENAI_BASE_URL``)."""
    default_base_url: str
    key_env: str
    """The variable read when ``api_key=`` is not given (``OPENAI_API_KEY``)."""
    key_header: str
    """The lower-case header that carries the key."""
    key_prefix: str
    """Put before the key in that header (``"Bearer "``)."""
    authorising: tuple[str, ...]
    """Lower-case ``default_headers`` names that stand in for a key."""
    missing_key_hint: str
    example: str
    """A call that builds this adapter, for the "needs a model name" hint."""


class ConnectionOptions(TypedDict, total=False):
    """The keyword arguments every HTTP adapter takes; ``None`` leaves the default."""

    api_key: str | None
    """Default: the adapter's key variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``)."""
    base_url: str | None
    """Default: the adapter's base-URL variable, then its official endpoint."""
    client: httpx.AsyncClient | None
    """Used as is and never closed by ``aclose()``; default: one the adapter owns."""
    timeout: float | ProviderTimeouts | None
    """Seconds of read timeout, or every limit (``lovia.http_config``)."""
    default_headers: Mapping[str, str] | None
    trust_env: bool | None
    supports_vision: bool | None


def _check_options(owner: str, options: Mapping[str, object]) -> None:
    """Refuse a keyword no adapter takes (``**options`` would otherwise swallow a typo)."""
    import difflib

    known = list(ConnectionOptions.__annotations__)
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            raise UserError(
                f"{owner}() got an unexpected keyword argument {key!r}",
                hint=f"did you mean {close[0]!r}?" if close else f"it takes {', '.join(known)}",
            )


class HTTPAdapter:
    """A model behind a streaming JSON-over-HTTP API: the shape every built-in adapter has.

    A subclass sets ``name``, ``rules``, ``path`` (and ``api_root`` when the API lives
    below the host root) and ``max_tokens_field``, and implements its request builder
    (``_body``) and ``decoder``. A ``base_url`` that already ends in ``api_root`` is
    accepted as given.
    """

    name: str
    rules: ClassVar[AdapterRules]
    path: ClassVar[str]
    """Appended to ``base_url + api_root`` for the streaming POST."""
    api_root: ClassVar[str] = ""
    """The API's prefix below ``base_url`` (Anthropic's ``/v1``); ``/models`` lives there."""
    vision_by_default: ClassVar[bool | None] = None
    """``supports_vision`` when not given; ``None`` means on the official host only."""
    max_tokens_field = "max_tokens"
    """The request field of the reply budget."""
    supports_json_schema: bool

    def __init__(
        self,
        model: str,
        *,
        fixed_headers: Mapping[str, str] | None = None,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        rules = self.rules
        if not model:
            raise UserError(
                f"{type(self).__name__} needs a model name", hint=f"e.g. {rules.example}"
            )
        _check_options(type(self).__name__, options)
        self.model = model
        base = options.get("base_url") or os.environ.get(rules.base_url_env)
        base = (base or rules.default_base_url).rstrip("/")
        if self.api_root and base.endswith(self.api_root):
            base = base[: -len(self.api_root)]
        self.base_url = base
        self.host = host_of(base)
        self.official_host = self.is_official_host(self.host)
        self._headers = key_headers(
            rules,
            options.get("api_key"),
            options.get("default_headers"),
            host=self.host,
            official=self.official_host,
            fixed=fixed_headers,
        )
        vision = options.get("supports_vision")
        if vision is None:
            vision = (
                self.official_host if self.vision_by_default is None else self.vision_by_default
            )
        self.supports_vision = vision
        self._client = ClientSlot(
            options.get("client"),
            timeout=options.get("timeout"),
            trust_env=options.get("trust_env"),
        )

    @staticmethod
    def is_official_host(host: str) -> bool:
        """Whether ``host`` is the vendor's own API (it then needs a key)."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def timeouts(self) -> ProviderTimeouts:
        """The limits of each call (``timeout=``, else the ``LOVIA_PROVIDER_*`` variables)."""
        return self._client.timeouts

    def _http(self) -> httpx.AsyncClient:
        return self._client.get()

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        await self._client.aclose()

    def context_window(self) -> int | None:
        """The bundled window for this host and model, if known."""
        return table_window(self.host, self.model)

    async def discover_context_window(self) -> int | None:
        """Ask the endpoint's ``/models`` (never the official OpenAI API); fail-open, memoised,
        within ``ProviderTimeouts.probe``."""
        return await discover_window(
            self.base_url + self.api_root,
            self.model,
            self._headers,
            timeout=self.timeouts.probe,
        )

    def build_request(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The request body for this view (what ``stream()`` sends)."""
        return self._body(entries, tools, response_format, settings or ModelSettings())

    def _body(self, view: Entries, tools: Tools, fmt: Body | None, s: ModelSettings) -> Body:
        """The adapter's request builder (``fmt`` is the ``response_format``)."""
        raise NotImplementedError

    def decoder(self) -> StreamDecoder:
        """A fresh decoder for one reply's events."""
        raise NotImplementedError

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream one reply; a stream that ends before its finish raises a retryable error.

        When the endpoint says the prompt fits but prompt + reply budget does not, the call
        is sent once more, before anything streamed, with the budget that fits.
        """
        body = self.build_request(
            entries, tools=tools, response_format=response_format, settings=settings
        )
        client = await self._client.ready()
        lowered = False
        while True:
            started = False
            deltas = self._deltas(client, body)
            try:
                async with aclosing(deltas):  # release the connection even when we stop early
                    async for delta in deltas:
                        started = True
                        yield delta
                return
            except ContextOverflowError as exc:
                room = None if started or lowered else reply_room(exc.message)
                if room is None:
                    raise
                _log.info(
                    "%s: prompt + %s=%s overflow the window; sending again with %d",
                    self.name,
                    self.max_tokens_field,
                    body.get(self.max_tokens_field),
                    room,
                )
                body = {**body, self.max_tokens_field: room}
                lowered = True

    async def _deltas(
        self, client: httpx.AsyncClient, body: dict[str, Any]
    ) -> AsyncGenerator[ModelDelta, None]:
        """POST ``body`` and yield the decoded deltas, ending with the decoder's finish."""
        decoder = self.decoder()
        parser = SSEParser()
        out: list[ModelDelta] = []
        batches = self._events(client, body, parser)
        async with aclosing(batches):
            async for events in batches:
                try:
                    for event in events:
                        if event.event == "error":  # every vendor's, and llama.cpp's error line
                            raise error_event(event.data, vendor=self.name, model=self.model)
                        decoder.handle(event, out)
                except (AttributeError, TypeError, KeyError, IndexError) as exc:
                    # Valid JSON of the wrong shape: the endpoint speaks another dialect.
                    raise _unexpected_shape(event, exc, vendor=self.name, model=self.model) from exc
                for delta in out:
                    yield delta
                out.clear()
                if decoder.complete:
                    break
        yield decoder.finish(parser)

    async def _events(
        self, client: httpx.AsyncClient, body: dict[str, Any], parser: SSEParser
    ) -> AsyncGenerator[list[SSEEvent], None]:
        """POST ``body`` and yield the SSE events of the reply, a network chunk at a time.

        Non-2xx replies, HTML pages, JSON bodies instead of a stream, a silent server and
        transport failures raise ``ProviderError`` (or ``ContextOverflowError``). The caller
        decides whether the stream was complete (``parser.done`` and the decoder's markers).
        """
        import httpx

        vendor, model, limits = self.name, self.model, self.timeouts
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        request = client.build_request(
            "POST",
            self.base_url + self.api_root + self.path,
            content=content,
            headers={**headers, **self._headers},
        )
        try:
            try:
                response = await asyncio.wait_for(
                    client.send(request, stream=True), limits.first_byte
                )
            except asyncio.TimeoutError:
                raise no_first_byte(limits.first_byte, vendor=vendor, model=model) from None
            try:
                reading = _read_sse(response, parser, vendor=vendor, model=model, idle=limits.read)
                async for events in reading:
                    yield events
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise error_from_transport(exc, vendor=vendor, model=model, timeouts=limits) from exc


async def _read_sse(
    response: httpx.Response, parser: SSEParser, *, vendor: str, model: str, idle: float
) -> AsyncGenerator[list[SSEEvent], None]:
    """The SSE events of a response whose head arrived (see ``HTTPAdapter._events``).

    Keep-alives (comments, ``ping`` events) keep bytes flowing, so httpx's read timeout
    never fires behind them: more than ``idle`` seconds of nothing else (no event and no
    part of one) is a stall.
    """
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
            f"{vendor} answered with an HTML page instead of an event stream (model {model!r})",
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
    clock = asyncio.get_running_loop().time
    progress = clock()
    async for chunk in response.aiter_bytes():
        if first and chunk.lstrip()[:9].lower().startswith((b"<!doctype", b"<html")):
            raise ProviderError(
                f"{vendor} sent an HTML page instead of an event stream (model {model!r})",
                vendor=vendor,
                model=model,
                status_code=response.status_code,
                hint="base_url points at a web page, not the API; check the URL and any proxy",
            )
        first = first and not chunk.strip()
        if not parser.events_seen and len(head) < _HEAD_LIMIT:
            head += chunk
        events = parser.feed(chunk)
        if parser.pending or parser.done or any(e.event != "ping" for e in events):
            progress = clock()  # an event, or part of one (a long one arrives in pieces)
        elif clock() - progress > idle:
            raise _stalled(idle, vendor=vendor, model=model)
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
            hint="base_url points at a web page or proxy, not the API; check the URL and any proxy",
        )


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


def _stalled(idle: float, *, vendor: str, model: str) -> ProviderError:
    return ProviderError(
        f"{vendor} sent only keep-alives for {idle:g} s while replying (model {model!r}): "
        "the server is up but the reply stalled",
        vendor=vendor,
        model=model,
        retryable=True,
        hint="the model behind the endpoint stopped answering; the partial turn is "
        "discarded and the call is retried (the read timeout sets this limit)",
    )


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
