"""The ``config.json`` schema: model profiles, the roles they play, and the search backend.

``WebConfig`` is the whole document. It validates as one: ids are slugs and unique, role
references name a profile (a missing ``chat`` role heals to the first profile), a vendor prefix
on ``model`` decides the flavour, and ``base_url`` is normalised (the flavour's official
endpoint when absent). Unknown keys are ignored, so a newer file still loads; ``None`` fields
are omitted when it is saved (``WebConfig.dump``).
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Connection",
    "DEFAULT_BASE_URLS",
    "Flavor",
    "ID_PATTERN",
    "KEY_ENV",
    "ModelProfile",
    "Roles",
    "SearchConfig",
    "WebConfig",
    "normalise_base_url",
    "slugify",
]

Flavor = Literal["openai", "anthropic"]

ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"
"""Profile ids: lower-case letters, digits and inner hyphens, at most 64 characters."""

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
KEY_ENV: dict[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_OFFICIAL_HOSTS = {"openai": ("api.openai.com",), "anthropic": ("api.anthropic.com",)}
_PREFIXES: dict[str, Flavor] = {
    "openai": "openai",
    "oai": "openai",
    "openai-chat": "openai",
    "anthropic": "anthropic",
    "claude": "anthropic",
}
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal"})
_MAX_TEXT = 2048


def slugify(text: str, *, fallback: str = "model") -> str:
    """``text`` as a profile id: ASCII, lower case, runs of anything else as one hyphen."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")[:64].strip("-")
    return slug or fallback


def _official(flavor: str, base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in _OFFICIAL_HOSTS[flavor])


