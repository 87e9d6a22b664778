"""``ProviderTimeouts`` keeps the documented promises: fields not passed come from the
``LOVIA_PROVIDER_*`` variables, the connect and first-byte limits never exceed the read
timeout, and a value that is no timeout is refused when the adapter is built (before, a
``timeout=-1`` failed every call at once as a retryable "sent no response within -1 s")."""

from __future__ import annotations

import pytest
from lovia.exceptions import UserError
from lovia.http_config import ProviderTimeouts
from lovia.providers import AnthropicProvider, OpenAIChatProvider


def test_fields_not_passed_come_from_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_PROVIDER_FIRST_BYTE_TIMEOUT", "5")
    monkeypatch.setenv("LOVIA_PROVIDER_CONNECT_TIMEOUT", "3")
    provider = OpenAIChatProvider(
        "qwen", base_url="http://127.0.0.1:1/v1", timeout=ProviderTimeouts(read=600)
    )
    assert provider.timeouts == ProviderTimeouts(read=600, connect=3, first_byte=5, probe=2)
    assert ProviderTimeouts(read=600, first_byte=120).first_byte == 120  # passed wins


def test_connect_and_first_byte_never_exceed_the_read_timeout() -> None:
    limits = ProviderTimeouts(read=2, connect=30, first_byte=90)
    assert (limits.read, limits.connect, limits.first_byte, limits.probe) == (2, 2, 2, 2)
    provider = AnthropicProvider(
        "claude-x", base_url="http://127.0.0.1:1", api_key="k", timeout=ProviderTimeouts(read=1)
    )
    assert provider.timeouts.first_byte == 1 and provider.timeouts.connect == 1


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "30", True])
def test_a_value_that_is_no_timeout_is_refused_when_the_adapter_is_built(bad: object) -> None:
    with pytest.raises(UserError, match="is not a positive number of seconds") as caught:
        OpenAIChatProvider("qwen", base_url="http://127.0.0.1:1/v1", timeout=bad)  # type: ignore[arg-type]
    assert caught.value.hint and "greater than 0" in caught.value.hint
    with pytest.raises(UserError, match="first_byte="):
        ProviderTimeouts(first_byte=bad)  # type: ignore[arg-type]
