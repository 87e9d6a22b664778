"""The fetch layer ``http_request`` and ``HttpReader`` share: one transport, the address
guard, redirects hop by hop, a download cap, an overall deadline, and body decoding.

Transports are made once per event loop and guard setting and shared by every built-in
HTTP tool. They keep no connection alive between calls: a tool call is a rare event, and a
pooled socket would outlive the event loop that opened it. TLS verification comes from
``lovia.http_config.resolve_verify`` (``LOVIA_HTTP_INSECURE``, ``LOVIA_HTTP_CA_BUNDLE``,
truststore, certifi). Environment proxies are never used: a proxy resolves host names
itself, so the address guard could not hold behind one.
"""

from __future__ import annotations

import asyncio
import codecs
import re
import weakref
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..exceptions import ToolError
from ._guard import BlockedAddressError, Resolver, pinned_backend

if TYPE_CHECKING:
    import httpx

DEFAULT_MAX_BYTES = 1_048_576
"""The download cap: bytes of (decompressed) body kept, 1 MiB."""

USER_AGENT = "Mozilla/5.0 (compatible; lovia)"
"""Sent unless the caller gives one; some sites refuse requests without a browser-like agent."""
MAX_REDIRECTS = 10

_transports: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[bool, Resolver | None], httpx.AsyncBaseTransport]
] = weakref.WeakKeyDictionary()


def shared_transport(*, allow_private: bool, resolver: Resolver | None) -> httpx.AsyncBaseTransport:
    """The running loop's transport for this guard setting (made on first use)."""
    import httpx

    from ..http_config import resolve_verify

    per_loop = _transports.setdefault(asyncio.get_running_loop(), {})
    transport = per_loop.get((allow_private, resolver))
    if transport is None:
        import httpcore

        verify = resolve_verify()
        limits = httpx.Limits(max_connections=20, max_keepalive_connections=0)
        transport = httpx.AsyncHTTPTransport(verify=verify, trust_env=False, limits=limits)
        # httpx has no network-backend option: give the transport a pool built on the
        # pinning backend (the transport only ever sends through its _pool).
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=0,
            network_backend=pinned_backend(resolver, allow_private=allow_private),
        )
        per_loop[(allow_private, resolver)] = transport
    return transport


@dataclass(frozen=True, slots=True)
class Fetched:
    """One response, read up to the download cap."""

    url: str
    """The final URL, after redirects."""
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    media_type: str
    """The lower-cased media type of ``content-type`` ("" when missing)."""
    charset: str | None
    """The ``charset`` parameter of ``content-type``, if any."""
    body: bytes
    size_capped: bool
    """The body was longer than the cap and was cut there."""


async def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_private: bool = False,
    resolver: Resolver | None = None,
    retry_dropped: bool = False,
) -> Fetched:
    """Send one request, following redirects, and read the body up to ``max_bytes``.

    ``timeout`` bounds the whole exchange, redirects and a slow body included. Every
    failure is a ``ToolError`` naming the URL or host. ``retry_dropped`` sends once more
    when the server dropped the connection before answering.
    """
    from ..http_config import prepare_http, resolve_allow_private

    _check_scheme(url)
    await asyncio.to_thread(prepare_http)  # httpx import and TLS setup block: not on the loop
    allowed = resolve_allow_private(allow_private)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout  # one budget for every attempt, hop and read
    attempts = 2 if retry_dropped else 1
    for attempt in range(1, attempts + 1):
        left = deadline - loop.time()
        try:
            if left <= 0:
                raise asyncio.TimeoutError
            return await asyncio.wait_for(
                _exchange(url, method, headers, body, left, max_bytes, allowed, resolver), left
            )
        except asyncio.TimeoutError:
            raise ToolError(
                f"{url} did not answer within {timeout:g} seconds",
                hint="try again later, or raise timeout",
            ) from None
        except _Dropped as exc:
            if attempt == attempts:
                raise ToolError(f"{exc.host} closed the connection: {exc.detail}") from None
    raise AssertionError("unreachable")  # pragma: no cover


class _Dropped(Exception):
    def __init__(self, host: str, detail: str) -> None:
        self.host, self.detail = host, detail