def normalise_base_url(value: str, flavor: str) -> str:
    """``value`` stripped of blanks and trailing slashes; it must be an http(s) URL with a
    host. Anthropic's ``/v1`` suffix is dropped (the adapter adds it)."""
    url = value.strip().rstrip("/")
    if any(ord(c) <= 32 or c == "\x7f" for c in url):
        raise ValueError("must not contain spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise ValueError("must not carry a query or a fragment")
    if "@" in parts.netloc:
        raise ValueError("must not carry credentials (user:password@); put the key in api_key")
    if flavor == "anthropic" and url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


@dataclass(frozen=True, slots=True)
class Connection:
    """Everything needed to reach one model: what the probe tests and the provider uses."""

    model: str
    flavor: Flavor
    base_url: str
    api_key: str | None = None
    context_window: int | None = None

    @property
    def official(self) -> bool:
        """Whether ``base_url`` is the vendor's own API (which needs a key)."""
        return _official(self.flavor, self.base_url)

    @property
    def keyless_gateway(self) -> bool:
        """A server on this machine (Ollama, llama.cpp, vLLM) that needs no key."""
        host = (urlsplit(self.base_url).hostname or "").lower()
        return host in _LOCAL_HOSTS or host.startswith("127.")

    @property
    def env_key(self) -> str | None:
        """The key the adapter falls back to (``OPENAI_API_KEY``...) when none is set."""
        return os.environ.get(KEY_ENV[self.flavor]) or None

    @property
    def complete(self) -> bool:
        """Usable as it is: it has a key, or its endpoint needs none."""
        return bool(self.api_key or self.env_key) or not self.official

    def spec(self) -> str:
        """The ``vendor:model`` string lovia's provider registry resolves."""
        return f"{self.flavor}:{self.model}"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class ModelProfile(_Doc):
    """One model the server can use: how to reach it, its window and whether it sees images."""

    id: str = Field(default="", max_length=64)
    name: str = Field(default="", max_length=200)
    model: str = Field(min_length=1, max_length=200)
    flavor: Flavor = "openai"
    base_url: str | None = Field(default=None, max_length=_MAX_TEXT)
    api_key: str | None = Field(default=None, max_length=_MAX_TEXT)
    context_window: int | None = Field(default=None, gt=0, le=100_000_000)
    vision: Literal["auto", "on", "off"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _vendor_prefix(cls, data: Any) -> Any:
        # "anthropic:claude-x" decides the flavour; a bare name keeps the declared one, and a
        # tag such as Ollama's "llama3:8b" is a bare name (its prefix is no vendor).
        if isinstance(data, dict) and isinstance(data.get("model"), str):
            prefix, sep, rest = data["model"].strip().partition(":")
            flavor = _PREFIXES.get(prefix.strip().lower()) if sep else None
            if flavor is not None and rest.strip():
                data = {**data, "model": rest.strip(), "flavor": flavor}
        return data

    @field_validator("model", "name")
    @classmethod
    def _printable(cls, value: str) -> str:
        if any(ord(c) < 32 or c == "\x7f" for c in value):
            raise ValueError("must not contain control characters")
        return value

    @field_validator("api_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value is not None and any(ord(c) < 33 or ord(c) > 126 for c in value):
            raise ValueError("must be printable ASCII without spaces")
        return value or None

    @model_validator(mode="after")
    def _fill(self) -> ModelProfile:
        if not self.id:
            self.id = slugify(self.name or self.model)
        elif not re.fullmatch(ID_PATTERN, self.id):
            raise ValueError(
                f"id {self.id!r} must be a slug (lower-case letters, digits and hyphens)"
            )
        if not self.name:
            self.name = self.model
        base = self.base_url or DEFAULT_BASE_URLS[self.flavor]
        try:
            self.base_url = normalise_base_url(base, self.flavor)
        except ValueError as exc:
            shown = re.sub(r"//[^/@]*@", "//***@", base)  # a password is never echoed
            raise ValueError(f"base_url {shown!r} {exc}") from None
        return self

    def connection(self) -> Connection:
        assert self.base_url is not None  # filled by validation
        return Connection(
            model=self.model,
            flavor=self.flavor,
            base_url=self.base_url,
            api_key=self.api_key,
            context_window=self.context_window,
        )


class Roles(_Doc):
    """Which profile does what: ``chat`` (the agent), ``vision`` (describing images), ``aux``
    (titles, follow-ups, curation). ``None`` is unassigned."""

    chat: str | None = None
    vision: str | None = None
    aux: str | None = None


class SearchConfig(_Doc):
    """The web-search backend: ``auto`` is Tavily with a key, else DuckDuckGo if installed."""

    backend: Literal["auto", "tavily", "ddg", "off"] = "auto"
    tavily_api_key: str | None = Field(default=None, max_length=_MAX_TEXT)

    @field_validator("tavily_api_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return value or None


class WebConfig(_Doc):
    """The whole ``config.json``."""

    version: Literal[1] = 1
    models: list[ModelProfile] = Field(default_factory=list, max_length=200)
    roles: Roles = Field(default_factory=Roles)
    search: SearchConfig = Field(default_factory=SearchConfig)

    @model_validator(mode="after")
    def _references(self) -> WebConfig:
        ids = [m.id for m in self.models]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate model id {dupes[0]!r} (ids must be unique)")
        if self.roles.chat is None and self.models:
            self.roles.chat = self.models[0].id
        for role in ("chat", "vision", "aux"):
            ref = getattr(self.roles, role)
            if ref is not None and ref not in ids:
                raise ValueError(f"roles.{role} names an unknown model id {ref!r}")
        return self

    def profile(self, model_id: str | None) -> ModelProfile | None:
        return next((m for m in self.models if m.id == model_id), None)

    @property
    def chat_profile(self) -> ModelProfile | None:
        return self.profile(self.roles.chat)

    @property
    def configured(self) -> bool:
        """A chat model exists and is complete (has a key, or needs none)."""
        chat = self.chat_profile
        return chat is not None and chat.connection().complete

    def dump(self) -> dict[str, Any]:
        """The JSON form written to disk: ``None`` fields omitted."""
        return self.model_dump(mode="json", exclude_none=True)
