"""Provider adapters, the model-string registry and the ``Provider`` seam.

Names resolve lazily, so importing ``lovia.providers`` (which the run loop does through
``lovia.providers.base``) loads no adapter and never httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "AnthropicProvider",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "model_from_env",
    "provider_from_string",
    "register_provider",
]

_EXPORTS = {
    "AnthropicProvider": "lovia.providers.anthropic",
    "OpenAIChatProvider": "lovia.providers.openai_chat",
    "OpenAIResponsesProvider": "lovia.providers.openai_responses",
    "model_from_env": "lovia.providers.registry",
    "provider_from_string": "lovia.providers.registry",
    "register_provider": "lovia.providers.registry",
}

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider as AnthropicProvider
    from .openai_chat import OpenAIChatProvider as OpenAIChatProvider
    from .openai_responses import OpenAIResponsesProvider as OpenAIResponsesProvider
    from .registry import model_from_env as model_from_env
    from .registry import provider_from_string as provider_from_string
    from .registry import register_provider as register_provider


def __getattr__(name: str) -> Any:
    import importlib

    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lovia.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