async def _exchange(
    url: str,
    method: str,
    headers: dict[str, str] | None,
    body: bytes | None,
    timeout: float,
    max_bytes: int,
    allow_private: bool,
    resolver: Resolver | None,
) -> Fetched:
    import httpx

    transport = shared_transport(allow_private=allow_private, resolver=resolver)
    sent = {"user-agent": USER_AGENT, "accept-encoding": "gzip, deflate"}
    sent.update({k.lower(): v for k, v in (headers or {}).items()})
    # The client is a thin per-call wrapper; the transport is shared and never closed here.
    client = httpx.AsyncClient(transport=transport, trust_env=False, timeout=timeout)
    try:
        request = client.build_request(method, url, headers=sent, content=body)
    except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError, TypeError) as exc:
        raise ToolError(f"cannot send {method} {url}: {exc}") from None
    for _hop in range(MAX_REDIRECTS + 1):
        host = request.url.host
        try:
            response = await client.send(request, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise _Dropped(host, str(exc) or type(exc).__name__) from None
        except httpx.TimeoutException:
            raise asyncio.TimeoutError from None
        except httpx.HTTPError as exc:
            raise ToolError(f"cannot reach {host}: {exc or type(exc).__name__}") from None
        except httpx.InvalidURL as exc:  # not an HTTPError: a Location httpx cannot parse
            raise ToolError(f"{host} redirected to a URL that cannot be fetched: {exc}") from None
        try:
            following = response.next_request
            if following is not None and not _resends_elsewhere(request, following):
                request = following
                _check_scheme(str(request.url))
                continue
            return await _read(response, max_bytes)
        finally:
            await response.aclose()
    raise ToolError(f"{url} redirected more than {MAX_REDIRECTS} times")


def _resends_elsewhere(sent: httpx.Request, following: httpx.Request) -> bool:
    """Whether a redirect would send a write (a 307/308 keeps the method and body) to
    another origin: nobody approved that, so the redirect itself is the answer."""
    if following.method in ("GET", "HEAD", "OPTIONS"):
        return False
    origin = (sent.url.scheme, sent.url.host, sent.url.port)
    return (following.url.scheme, following.url.host, following.url.port) != origin


async def _read(response: httpx.Response, max_bytes: int) -> Fetched:
    import httpx

    chunks: list[bytes] = []
    size = 0
    capped = False
    try:
        async for chunk in _decoded(response):
            if size + len(chunk) > max_bytes:
                chunks.append(chunk[: max_bytes - size])
                capped = True
                break
            chunks.append(chunk)
            size += len(chunk)
    except (httpx.DecodingError, zlib.error) as exc:
        raise ToolError(f"{response.url.host} sent a body that does not decode: {exc}") from None
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise _Dropped(response.url.host, str(exc) or type(exc).__name__) from None
    except httpx.TimeoutException:
        raise asyncio.TimeoutError from None
    media_type, charset = parse_content_type(response.headers.get("content-type", ""))
    return Fetched(
        url=str(response.url),
        status=response.status_code,
        reason=response.reason_phrase,
        headers=tuple(response.headers.multi_items()),
        media_type=media_type,
        charset=charset,
        body=b"".join(chunks),
        size_capped=capped,
    )


_INFLATE_STEP = 65_536


async def _decoded(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body, decompressed a bounded step at a time.

    httpx inflates each network read whole, so one 64 KiB read of a compression bomb would
    become tens of megabytes before the cap could cut it (and a body gzipped twice, which
    httpx also decodes whole, gigabytes). gzip and deflate (the encodings we ask for) are
    inflated here instead, layer by layer, never more than ``_INFLATE_STEP`` at once; any
    other encoding is refused, since it could not be bounded.
    """
    header = response.headers.get("content-encoding", "")
    layers = [e.strip().lower() for e in header.split(",")]
    layers = [e for e in layers if e and e != "identity"]
    unknown = [e for e in layers if e not in ("gzip", "x-gzip", "deflate")]
    if unknown:
        raise ToolError(
            f"{response.url.host} sent a body in content-encoding {', '.join(unknown)}, "
            "which was not asked for (only gzip and deflate are accepted)"
        )
    body: AsyncIterator[bytes] = response.aiter_raw()
    for encoding in reversed(layers):  # the header lists them in the order they were applied
        body = _inflate(body, gzip=encoding != "deflate")
    async for chunk in body:
        yield chunk


async def _inflate(data_chunks: AsyncIterator[bytes], *, gzip: bool) -> AsyncIterator[bytes]:
    """One gzip or deflate layer of ``data_chunks``, at most ``_INFLATE_STEP`` bytes a step."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS)
    first = True
    async for data in data_chunks:
        if first and not gzip and data and data[0] & 0x0F != 8:
            inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, no zlib header
        first = first and not data
        while True:  # a full step may leave output pending even with no input left
            out = inflater.decompress(data, _INFLATE_STEP)
            data = inflater.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < _INFLATE_STEP:
                break
    if not first and not inflater.eof:
        raise zlib.error("the compressed body ends early")


def _check_scheme(url: str) -> None:
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise ToolError(
            f"cannot fetch {url!r}: only http and https URLs are allowed",
            hint="pass an absolute http(s) URL",
        )


# --- decoding ---------------------------------------------------------------------------


def parse_content_type(value: str) -> tuple[str, str | None]:
    """``(media type, charset)`` of a ``content-type`` header value."""
    media, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("\"'") or None
    return media.strip().lower(), charset


_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)", re.I)
_BINARY_MAGIC = (b"\x89PNG", b"%PDF", b"GIF8", b"\xff\xd8\xff", b"PK\x03\x04", b"\x1f\x8b")
_TEXT_TYPES = ("json", "xml", "javascript", "ecmascript", "yaml", "csv", "x-www-form-urlencoded")


def decode_text(body: bytes, charset: str | None, *, html: bool) -> str:
    """``body`` as text: the header's charset, then (for HTML) a ``<meta>`` one, then UTF-8.

    A charset Python does not know is skipped, and bytes that do not decode become U+FFFD:
    a wrong declaration never fails a fetch.
    """
    candidates = [charset]
    if html:
        found = _META_CHARSET.search(body[:4096])
        candidates.append(found.group(1).decode("ascii") if found else None)
    for name in candidates:
        if name:
            try:
                return body.decode(codecs.lookup(name).name, errors="replace")
            except (LookupError, UnicodeError):
                # Unknown, or a codec that is no charset ("hex", "rot13", "idna"): next one.
                continue
    return body.decode("utf-8", errors="replace")


def is_textual(media_type: str, body: bytes) -> bool:
    """Whether a body of this media type is text; with no type, sniff the bytes."""
    if media_type:
        return media_type.startswith("text/") or any(t in media_type for t in _TEXT_TYPES)
    head = body[:1024]
    return not head.startswith(_BINARY_MAGIC) and b"\x00" not in head


def is_html(media_type: str, body: bytes) -> bool:
    """HTML by declaration, or (with no type) by its opening bytes."""
    if media_type:
        return media_type in ("text/html", "application/xhtml+xml")
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


__all__ = [
    "DEFAULT_MAX_BYTES",
    "BlockedAddressError",
    "Fetched",
    "decode_text",
    "fetch",
    "is_html",
    "is_textual",
    "parse_content_type",
    "shared_transport",
]
