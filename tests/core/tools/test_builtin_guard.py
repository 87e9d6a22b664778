"""The address guard of http_request and read_page: non-public addresses are refused after
DNS resolution and on every redirect hop, and the connection goes to the address checked.

Real servers run on 127.0.0.1. A "public" host is simulated end to end: an injected
resolver answers with a public address, and a patched ``socket.connect`` (the suite already
patches it to keep tests offline) routes that one address to the local server, so the test
can see exactly which address the tool dialled.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lovia.exceptions import ToolError
from lovia.http_config import make_async_client
from lovia.tools import HttpReader, http_request, page_reader, read_page
from lovia.tools._guard import blocked_reason

from tests.conftest import _guarded_connect, _real_connect
from tests.core.tools.builtin_server import Site, page, redirect, run_tool, serve
from tests.support import require

PUBLIC = "93.184.216.34"  # a globally routable address no test ever really reaches


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as s:
        s.routes["/"] = page("<title>Home</title><p>hello from the local server</p>")
        yield s


@pytest.fixture
def dialled(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket connects to; ``PUBLIC`` is routed to 127.0.0.1 (same port)."""
    seen: list[Any] = []

    def connect(sock: socket.socket, address: Any) -> None:
        seen.append(address)
        if isinstance(address, tuple) and address[0] == PUBLIC:
            return _real_connect(sock, ("127.0.0.1", address[1]))
        return _guarded_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


def resolver(answers: dict[str, list[list[str]]]) -> Any:
    """A resolver giving each name its next answer in turn (the last one repeats)."""
    asked: list[str] = []

    def resolve(host: str) -> list[str]:
        asked.append(host)
        queue = answers[host]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata endpoint
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-global"),  # carrier-grade NAT
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped IPv6
        ("::ffff:169.254.169.254", "link-local"),
    ],
)
def test_non_public_addresses_are_named_for_what_they_are(address: str, reason: str) -> None:
    assert blocked_reason(address) == reason


@pytest.mark.parametrize("address", [PUBLIC, "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(address) is None


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "0.0.0.0",
        "2130706433",  # 127.0.0.1 as one decimal number
        "0177.0.0.1",  # 127.0.0.1 in octal
        "0x7f.0.0.1",  # and in hex
        "[::ffff:127.0.0.1]",
    ],
)
async def test_http_request_refuses_loopback_however_it_is_spelt(site: Site, host: str) -> None:
    entry = await run_tool(http_request, {"url": site.url("/", host)})
    assert entry.is_error
    assert "refused to connect" in entry.output or "cannot send" in entry.output
    assert site.seen == []  # nothing reached the server


async def test_read_page_refuses_loopback_by_default(site: Site) -> None:
    entry = await run_tool(read_page, {"url": site.url("/")})
    assert entry.is_error
    assert "refused to connect: 127.0.0.1 is a loopback address" in entry.output
    assert "allow_private=True" in entry.output and "LOVIA_HTTP_ALLOW_PRIVATE=1" in entry.output
    assert site.seen == []


async def test_a_name_resolving_to_a_private_address_is_refused(site: Site) -> None:
    reader = HttpReader(resolver=resolver({"intranet.example": [["10.0.0.7"]]}))
    expected = "intranet.example resolves to 10.0.0.7, which is a private address"
    with pytest.raises(ToolError, match=expected):
        await reader.read(f"http://intranet.example:{site.port}/")


async def test_the_same_name_is_fetched_once_private_addresses_are_allowed(site: Site) -> None:
    resolve = resolver({"intranet.example": [["127.0.0.1"]]})
    got = await HttpReader(allow_private=True, resolver=resolve).read(
        f"http://intranet.example:{site.port}/"
    )
    assert got.title == "Home" and resolve.asked == ["intranet.example"]
    assert site.seen[0].headers["host"] == f"intranet.example:{site.port}"


async def test_one_private_answer_among_public_ones_is_enough_to_refuse() -> None:
    reader = HttpReader(resolver=resolver({"mixed.example": [[PUBLIC, "127.0.0.1"]]}))
    with pytest.raises(ToolError, match="resolves to 127.0.0.1"):
        await reader.read("http://mixed.example/")


async def test_a_public_name_is_fetched_from_the_address_that_was_checked(
    site: Site, dialled: list[Any]
) -> None:
    resolve = resolver({"www.example.com": [[PUBLIC]]})
    reader = HttpReader(resolver=resolve)
    got = await reader.read(f"http://www.example.com:{site.port}/")
    assert got.text == "hello from the local server"
    assert dialled == [(PUBLIC, site.port)]
    assert site.seen[0].headers["host"] == f"www.example.com:{site.port}"  # Host kept


async def test_a_rebinding_answer_after_the_check_is_never_dialled(
    site: Site, dialled: list[Any]
) -> None:
    # First answer public (checked), any later answer loopback: a rebinding attack needs
    # the connection to resolve again after the check. It must not.
    resolve = resolver({"rebind.example": [[PUBLIC], ["127.0.0.1"]]})
    got = await HttpReader(resolver=resolve).read(f"http://rebind.example:{site.port}/")
    assert got.status == 200
    assert resolve.asked == ["rebind.example"]
    assert dialled == [(PUBLIC, site.port)]


