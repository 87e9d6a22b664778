"""lovia.http_config: timeout, trust_env, TLS verification order, and the shared client."""

from __future__ import annotations

import ssl
from pathlib import Path

import certifi
import pytest
from lovia.exceptions import UserError
from lovia.http_config import (
    DEFAULT_TIMEOUT,
    make_async_client,
    resolve_timeout,
    resolve_trust_env,
    resolve_verify,
)

from .prov_http_server import json_server


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "LOVIA_PROVIDER_TIMEOUT",
        "LOVIA_PROVIDER_TRUST_ENV",
        "LOVIA_HTTP_CA_BUNDLE",
        "LOVIA_HTTP_INSECURE",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (None, DEFAULT_TIMEOUT),
        ("12.5", 12.5),
        ("0", 300.0),
        ("-3", 300.0),
        ("abc", 300.0),
        ("inf", 300.0),
    ],
)
def test_timeout_from_env(
    monkeypatch: pytest.MonkeyPatch, env: str | None, expected: float
) -> None:
    if env is not None:
        monkeypatch.setenv("LOVIA_PROVIDER_TIMEOUT", env)
    if env is not None and expected == DEFAULT_TIMEOUT:  # an ignored value is a warning
        with pytest.warns(UserWarning, match="LOVIA_PROVIDER_TIMEOUT"):
            assert resolve_timeout() == expected
    else:
        assert resolve_timeout() == expected
    assert resolve_timeout(7) == 7.0  # explicit wins


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (None, False),
        ("1", True),
        ("TRUE", True),
        ("yes", True),
        ("on", True),
        ("0", False),
        ("nah", False),
    ],
)
def test_trust_env_flag(monkeypatch: pytest.MonkeyPatch, env: str | None, expected: bool) -> None:
    if env is not None:
        monkeypatch.setenv("LOVIA_PROVIDER_TRUST_ENV", env)
    if env == "nah":  # neither an on nor an off spelling: a warning, and off
        with pytest.warns(UserWarning, match="LOVIA_PROVIDER_TRUST_ENV='nah'"):
            assert resolve_trust_env() is expected
    else:
        assert resolve_trust_env() is expected
    assert resolve_trust_env(not expected) is (not expected)


def test_verification_order(monkeypatch: pytest.MonkeyPatch) -> None:
    import truststore

    default = resolve_verify()
    assert isinstance(default, truststore.SSLContext)  # truststore is installed here
    monkeypatch.setenv("LOVIA_HTTP_CA_BUNDLE", certifi.where())
    bundle = resolve_verify()
    assert isinstance(bundle, ssl.SSLContext) and not isinstance(bundle, truststore.SSLContext)
    monkeypatch.setenv("LOVIA_HTTP_INSECURE", "yes")
    assert resolve_verify() is False
    assert resolve_verify(True) is not False  # explicit beats the environment
    ctx = ssl.create_default_context()
    assert resolve_verify(ctx) is ctx


@pytest.mark.parametrize("content", [None, "not a certificate\n"], ids=["missing", "garbage"])
def test_an_unusable_ca_bundle_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str | None
) -> None:
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_text(content)
    monkeypatch.setenv("LOVIA_HTTP_CA_BUNDLE", str(bundle))
    with pytest.raises(UserError) as info:
        resolve_verify()
    assert str(bundle) in str(info.value) and "LOVIA_HTTP_CA_BUNDLE" in (info.value.hint or "")
    with pytest.raises(UserError):
        make_async_client(verify=str(bundle))


async def test_client_settings_and_socks_proxies_are_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1")
    monkeypatch.setenv("LOVIA_PROVIDER_TIMEOUT", "42")
    async with (
        json_server({"/ping": (200, {"ok": True})}) as server,
        make_async_client(trust_env=True) as client,
    ):
        assert client.timeout.read == 42.0
        response = await client.get(server.url + "/ping")
        assert response.json() == {"ok": True}
    async with make_async_client() as plain:
        assert plain.trust_env is False


async def test_http_proxies_survive_when_a_socks_proxy_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with json_server({"/ping": (200, {"ok": True})}) as server:
        monkeypatch.setenv("ALL_PROXY", "socks5h://127.0.0.1:1")
        monkeypatch.setenv("HTTP_PROXY", server.url)  # the test server doubles as the proxy
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,.internal")
        async with make_async_client(trust_env=True) as client:
            assert (await client.get(server.url + "/ping")).json() == {"ok": True}  # direct
            await client.get("http://models.example.test/v1/models")  # through the proxy
        assert server.hits == ["/ping", "http://models.example.test/v1/models"]
