"""Model strings (``"vendor:model"``) to providers.

Resolution of a prefix, case-insensitive:

1. ``register_provider`` registrations (they override built-ins; the latest wins);
2. the built-ins: ``openai`` (``oai``, ``openai-chat``), ``openai-responses``, ``anthropic``
   (``claude``);
3. the ``lovia.providers`` entry-point group, loaded lazily and only for the prefix asked
   for. An entry point never shadows a built-in prefix.

A string without a colon is a model on an OpenAI-compatible endpoint; one that starts with
``claude`` warns (``warnings.warn`` and the log), since it almost certainly meant
``anthropic:``. Adapter modules (and so httpx) are imported only when a provider is built.
"""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from collections.abc import Callable
from typing import Any

from ..exceptions import UserError
from ..registry import PROVIDERS as _GROUP
from ..registry import entry_points_of
from .base import Provider

__all__ = [
    "ProviderFactory",
    "model_from_env",
    "provider_from_string",
    "register_provider",
    "registered_prefixes",
]

_log = logging.getLogger("lovia.providers")

ProviderFactory = Callable[..., Provider]
"""``factory(model, *, api_key=None, base_url=None, supports_vision=None) -> Provider``.

A class or any callable. The keyword arguments are passed only when the caller gave them,
so a factory that accepts none of them still works for plain model strings.
"""

_registered: dict[str, ProviderFactory] = {}


def _openai_chat(model: str, **kwargs: Any) -> Provider:
    from .openai_chat import OpenAIChatProvider

    return OpenAIChatProvider(model, **kwargs)


def _openai_responses(model: str, **kwargs: Any) -> Provider:
    from .openai_responses import OpenAIResponsesProvider

    return OpenAIResponsesProvider(model, **kwargs)


def _anthropic(model: str, **kwargs: Any) -> Provider:
    from .anthropic import AnthropicProvider

    return AnthropicProvider(model, **kwargs)


_BUILTINS: dict[str, ProviderFactory] = {
    "openai": _openai_chat,
    "oai": _openai_chat,
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
    "claude": _anthropic,
}


def register_provider(prefix: str, factory: ProviderFactory) -> None:
    """Make ``"prefix:model"`` build a provider with ``factory`` (overrides built-ins)."""
    key = prefix.strip().lower()
    if not key or ":" in key:
        raise UserError(
            f"invalid provider prefix {prefix!r}", hint="use a non-empty name without ':'"
        )
    if not callable(factory):
        raise UserError(
            f"provider factory for {prefix!r} is not callable",
            hint="pass a Provider class or a function (model, **overrides) -> Provider",
        )
    _registered[key] = factory


def registered_prefixes() -> list[str]:
    """Every prefix known without loading entry points: built-ins, registrations and the
    names in the ``lovia.providers`` group (sorted)."""
    names = set(_BUILTINS) | set(_registered) | {n.lower() for n in entry_points_of(_GROUP)}
    return sorted(names)


def _entry_point_factory(prefix: str) -> ProviderFactory | None:
    eps = {name.lower(): ep for name, ep in entry_points_of(_GROUP).items()}
    ep = eps.get(prefix)
    if ep is None:
        return None
    try:
        obj = ep.load()
    except (ImportError, AttributeError) as exc:
        raise UserError(
            f"entry point {ep.name!r} in group {_GROUP!r} ({ep.value}) failed to load: {exc}",
            hint="reinstall the distribution that provides it, or check its entry point target",
        ) from exc
    if not callable(obj):
        raise UserError(
            f"entry point {ep.name!r} in group {_GROUP!r} ({ep.value}) "
            "is neither a class nor a callable",
            hint="point the entry point at a Provider class or a factory function",
        )
    factory: ProviderFactory = obj
    return factory


def _factory_for(prefix: str) -> ProviderFactory:
    factory = _registered.get(prefix) or _BUILTINS.get(prefix)
    if factory is None:
        factory = _entry_point_factory(prefix)
    if factory is None:
        known = ", ".join(registered_prefixes())
        raise UserError(
            f"unknown provider prefix {prefix!r}",
            hint=f"use one of: {known}; for an OpenAI-compatible model whose name contains ':', "
            f"write 'openai:<model>'; or register_provider({prefix!r}, factory)",
        )
    return factory


def _accepts(factory: ProviderFactory, names: set[str]) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: just try the call
        return True
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return True
    accepted = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return names <= accepted


def provider_from_string(
    spec: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    supports_vision: bool | None = None,
) -> Provider:
    """Build the provider for ``"vendor:model"`` (or a bare OpenAI-compatible model name).

    ``api_key``, ``base_url`` and ``supports_vision`` override the adapter's defaults (and
    its environment variables); ``None`` leaves them to the adapter.
    """
    text = spec.strip()
    if not text:
        raise UserError("empty model string", hint="use 'vendor:model', e.g. 'openai:gpt-4o-mini'")
    prefix, sep, model = text.partition(":")
    if not sep:
        model, prefix = text, "openai"
        if text.lower().startswith("claude"):
            # A configuration mistake: a warning the developer sees, and the log.
            message = (
                f"model {text!r} has no prefix and is sent to an OpenAI-compatible endpoint; "
                f"write 'anthropic:{text}' for the Anthropic API"
            )
            warnings.warn(message, UserWarning, stacklevel=2)
            _log.warning("%s", message)
    prefix = prefix.strip().lower()
    model = model.strip()
    if not model:
        raise UserError(f"model string {spec!r} names no model", hint=f"write '{prefix}:<model>'")
    factory = _factory_for(prefix)
    overrides = {
        k: v
        for k, v in (
            ("api_key", api_key),
            ("base_url", base_url),
            ("supports_vision", supports_vision),
        )
        if v is not None
    }
    if overrides and not _accepts(factory, set(overrides)):
        raise UserError(
            f"the provider for {prefix!r} does not accept {sorted(overrides)}",
            hint="configure it through its own environment or build the provider yourself",
        )
    provider: Provider = factory(model, **overrides)
    return provider


def model_from_env(*, required: bool = True) -> str | None:
    """The model string in ``LOVIA_MODEL``; ``None`` when unset and not ``required``."""
    value = os.environ.get("LOVIA_MODEL", "").strip()
    if value:
        return value
    if required:
        raise UserError(
            "no model configured: LOVIA_MODEL is not set",
            hint="export LOVIA_MODEL='openai:gpt-4o-mini' (or 'anthropic:<model>'), or pass model=",
        )
    return None
