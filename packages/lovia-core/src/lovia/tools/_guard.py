"""The address guard of the built-in HTTP tools (server-side request forgery protection).

A model chooses the URLs ``http_request`` and ``read_page`` fetch, so a prompt injection
could aim them at the machine's own services or the cloud metadata endpoint. The guard is
an httpcore network backend: every TCP connection the tools' transport opens, including
the one after each redirect, resolves the host name here, refuses the connection when any
answer is not a public address, and connects only to the addresses it checked (the next
one when one cannot be reached). Checking and
connecting in one place means a DNS answer that changes between the two (rebinding) cannot
slip past, and the Host header and TLS server name stay the original host's because
httpcore keeps them from the URL, not from the address dialled.

With ``allow_private`` the same backend resolves and pins but skips the check.
Host names are resolved by ``socket.getaddrinfo`` (so odd spellings such as ``2130706433``
or ``0177.0.0.1`` resolve, and are checked, exactly as the C library would connect to
them) unless a resolver is injected.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ..exceptions import ToolError

if TYPE_CHECKING:
    import httpcore

Resolver = Callable[[str], Sequence[str]]
"""``resolver(host) -> addresses``: the IP addresses a host name stands for (runs in a
worker thread)."""

_OPT_OUT = (
    "private, loopback and link-local addresses are refused to stop server-side request "
    "forgery; for local development pass allow_private=True (HttpReader, page_reader) or set "
    "LOVIA_HTTP_ALLOW_PRIVATE=1 for the process"
)


class BlockedAddressError(ToolError):
    """A built-in HTTP tool refused to connect to a non-public address."""


def system_resolver(host: str) -> list[str]:
    """Every address ``getaddrinfo`` gives for ``host``, in its order, without repeats."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def blocked_reason(address: str) -> str | None:
    """Why ``address`` (an IP literal) may not be dialled, or ``None`` when it is public."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        ip = _embedded_ipv4(ip) or ip
    # The named classes first (the message says which), then everything else that is not
    # globally routable (shared address space, documentation and benchmark networks, ...).
    for reason, hit in (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("non-global", not ip.is_global),
    ):
        if hit:
            return reason
    return None


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
"""The well-known NAT64 prefix (RFC 6052): a DNS64 resolver maps every IPv4 address in it."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches: IPv4-mapped (``::ffff:127.0.0.1``), NAT64
    (``64:ff9b::7f00:1``) and 6to4 (``2002:7f00:1::``). Each is judged as that address, so
    the verdict does not depend on how the Python version classifies the IPv6 range."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def check_addresses(host: str, addresses: Iterable[str]) -> list[str]:
    """``addresses`` when every one is public; raises ``BlockedAddressError``."""
    found = list(addresses)
    if not found:
        raise ToolError(f"{host} resolves to no address")
    for address in found:
        reason = blocked_reason(address)
        if reason is not None:
            shown = host if host == address else f"{host} resolves to {address}, which"
            article = "an" if reason[0] in "aeiou" else "a"
            raise BlockedAddressError(
                f"refused to connect: {shown} is {article} {reason} address", hint=_OPT_OUT
            )
    return found


def _literal(host: str) -> str | None:
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        return None
    return bare


def pinned_backend(
    resolver: Resolver | None = None, *, allow_private: bool = False
) -> httpcore.AsyncNetworkBackend:
    """An httpcore network backend that resolves each host once and dials that address;
    unless ``allow_private``, only after checking every answer is public."""
    import httpcore

    resolve = resolver or system_resolver

    class _PinningBackend(httpcore.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
        ) -> httpcore.AsyncNetworkStream:
            literal = _literal(host)
            if literal is not None:
                addresses: Sequence[str] = [literal]
            else:
                try:
                    addresses = await asyncio.to_thread(resolve, host)
                except OSError as exc:  # gaierror: the name does not resolve
                    raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
            if allow_private:
                if not addresses:
                    raise ToolError(f"{host} resolves to no address")
                checked = list(addresses)
            else:
                checked = check_addresses(host, addresses)
            # Each checked address in turn, as httpx would without the guard: the first
            # may be unreachable (an IPv6 answer on a host without IPv6, a server down).
            failure: Exception | None = None
            for address in checked:
                try:
                    return await self._inner.connect_tcp(
                        address,
                        port,
                        timeout=timeout,
                        local_address=local_address,
                        socket_options=socket_options,
                    )
                except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                    failure = exc
            assert failure is not None  # checked is never empty
            raise failure

        async def connect_unix_socket(
            self,
            path: str,
            timeout: float | None = None,
            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
        ) -> httpcore.AsyncNetworkStream:
            raise BlockedAddressError("the built-in HTTP tools do not use Unix sockets")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    return _PinningBackend()
