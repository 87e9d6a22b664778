"""The live tests' own plumbing, offline: ``.env`` parsing, precedence and the opt-in gate."""

from __future__ import annotations

import pytest
from lovia.exceptions import ProviderError

from tests.live_support import (
    LiveEndpoint,
    live_endpoint,
    parse_dotenv,
    setting,
    skip_if_rejected,
    step,
)


def test_dotenv_lines_comments_exports_and_quotes() -> None:
    text = (
        "# the endpoint\n"
        "LOVIA_LIVE_MODEL=openai:gpt-4o-mini\n"
        "\n"
        "export OPENAI_BASE_URL = 'http://127.0.0.1:8000/v1'\n"
        'OPENAI_API_KEY="sk-a=b"\n'
        "not a pair\n"
        "=no-key\n"
        "EMPTY=\n"
    )
    assert parse_dotenv(text) == {
        "LOVIA_LIVE_MODEL": "openai:gpt-4o-mini",
        "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1",
        "OPENAI_API_KEY": "sk-a=b",
        "EMPTY": "",
    }


def test_the_environment_wins_over_dotenv() -> None:
    dotenv = {"A": "from-file", "B": "from-file", "C": "  "}
    environ = {"A": "from-env", "B": ""}
    assert setting("A", environ=environ, dotenv=dotenv) == "from-env"
    assert setting("B", environ=environ, dotenv=dotenv) is None  # set empty: not overridden
    assert setting("C", environ=environ, dotenv=dotenv) is None
    assert setting("D", environ=environ, dotenv=dotenv) is None


def test_live_tests_skip_with_a_reason_unless_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOVIA_LIVE_TESTS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="LOVIA_LIVE_TESTS=1"):
        live_endpoint()


def test_a_failed_step_names_the_endpoint_model_and_step() -> None:
    endpoint = LiveEndpoint("anthropic:claude-x", True, "k", "http://127.0.0.1:9/gw")
    with pytest.raises(pytest.fail.Exception) as info, step(endpoint, "tool call"):
        raise AssertionError("no call")
    message = str(info.value)
    assert "anthropic:claude-x" in message and "http://127.0.0.1:9/gw" in message
    assert "'tool call'" in message and "no call" in message


def test_only_a_rejection_naming_the_option_is_a_skip() -> None:
    refused = ProviderError("400: 'thinking' is not supported by this model", status_code=400)
    with pytest.raises(pytest.skip.Exception, match="lacks extended thinking"):
        skip_if_rejected(refused, "thinking", "extended thinking")
    skip_if_rejected(ProviderError("thinking overloaded", status_code=529), "thinking", "x")
    skip_if_rejected(ProviderError("bad field", status_code=400), "thinking", "x")
