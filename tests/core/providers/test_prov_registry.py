"""Model strings to providers: prefixes, registration, entry points, LOVIA_MODEL."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lovia.providers.registry as registry
import pytest
from lovia.exceptions import UserError
from lovia.providers.anthropic import AnthropicProvider
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.providers.openai_responses import OpenAIResponsesProvider
from lovia.providers.registry import model_from_env, provider_from_string, register_provider
from lovia.registry import clear_entry_point_cache


@dataclass
class EchoProvider:
    model: str
    api_key: str | None = None
    name: str = "echo"
    supports_json_schema: bool = False


def bare_factory(model: str) -> Any:
    return EchoProvider(model)


def echo_factory(model: str, **kw: Any) -> Any:
    return EchoProvider(model, **kw)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(registry, "_registered", {})
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "LOVIA_MODEL",
    ):
        monkeypatch.delenv(var, raising=False)
    clear_entry_point_cache()
    yield
    clear_entry_point_cache()


@pytest.mark.parametrize(
    ("spec", "cls", "model"),
    [
        ("openai:gpt-4o", OpenAIChatProvider, "gpt-4o"),
        ("OAI:gpt-4o", OpenAIChatProvider, "gpt-4o"),
        ("Openai-Chat:gpt-4o", OpenAIChatProvider, "gpt-4o"),
        ("openai-responses:o3", OpenAIResponsesProvider, "o3"),
        ("anthropic:claude-sonnet-4-5", AnthropicProvider, "claude-sonnet-4-5"),
        ("CLAUDE:claude-haiku", AnthropicProvider, "claude-haiku"),
        ("openai:qwen2.5:7b", OpenAIChatProvider, "qwen2.5:7b"),
    ],
)
def test_builtin_prefixes_are_case_insensitive(spec: str, cls: type, model: str) -> None:
    provider = provider_from_string(spec, api_key="k")
    assert isinstance(provider, cls) and provider.model == model


def test_overrides_reach_the_adapter() -> None:
    p = provider_from_string(
        "openai:llama", base_url="http://127.0.0.1:8000/v1", supports_vision=True
    )
    assert isinstance(p, OpenAIChatProvider)
    assert p.base_url == "http://127.0.0.1:8000/v1" and p.supports_vision is True


def test_environment_keys_and_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anthropic")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    a = provider_from_string("anthropic:claude-x")
    o = provider_from_string("openai:m")
    assert isinstance(a, AnthropicProvider) and a.base_url == "http://127.0.0.1:9/anthropic"
    assert isinstance(o, OpenAIChatProvider) and o.base_url == "http://127.0.0.1:9/v1"


def test_missing_key_for_the_official_host_is_a_user_error() -> None:
    with pytest.raises(UserError) as info:
        provider_from_string("openai:gpt-4o")
    assert "OPENAI_API_KEY" in (info.value.hint or "")
    with pytest.raises(UserError, match="no API key"):
        provider_from_string("anthropic:claude-x")


def test_bare_name_is_openai_compatible_and_claude_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with caplog.at_level(logging.WARNING, logger="lovia.providers"):
        plain = provider_from_string("llama3")
        assert not caplog.records
        with pytest.warns(UserWarning, match="anthropic:claude-3-haiku"):
            claude = provider_from_string("claude-3-haiku")
    assert isinstance(plain, OpenAIChatProvider) and isinstance(claude, OpenAIChatProvider)
    assert "anthropic:claude-3-haiku" in caplog.text


def test_unknown_prefix_is_a_user_error_with_a_hint() -> None:
    with pytest.raises(UserError) as info:
        provider_from_string("nope:model")
    assert "openai:<model>" in (info.value.hint or "") and "anthropic" in (info.value.hint or "")
    with pytest.raises(UserError):
        provider_from_string("openai:")
    with pytest.raises(UserError):
        provider_from_string("  ")


def test_registration_overrides_builtins_and_later_wins() -> None:
    register_provider("openai", echo_factory)
    first = provider_from_string("openai:x", api_key="k")
    assert isinstance(first, EchoProvider) and first.api_key == "k"
    register_provider("OpenAI", bare_factory)
    assert isinstance(provider_from_string("openai:y"), EchoProvider)
    with pytest.raises(UserError):
        register_provider("a:b", bare_factory)
    with pytest.raises(UserError):
        register_provider("x", "not callable")  # type: ignore[arg-type]


def test_a_factory_without_overrides_fails_only_when_overrides_are_given() -> None:
    register_provider("echo", bare_factory)
    assert provider_from_string("echo:m").model == "m"
    with pytest.raises(UserError, match="does not accept"):
        provider_from_string("echo:m", api_key="k")


def _install_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: dict[str, str], module: str
) -> None:
    """A real (if minimal) installed distribution: a module and a .dist-info with entry points."""
    (tmp_path / "lovia_test_thirdparty.py").write_text(module)
    info = tmp_path / "lovia_test_thirdparty-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: lovia-test-thirdparty\nVersion: 1.0\n"
    )
    lines = "\n".join(f"{name} = {target}" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[lovia.providers]\n{lines}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lovia_test_thirdparty", raising=False)
    clear_entry_point_cache()


THIRD_PARTY = """
from dataclasses import dataclass

LOADED = []

@dataclass
class Echo:
    model: str
    api_key: str | None = None
    name: str = "echo"
    supports_json_schema: bool = False

    def __post_init__(self):
        LOADED.append(self.model)

def make(model):
    return Echo(model + "!")

NOT_A_FACTORY = 42
"""


def test_entry_points_load_lazily_and_cannot_shadow_builtins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_distribution(
        tmp_path,
        monkeypatch,
        {
            "echo": "lovia_test_thirdparty:Echo",
            "Made": "lovia_test_thirdparty:make",
            "openai": "lovia_test_thirdparty:Echo",
            "broken": "lovia_test_thirdparty:NOT_A_FACTORY",
        },
        THIRD_PARTY,
    )
    assert "lovia_test_thirdparty" not in sys.modules  # nothing loaded until asked
    p: Any = provider_from_string("openai:gpt", api_key="k")
    assert isinstance(p, OpenAIChatProvider)  # the entry point named openai is ignored
    assert "lovia_test_thirdparty" not in sys.modules
    echo: Any = provider_from_string("ECHO:m", api_key="k")
    assert type(echo).__name__ == "Echo" and echo.api_key == "k"
    assert provider_from_string("made:m").model == "m!"
    with pytest.raises(UserError, match="neither a class nor a callable"):
        provider_from_string("broken:m")
    assert "echo" in registry.registered_prefixes()


def test_an_entry_point_that_fails_to_load_is_a_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_distribution(
        tmp_path,
        monkeypatch,
        {
            "ghost": "lovia_test_thirdparty:MISSING",
            "gone": "lovia_test_no_such_module:make",
        },
        THIRD_PARTY,
    )
    for spec in ("ghost:m", "gone:m"):
        with pytest.raises(UserError, match="failed to load") as info:
            provider_from_string(spec)
        assert "entry point" in (info.value.hint or "")


def test_model_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError) as info:
        model_from_env()
    assert "LOVIA_MODEL" in (info.value.hint or "")
    assert model_from_env(required=False) is None
    monkeypatch.setenv("OPENAI_DEFAULT_MODEL", "legacy")  # legacy variables are ignored
    assert model_from_env(required=False) is None
    monkeypatch.setenv("LOVIA_MODEL", " anthropic:claude-x ")
    assert model_from_env() == "anthropic:claude-x"
