"""IPv6 forms that carry an IPv4 address: the guard judges the IPv4 address inside.

Before, a 6to4 address wrapping 127.0.0.1 or the metadata address passed on Python 3.11
(whose ``ipaddress`` calls 2002::/16 global), and a NAT64 address of a public site was
refused as "reserved", which blocks every IPv4-only site on an IPv6-only (DNS64) network.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from lovia.exceptions import ToolError
from lovia.tools import HttpReader, http_request

from tests.core.tools.builtin_server import run_tool


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of 169.254.169.254
        ("2002:a00:7::", "private"),  # 6to4 of 10.0.0.7
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("64:ff9b::127.0.0.1", "loopback"),
    ],
)
async def test_an_ipv4_address_inside_ipv6_is_judged_as_itself(address: str, kind: str) -> None:
    entry = await run_tool(http_request, {"url": f"http://[{address}]:8080/"})
    assert entry.is_error
    assert f"refused to connect: {address} is a {kind} address" in entry.output


async def test_a_name_resolving_to_a_6to4_loopback_is_refused() -> None:
    reader = HttpReader(resolver=lambda host: ["2002:7f00:1::1"])
    with pytest.raises(ToolError, match="resolves to 2002:7f00:1::1, which is a loopback address"):
        await reader.read("http://sixtofour.example/")


@pytest.mark.parametrize("address", ["64:ff9b::5db8:d822", "2002:5db8:d822::1"])
async def test_the_nat64_or_6to4_form_of_a_public_address_is_dialled(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dialled: list[Any] = []

    def connect(sock: socket.socket, to: Any) -> None:
        dialled.append(to[0])
        raise ConnectionRefusedError("offline")  # the address was dialled; no test goes out

    monkeypatch.setattr(socket.socket, "connect", connect)
    reader = HttpReader(resolver=lambda host: [address], timeout=5)
    with pytest.raises(ToolError) as caught:
        await reader.read("http://ipv6-only.example/")
    assert "refused to connect" not in str(caught.value)
    assert dialled == [address]
