"""Shared settings for every outbound HTTP client (providers, fetch tools, embedders).

Environment (an explicit argument always wins):

* ``LOVIA_PROVIDER_TIMEOUT``: the read timeout in seconds (the longest silence inside a
  reply), default 300.
* ``LOVIA_PROVIDER_CONNECT_TIMEOUT``: seconds to open the connection, default 10.
* ``LOVIA_PROVIDER_FIRST_BYTE_TIMEOUT``: seconds from sending a request to the response's
  status line and headers, default 60: a server that accepts and never answers fails here,
  well before the read timeout.
* ``LOVIA_PROVIDER_PROBE_TIMEOUT``: seconds the ``/models`` window probe may take in all,
  default 2.
* ``LOVIA_PROVIDER_TRUST_ENV``: honour proxy variables and ``.netrc`` (off by default).
* ``LOVIA_HTTP_INSECURE``: skip TLS verification (wins over everything else).
* ``LOVIA_HTTP_CA_BUNDLE``: a CA file or directory to verify against.
* ``LOVIA_HTTP_ALLOW_PRIVATE``: let the built-in HTTP tools (``http_request``, ``read_page``)
  reach private, loopback and link-local addresses, for the whole process (off by default;
  ``allow_private=True`` opens one reader or tool factory). Provider clients are never guarded.

Invalid or non-positive timeout values and unreadable flags are ignored with a warning;
the connect and first-byte timeouts never exceed the read timeout. Without either TLS
variable, the system trust store is used through ``truststore`` when it is installed,
else certifi's bundle. SOCKS proxies in the environment are ignored (they would need an
extra dependency and usually belong to another tool). httpx is imported only by
``make_async_client`` and ``prepare_http`` (which async callers run in a worker thread).
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = [
    "DEFAULT_TIMEOUT",
    "ProviderTimeouts",
    "make_async_client",
    "prepare_http",
    "resolve_allow_private",
    "resolve_timeout",
    "resolve_timeouts",
    "resolve_trust_env",
    "resolve_verify",
]

DEFAULT_TIMEOUT = 300.0
"""Seconds a provider call may take when nothing else is configured."""

_TRUE = frozenset(("1", "true", "yes", "on"))
_FALSE = frozenset(("", "0", "false", "no", "off"))
_PROXY_VARS = ("all_proxy", "http_proxy", "https_proxy")
_log = logging.getLogger("lovia.http")


def _env_flag(name: str) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw not in _TRUE and raw not in _FALSE:
        _warn(f"ignoring {name}={raw!r}: use 1/true/yes/on or 0/false/no/off")
    return raw in _TRUE


def _warn(message: str) -> None:
    # A configuration mistake: a warning the developer sees, and the log for operators.
    warnings.warn(message, UserWarning, stacklevel=4)
    _log.warning("%s", message)


def _seconds_from_env(name: str) -> float | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        _warn(f"ignoring {name}={raw!r}: not a number")
        return None
    if value > 0 and value != float("inf"):
        return value
    _warn(f"ignoring {name}={raw!r}: not a positive number")
    return None


def resolve_timeout(timeout: float | None = None) -> float:
    """``timeout`` if given, else ``LOVIA_PROVIDER_TIMEOUT`` when valid and positive, else 300.

    Raises ``UserError`` when ``timeout`` is not a positive, finite number of seconds."""
    if timeout is not None:
        return _seconds("timeout", timeout)
    from_env = _seconds_from_env("LOVIA_PROVIDER_TIMEOUT")
    return DEFAULT_TIMEOUT if from_env is None else from_env


def _seconds(name: str, value: object) -> float:
    """``value`` as seconds; ``UserError`` unless it is a positive, finite number."""
    import math

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
        if seconds > 0 and math.isfinite(seconds):
            return seconds
    from .exceptions import UserError

    raise UserError(
        f"{name}={value!r} is not a positive number of seconds",
        hint="pass seconds as a number greater than 0 (a large one for a long limit)",
    )


_LIMIT_VARIABLES = (
    ("connect", "LOVIA_PROVIDER_CONNECT_TIMEOUT", 10.0),
    ("first_byte", "LOVIA_PROVIDER_FIRST_BYTE_TIMEOUT", 60.0),
    ("probe", "LOVIA_PROVIDER_PROBE_TIMEOUT", 2.0),
)


@dataclass(frozen=True, slots=True, init=False)
class ProviderTimeouts:
    """The limits of one provider call, in seconds (pass as an adapter's ``timeout=``).

    A field not passed comes from its ``LOVIA_PROVIDER_*`` variable, else its default, when
    the value is made; the connect and first-byte limits are capped at the read timeout
    (the probe's too). Raises ``UserError`` for a value that is not a positive number.
    """

    read: float
    """The longest silence while a reply streams (httpx's read timeout), default 300."""
    connect: float
    """Opening the TCP (and TLS) connection, default 10."""
    first_byte: float
    """From sending the request to the response's status line and headers, default 60."""
    probe: float
    """The whole ``/models`` window probe (it fails open: the run goes on without it),
    default 2."""

    def __init__(
        self,
        read: float | None = None,
        connect: float | None = None,
        first_byte: float | None = None,
        probe: float | None = None,
    ) -> None:
        limit = resolve_timeout(read)
        object.__setattr__(self, "read", limit)
        given = {"connect": connect, "first_byte": first_byte, "probe": probe}
        for name, variable, default in _LIMIT_VARIABLES:
            value = given[name]
            if value is None:
                from_env = _seconds_from_env(variable)
                seconds = default if from_env is None else from_env
            else:
                seconds = _seconds(name, value)
            object.__setattr__(self, name, min(seconds, limit))


def resolve_timeouts(timeout: float | ProviderTimeouts | None = None) -> ProviderTimeouts:
    """The timeouts of a provider call: a ``ProviderTimeouts`` as given, else one with
    ``timeout`` as the read timeout (see ``ProviderTimeouts`` for the other fields)."""
    if isinstance(timeout, ProviderTimeouts):
        return timeout
    return ProviderTimeouts(read=timeout)


def resolve_trust_env(trust_env: bool | None = None) -> bool:
    """``trust_env`` if given, else ``LOVIA_PROVIDER_TRUST_ENV`` (off by default)."""
    if trust_env is not None:
        return trust_env
    return _env_flag("LOVIA_PROVIDER_TRUST_ENV")


def resolve_allow_private(allow_private: bool = False) -> bool:
    """Whether a built-in HTTP tool may reach non-public addresses: ``allow_private``, or
    ``LOVIA_HTTP_ALLOW_PRIVATE`` for the whole process."""
    return allow_private or _env_flag("LOVIA_HTTP_ALLOW_PRIVATE")


@cache
def _context_for(kind: str, path: str = "") -> ssl.SSLContext:
    # Building a context reads a CA bundle (tens of ms): one per process and source.
    import ssl

    if kind == "bundle":
        try:
            if os.path.isdir(path):
                return ssl.create_default_context(capath=path)
            return ssl.create_default_context(cafile=path)
        except OSError as exc:  # a missing file, or one that holds no certificate
            from .exceptions import UserError

            raise UserError(
                f"cannot load the CA bundle {path!r}: {exc}",
                hint="point LOVIA_HTTP_CA_BUNDLE (or verify=) at a readable PEM file or "
                "certificate directory",
            ) from exc
    if kind == "truststore":
        import truststore

        ctx: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        return ctx
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def resolve_verify(verify: bool | str | ssl.SSLContext | None = None) -> bool | ssl.SSLContext:
    """The TLS verification to use: ``False`` (insecure) or an ``ssl.SSLContext``.

    Order: an explicit ``verify`` (a bool, a CA path or a context), then
    ``LOVIA_HTTP_INSECURE``, then ``LOVIA_HTTP_CA_BUNDLE``, then truststore, then certifi.
    """
    import ssl

    if isinstance(verify, ssl.SSLContext):
        return verify
    if isinstance(verify, str):
        return _context_for("bundle", verify)
    if verify is False:
        return False
    if verify is None and _env_flag("LOVIA_HTTP_INSECURE"):
        return False
    bundle = os.environ.get("LOVIA_HTTP_CA_BUNDLE", "").strip()
    if verify is None and bundle:
        return _context_for("bundle", bundle)
    try:
        return _context_for("truststore")
    except ImportError:
        return _context_for("certifi")


def _socks_proxy_in_env() -> bool:
    for name in _PROXY_VARS:
        for key in (name, name.upper()):
            if os.environ.get(key, "").strip().lower().startswith("socks"):
                return True
    return False


def _env_proxy_mounts() -> dict[str, Any]:
    """Proxy mounts from the environment with SOCKS entries dropped (NO_PROXY honoured)."""
    import httpx

    def get(name: str) -> str:
        return os.environ.get(name.upper(), "") or os.environ.get(name, "")

    mounts: dict[str, Any] = {}
    for scheme, var in (
        ("all://", "all_proxy"),
        ("http://", "http_proxy"),
        ("https://", "https_proxy"),
    ):
        url = get(var).strip()
        if url and not url.lower().startswith("socks"):
            mounts[scheme] = httpx.AsyncHTTPTransport(proxy=url)
    for host in filter(None, (h.strip() for h in get("no_proxy").split(","))):
        if host == "*":
            return {}
        mounts[f"all://{host.lstrip('.')}"] = None
        mounts[f"all://*.{host.lstrip('.')}"] = None
    return mounts


def prepare_http() -> None:
    """Import httpx and build the default TLS context (both cached for the process).

    Both block for tens to hundreds of milliseconds the first time, so async code runs this
    through ``asyncio.to_thread`` before its first ``make_async_client`` call.
    """
    import httpx  # noqa: F401  # the import itself is the point

    resolve_verify()


def make_async_client(
    *,
    base_url: str = "",
    headers: dict[str, str] | None = None,
    timeout: float | ProviderTimeouts | None = None,
    trust_env: bool | None = None,
    verify: bool | str | ssl.SSLContext | None = None,
    follow_redirects: bool = False,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` with lovia's timeouts (read and connect), TLS and proxy
    settings."""
    import httpx

    limits = resolve_timeouts(timeout)
    trust = resolve_trust_env(trust_env)
    kwargs: dict[str, Any] = {}
    if trust and _socks_proxy_in_env():
        _log.debug("ignoring a SOCKS proxy from the environment")
        kwargs["mounts"] = _env_proxy_mounts()
        trust = False
    return httpx.AsyncClient(
        base_url=base_url,
        headers=headers,
        timeout=httpx.Timeout(limits.read, connect=limits.connect),
        trust_env=trust,
        verify=resolve_verify(verify),
        follow_redirects=follow_redirects,
        **kwargs,
    )
