"""``ConfigRuntime``: the served configuration, changed while the server runs.

Every write builds the whole new document, validates it as one, builds the agent it
describes, and only then persists it (atomically) and swaps the agent into the server's agent
maps: the next message uses it, while a run already going keeps the agent it started with.
Listeners then get a ``config_changed`` event. Writes are serialised by one lock.

Keys are write-only: a read shows ``{set, hint}`` for each; in a write, ``null`` keeps the
stored key and ``""`` clears it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, Literal, Union

from lovia.agent import Agent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import NotFound, RunConflict, WebError
from .files import ConfigFile, config_error, save_config
from .probe import ProbeResult, validate_connection
from .schema import Connection, ModelProfile, Roles, WebConfig, slugify

__all__ = [
    "ConfigChanged",
    "ConfigNotSaved",
    "ConfigRuntime",
    "ConfigView",
    "KeyView",
    "ProfileInput",
    "ProfileView",
    "RolesInput",
    "SearchInput",
    "SearchView",
    "TestRequest",
    "mask_key",
]

_log = logging.getLogger("lovia.web.config")

AgentBuilder = Callable[[WebConfig], Agent[Any]]
Listener = Callable[["ConfigChanged"], Union[None, Awaitable[None]]]


def mask_key(key: str | None) -> str | None:
    """A key as it may be shown: its last four characters, or nothing for a short one."""
    if not key:
        return None
    return f"…{key[-4:]}" if len(key) >= 12 else "…"


class ConfigNotSaved(WebError):
    """The new configuration was valid but could not be written; nothing changed."""

    status = 500


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KeyView(BaseModel):
    """A stored secret as reads show it."""

    set: bool
    hint: str | None = None

    @classmethod
    def of(cls, key: str | None) -> KeyView:
        return cls(set=bool(key), hint=mask_key(key))


class ProfileView(BaseModel):
    id: str
    name: str
    model: str
    flavor: Literal["openai", "anthropic"]
    base_url: str
    context_window: int | None
    vision: Literal["auto", "on", "off"]
    api_key: KeyView
    complete: bool
    """Usable as it is (has a key, or its endpoint needs none)."""


class SearchView(BaseModel):
    backend: Literal["auto", "tavily", "ddg", "off"]
    tavily_api_key: KeyView


class ConfigView(BaseModel):
    """``GET /api/config``."""

    configured: bool
    scope: Literal["user", "project"]
    """Which file is in use: ``~/.lovia/config.json`` or ``./.lovia/config.json``."""
    models: list[ProfileView]
    roles: Roles
    search: SearchView


class ProfileInput(_Body):
    """A model profile to add (``POST``) or replace (``PUT``); ``api_key: null`` keeps the
    stored key on ``PUT``, ``""`` clears it."""

    id: str | None = Field(default=None, max_length=64)
    name: str | None = Field(default=None, max_length=200)
    model: str = Field(min_length=1, max_length=200)
    flavor: Literal["openai", "anthropic"] = "openai"
    base_url: str | None = Field(default=None, max_length=2048)
    api_key: str | None = Field(default=None, max_length=2048)
    context_window: int | None = Field(default=None, gt=0, le=100_000_000)
    vision: Literal["auto", "on", "off"] = "auto"


class RolesInput(_Body):
    chat: str | None = None
    vision: str | None = None
    aux: str | None = None


class SearchInput(_Body):
    backend: Literal["auto", "tavily", "ddg", "off"] = "auto"
    tavily_api_key: str | None = Field(default=None, max_length=2048)


class TestRequest(ProfileInput):
    """``POST /api/config/test``: a connection to probe. Without ``api_key``, the key stored
    for ``id`` is used."""


class ConfigChanged(BaseModel):
    """The ``config_changed`` event."""

    what: Literal["models", "roles", "search"]
    configured: bool


class ConfigRuntime:
    """The live configuration of a server that serves the CLI's default agent."""

    def __init__(
        self,
        loaded: ConfigFile,
        builder: AgentBuilder,
        *,
        agent_name: str = "lovia",
    ) -> None:
        self.config = loaded.config
        self.path: Path = loaded.path
        self.scope = loaded.scope
        self.agent_name = agent_name
        self._builder = builder
        self._lock = asyncio.Lock()
        self._listeners: list[Listener] = []
        self._targets: list[MutableMapping[str, Agent[Any]]] = []
        self.agent: Agent[Any] | None = builder(self.config) if self.config.configured else None

    @property
    def configured(self) -> bool:
        return self.agent is not None

    def served_agent(self) -> Agent[Any]:
        """The agent to serve now: the built one, or a stand-in while nothing is configured
        (chat is blocked until a model is saved)."""
        return self.agent or Agent(self.agent_name, instructions="", model=None)

    def bind(self, *agent_maps: MutableMapping[str, Agent[Any]]) -> None:
        """The server's agent maps that a write swaps the new agent into."""
        self._targets.extend(agent_maps)

    def on_change(self, listener: Listener) -> None:
        """Call ``listener(ConfigChanged)`` after every successful write."""
        self._listeners.append(listener)

    # -- reads ----------------------------------------------------------------------------

    def view(self) -> ConfigView:
        cfg = self.config
        return ConfigView(
            configured=self.configured,
            scope=self.scope,
            models=[_profile_view(m) for m in cfg.models],
            roles=cfg.roles,
            search=SearchView(
                backend=cfg.search.backend, tavily_api_key=KeyView.of(cfg.search.tavily_api_key)
            ),
        )

    # -- writes ---------------------------------------------------------------------------

    async def add_model(self, body: ProfileInput) -> ConfigView:
        async with self._lock:
            data = self.config.dump()
            new = body.model_dump(exclude_none=True)
            if not new.get("id"):
                taken = {m.id for m in self.config.models}
                base = slugify(body.name or body.model)
                new["id"] = _unique(base, taken)
            elif self.config.profile(new["id"]) is not None:
                raise RunConflict(
                    f"a model with id {new['id']!r} exists", hint="PUT it to replace it"
                )
            data["models"].append(new)
            return await self._commit(data, "models")

    async def update_model(self, model_id: str, body: ProfileInput) -> ConfigView:
        async with self._lock:
            old = self._require(model_id)
            data = self.config.dump()
            new = body.model_dump(exclude_none=True)
            new["id"] = model_id
            if body.api_key is None and old.api_key and _same_endpoint(old, new):
                new["api_key"] = old.api_key
            data["models"] = [new if m["id"] == model_id else m for m in data["models"]]
            return await self._commit(data, "models")

    async def delete_model(self, model_id: str) -> ConfigView:
        async with self._lock:
            self._require(model_id)
            if self.config.roles.chat == model_id:
                raise RunConflict(
                    f"model {model_id!r} is the chat model",
                    hint="assign another model to the chat role first",
                )
            data = self.config.dump()
            data["models"] = [m for m in data["models"] if m["id"] != model_id]
            roles = data.get("roles", {})
            data["roles"] = {k: v for k, v in roles.items() if v != model_id}
            return await self._commit(data, "models")

    async def set_roles(self, body: RolesInput) -> ConfigView:
        async with self._lock:
            data = self.config.dump()
            data["roles"] = body.model_dump(exclude_none=True)
            return await self._commit(data, "roles")

    async def set_search(self, body: SearchInput) -> ConfigView:
        async with self._lock:
            data = self.config.dump()
            key = self.config.search.tavily_api_key if body.tavily_api_key is None else None
            search: dict[str, str] = {"backend": body.backend}
            if body.tavily_api_key or key:
                search["tavily_api_key"] = body.tavily_api_key or key or ""
            data["search"] = search
            return await self._commit(data, "search")

    async def test(self, body: TestRequest, **probe: Any) -> ProbeResult:
        """Probe ``body``'s connection; a missing key reuses the one stored for its id."""
        fields = body.model_dump(exclude_none=True)
        stored = self.config.profile(body.id) if body.id else None
        if (
            body.api_key is None
            and stored is not None
            and stored.api_key
            and _same_endpoint(stored, fields)
        ):
            fields["api_key"] = stored.api_key
        fields.pop("id", None)
        try:
            profile = ModelProfile.model_validate(fields)
        except ValidationError as exc:
            raise config_error(exc, where="the request") from None
        return await validate_connection(profile.connection(), **probe)

    # -- internals ------------------------------------------------------------------------

    def _require(self, model_id: str) -> ModelProfile:
        found = self.config.profile(model_id)
        if found is None:
            raise NotFound(
                f"unknown model {model_id!r}",
                hint=f"models: {', '.join(m.id for m in self.config.models) or 'none yet'}",
            )
        return found

    async def _commit(self, data: dict[str, Any], what: str) -> ConfigView:
        try:
            config = WebConfig.model_validate(data)
        except ValidationError as exc:
            raise config_error(exc, where=None) from None
        agent = self._builder(config) if config.configured else None
        try:
            await asyncio.to_thread(save_config, config, self.path)
        except OSError as exc:
            _log.error("could not save %s: %s", self.path, exc)
            raise ConfigNotSaved(
                f"could not save the configuration ({type(exc).__name__})",
                hint=f"check that the {self.scope} config folder (.lovia) is writable",
            ) from None
        self.config = config
        if agent is not None:
            self.agent = agent
            for target in self._targets:
                target[self.agent_name] = agent
        elif self.agent is not None and not config.configured:
            self.agent = None
        await self._emit(ConfigChanged(what=what, configured=self.configured))  # type: ignore[arg-type]
        return self.view()

    async def _emit(self, event: ConfigChanged) -> None:
        for listener in list(self._listeners):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - a listener must not fail a write that happened
                _log.exception("a config_changed listener failed")


def _same_endpoint(stored: ModelProfile, fields: dict[str, Any]) -> bool:
    """Whether ``fields`` point at ``stored``'s endpoint: a stored key is never sent to
    another host (re-enter it when the URL changes)."""
    try:
        other = ModelProfile.model_validate({**fields, "id": stored.id, "api_key": None})
    except ValidationError:
        return False
    return other.base_url == stored.base_url and other.flavor == stored.flavor


def _unique(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 2
    while f"{base[:60]}-{n}" in taken:
        n += 1
    return f"{base[:60]}-{n}"


def _profile_view(m: ModelProfile) -> ProfileView:
    conn: Connection = m.connection()
    return ProfileView(
        id=m.id,
        name=m.name,
        model=m.model,
        flavor=m.flavor,
        base_url=conn.base_url,
        context_window=m.context_window,
        vision=m.vision,
        api_key=KeyView.of(m.api_key),
        complete=conn.complete,
    )
