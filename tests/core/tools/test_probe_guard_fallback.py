"""A host name with several public addresses: when the first cannot be reached (an IPv6
answer on a host without IPv6, one server of several down), the next checked address is
dialled, as httpx does without the guard, instead of failing the fetch."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from lovia.exceptions import ToolError
from lovia.tools import HttpReader

from tests.conftest import _guarded_connect, _real_connect
from tests.core.tools.builtin_server import Site, page, serve

UP = "93.184.216.34"
DOWN_V6 = "2606:2800:220:1:248:1893:25c8:1946"
DOWN_V4 = "93.184.216.35"


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as s:
        s.routes["/"] = page("<title>Home</title><p>reached</p>")
        yield s


@pytest.fixture
def dialled(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address dialled; ``UP`` reaches the local server, the ``DOWN`` ones refuse."""
    seen: list[Any] = []

    def connect(sock: socket.socket, address: Any) -> None:
        seen.append(address[0])
        if address[0] == UP:
            return _real_connect(sock, ("127.0.0.1", address[1]))
        if address[0] in (DOWN_V4, DOWN_V6):
            raise OSError(101, "Network is unreachable")
        return _guarded_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


@pytest.mark.parametrize("first", [DOWN_V6, DOWN_V4])
async def test_the_next_checked_address_is_dialled_when_one_is_unreachable(
    site: Site, dialled: list[Any], first: str
) -> None:
    reader = HttpReader(resolver=lambda host: [first, UP])
    got = await reader.read(f"http://dual.example:{site.port}/")
    assert got.text == "reached"
    assert dialled == [first, UP]


async def test_every_address_unreachable_is_still_a_tool_error(dialled: list[Any]) -> None:
    reader = HttpReader(resolver=lambda host: [DOWN_V6, DOWN_V4])
    with pytest.raises(ToolError, match="dual.example"):
        await reader.read("http://dual.example:8080/")
    assert dialled == [DOWN_V6, DOWN_V4]
