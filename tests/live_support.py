"""What the live tests share: the opt-in gate, the endpoint from ``.env`` or the environment,
provider builders and ``step``, which makes a failure name the endpoint, model and step.

The live tests (``-m live_provider``) call the endpoint ``LOVIA_LIVE_MODEL`` names. They are
skipped unless ``LOVIA_LIVE_TESTS=1`` is set in the process environment: the opt-in spends
tokens, so it is never read from ``.env``. Everything else (the model, keys, base URLs) comes
from the environment first, then from the repository's ``.env`` (simple ``KEY=VALUE`` lines).
``.env`` is only read, never copied into ``os.environ``, so the offline suite never sees it.
See docs/live-tests.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
from lovia.exceptions import ProviderError
from lovia.http_config import make_async_client
from lovia.providers.base import ContextWindowDiscovery, ContextWindowProvider, Provider
from lovia.providers.registry import provider_from_string

__all__ = [
    "LiveEndpoint",
    "claimed_window",
    "declared",
    "lift_network_guard",
    "live_endpoint",
    "live_fixture",
    "parse_dotenv",
    "setting",
    "skip_if_rejected",
    "step",
]

ENV_FILE = Path(__file__).resolve().parents[1] / ".env"
_ANTHROPIC_PREFIXES = ("anthropic", "claude")


def parse_dotenv(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines: blank lines and ``#`` comments skipped, an ``export `` prefix and
    one pair of matching quotes around the value dropped; a line without ``=`` is ignored."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


@cache
def _dotenv() -> dict[str, str]:
    try:
        return parse_dotenv(ENV_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def setting(
    name: str,
    *,
    environ: Mapping[str, str] | None = None,
    dotenv: Mapping[str, str] | None = None,
) -> str | None:
    """``name`` from the environment, else from ``.env`` (the environment always wins, even
    when it sets the variable empty); ``None`` when neither has a non-blank value."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    if value is None:
        value = (_dotenv() if dotenv is None else dotenv).get(name)
    value = (value or "").strip()
    return value or None


def declared(name: str) -> bool:
    """Whether the user declared a capability (``NAME=1``): then its absence fails, not skips."""
    return setting(name) == "1"


@dataclass(frozen=True)
class LiveEndpoint:
    """The endpoint under test: the model string, its wire family, key and base URL."""

    spec: str
    anthropic: bool
    api_key: str | None
    base_url: str | None
    made: list[Provider] = field(default_factory=list)
    """Every provider built through ``provider()``, closed by the ``live`` fixture."""
    clients: list[httpx.AsyncClient] = field(default_factory=list)
    """Every client made by ``recording_client()``, closed by the ``live`` fixture."""

    def provider(self, *, api_key: str | None = None, **options: Any) -> Provider:
        """A fresh provider for this endpoint; ``options`` go to the adapter's constructor."""
        key = api_key if api_key is not None else self.api_key
        provider = provider_from_string(self.spec, api_key=key, base_url=self.base_url)
        if options:
            # The registry takes no adapter options: the same adapter class, built with them
            # (building one sends nothing, so the first needs no closing).
            provider = type(provider)(  # type: ignore[call-arg]
                provider.model, api_key=key, base_url=self.base_url, **options
            )
        self.made.append(provider)
        return provider

    def recording_client(self, bodies: list[dict[str, Any]]) -> httpx.AsyncClient:
        """The client lovia would make (its timeout, TLS and proxy settings; pass it as
        ``client=``) that also keeps every JSON body it sends."""

        async def keep(request: httpx.Request) -> None:
            if request.content:
                bodies.append(json.loads(request.content))

        client = make_async_client()
        client.event_hooks["request"].append(keep)
        self.clients.append(client)
        return client

    def where(self) -> str:
        """``model at base URL``, for failure messages (the adapters' defaults when unset)."""
        default = "https://api.anthropic.com" if self.anthropic else "https://api.openai.com/v1"
        return f"{self.spec} at {self.base_url or default}"


def live_endpoint() -> LiveEndpoint:
    """The configured endpoint; skips the test (with the reason) when live tests are off."""
    if os.environ.get("LOVIA_LIVE_TESTS") != "1":
        pytest.skip("live test: set LOVIA_LIVE_TESTS=1 (and LOVIA_LIVE_MODEL) to run it")
    spec = setting("LOVIA_LIVE_MODEL")
    if spec is None:
        pytest.fail(
            "LOVIA_LIVE_TESTS=1 but LOVIA_LIVE_MODEL is not set: name the model under test, "
            "e.g. LOVIA_LIVE_MODEL=openai:gpt-4o-mini (in the environment or .env)"
        )
    prefix = spec.partition(":")[0].strip().lower() if ":" in spec else "openai"
    anthropic = prefix in _ANTHROPIC_PREFIXES
    family = "ANTHROPIC" if anthropic else "OPENAI"
    return LiveEndpoint(
        spec=spec,
        anthropic=anthropic,
        api_key=setting(f"{family}_API_KEY"),
        base_url=setting(f"{family}_BASE_URL"),
    )


async def claimed_window(provider: Provider) -> int | None:
    """The window ``provider`` claims: its endpoint's ``/models`` first, then lovia's table."""
    if isinstance(provider, ContextWindowDiscovery):
        found = await provider.discover_context_window()
        if found is not None:
            return found
    if isinstance(provider, ContextWindowProvider):
        return provider.context_window()
    return None


def skip_if_rejected(exc: ProviderError, option: str, what: str) -> None:
    """Skip when the endpoint refused ``option`` (a 400/422 naming it): it lacks ``what``."""
    if exc.status_code in (400, 422) and option in str(exc).lower():
        pytest.skip(f"the endpoint lacks {what}: it rejected {option}: {exc}")


@contextmanager
def step(endpoint: LiveEndpoint, name: str) -> Iterator[None]:
    """Run one step of a live test; a failure inside names the endpoint, model and step."""
    try:
        yield
    # Skips and xfails are BaseException outcomes: they pass through untouched.
    except Exception as exc:  # noqa: BLE001 - re-raised as a failure that names the endpoint
        pytest.fail(
            f"live step {name!r} failed against {endpoint.where()}: {type(exc).__name__}: {exc}",
            pytrace=True,
        )


@pytest.fixture(name="live")
async def live_fixture() -> AsyncIterator[LiveEndpoint]:
    """The configured endpoint (skips when live tests are off); closes the providers made."""
    endpoint = live_endpoint()
    yield endpoint
    for provider in endpoint.made:
        await provider.aclose()  # type: ignore[attr-defined]
    for client in endpoint.clients:
        await client.aclose()


@pytest.fixture(autouse=True, name="_no_internet")
def lift_network_guard() -> Iterator[None]:
    """Overrides the suite's no-network guard in the live modules: their endpoint may be
    remote, and they run only when ``LOVIA_LIVE_TESTS=1`` asks for it."""
    yield