async def test_a_redirect_from_a_public_name_to_loopback_is_refused(
    site: Site, dialled: list[Any]
) -> None:
    site.routes["/go"] = redirect(site.url("/", "127.0.0.1"))
    reader = HttpReader(resolver=resolver({"public.example": [[PUBLIC]]}))
    with pytest.raises(ToolError, match="127.0.0.1 is a loopback address"):
        await reader.read(f"http://public.example:{site.port}/go")
    assert [s.path for s in site.seen] == ["/go"]  # the first hop was served, the second not
    assert dialled == [(PUBLIC, site.port)]


async def test_a_redirect_to_a_name_that_resolves_privately_is_refused(
    site: Site, dialled: list[Any]
) -> None:
    site.routes["/go"] = redirect(f"http://metadata.internal:{site.port}/")
    answers = {"public.example": [[PUBLIC]], "metadata.internal": [["169.254.169.254"]]}
    with pytest.raises(ToolError, match="169.254.169.254, which is a link-local"):
        await HttpReader(resolver=resolver(answers)).read(f"http://public.example:{site.port}/go")


async def test_http_request_checks_every_redirect_hop(
    site: Site, dialled: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    site.routes["/go"] = redirect(site.url("/", "[::1]"))
    resolve = resolver({"api.example": [[PUBLIC]]})
    monkeypatch.setattr("lovia.tools._guard.system_resolver", resolve)
    entry = await run_tool(http_request, {"url": f"http://api.example:{site.port}/go"})
    assert entry.is_error
    assert "::1 is a loopback address" in entry.output


async def test_allow_private_opens_the_reader_and_the_tool_factory(site: Site) -> None:
    assert (await HttpReader(allow_private=True).read(site.url("/"))).title == "Home"
    entry = await run_tool(page_reader(allow_private=True), {"url": site.url("/")})
    assert not entry.is_error and "hello from the local server" in entry.output


async def test_the_environment_variable_opens_the_ready_made_tools(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_HTTP_ALLOW_PRIVATE", "1")
    entry = await run_tool(http_request, {"url": site.url("/")})
    assert not entry.is_error and entry.output.startswith("HTTP 200 OK")
    entry = await run_tool(read_page, {"url": site.url("/", "localhost")})
    assert not entry.is_error and "Title: Home" in entry.output


@pytest.mark.parametrize("value", ["0", "no", ""])
async def test_falsy_spellings_of_the_variable_keep_the_guard(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("LOVIA_HTTP_ALLOW_PRIVATE", value)
    assert (await run_tool(http_request, {"url": site.url("/")})).is_error


async def test_provider_clients_are_never_guarded(site: Site) -> None:
    # A local model server on 127.0.0.1 must keep working: provider clients are built by
    # lovia.http_config, not by the tools' guarded transport.
    async with make_async_client() as client:
        response = await client.get(site.url("/"))
    assert response.status_code == 200


async def test_non_http_schemes_are_refused_before_any_connection(dialled: list[Any]) -> None:
    for url in ("file:///etc/passwd", "ftp://example.com/", "gopher://x/"):
        entry = await run_tool(http_request, {"url": url})
        assert entry.is_error and "only http and https" in entry.output
    assert dialled == []


async def test_a_redirect_to_another_scheme_is_refused(site: Site) -> None:
    site.routes["/go"] = redirect("file:///etc/passwd")
    with pytest.raises(ToolError, match="only http and https"):
        await HttpReader(allow_private=True).read(site.url("/go"))


@pytest.fixture
def tls_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Site, list[str]]]:
    """An HTTPS server whose certificate names only secure.example; records the SNI sent."""
    openssl = shutil.which("openssl")
    require(openssl is not None, "the openssl command is not installed")
    assert openssl is not None
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=secure.example",
         "-addext", "subjectAltName=DNS:secure.example"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    names: list[str] = []
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    server_tls.sni_callback = lambda sock, name, ctx: names.append(name or "")
    monkeypatch.setenv("LOVIA_HTTP_CA_BUNDLE", str(cert))  # trust exactly this certificate
    with serve(server_tls) as s:
        s.routes["/"] = page("<title>Secure</title><p>over TLS</p>")
        yield s, names


async def test_a_pinned_https_connection_keeps_the_host_name_for_sni_and_verification(
    tls_site: tuple[Site, list[str]], dialled: list[Any]
) -> None:
    site, names = tls_site
    reader = HttpReader(resolver=resolver({"secure.example": [[PUBLIC]]}))
    got = await reader.read(f"https://secure.example:{site.port}/")
    assert (got.title, got.text) == ("Secure", "over TLS")
    assert dialled == [(PUBLIC, site.port)]  # the checked address was dialled...
    assert names == ["secure.example"]  # ...but TLS named the host, not the address
    assert site.seen[0].headers["host"] == f"secure.example:{site.port}"


async def test_a_certificate_for_another_name_is_still_refused_when_pinned(
    tls_site: tuple[Site, list[str]], dialled: list[Any]
) -> None:
    site, _ = tls_site
    reader = HttpReader(resolver=resolver({"other.example": [[PUBLIC]]}))
    with pytest.raises(ToolError, match="cannot reach other.example"):
        await reader.read(f"https://other.example:{site.port}/")
    assert site.seen == []
