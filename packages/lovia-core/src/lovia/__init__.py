"""lovia: a lightweight, provider-neutral agent framework (distribution: lovia-core).

Other distributions (lovia-context, lovia-workspace, lovia-plugins, lovia-eval, lovia-web)
contribute ``lovia.<sub>`` portions; they ship no ``lovia/__init__.py``. This file is the
only one, and it must stay cheap to import: every public name resolves lazily on first
access, so ``import lovia`` loads neither pydantic nor httpx.
"""

# Must run before anything imports a lovia.* submodule: lets portions that live in other
# sys.path entries (editable workspace installs, --target, user site) join this package.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from typing import TYPE_CHECKING, Any

# Core names: name -> defining module (all inside lovia-core).
_EXPORTS: dict[str, str] = {
    # agents and runs
    "Agent": "lovia.agent",
    "Runner": "lovia.runner",
    "RunContext": "lovia.run_context",
    "RunHandle": "lovia.runtime.result",
    "RunResult": "lovia.runtime.result",
    # tools
    "Tool": "lovia.tools.base",
    "tool": "lovia.tools.base",
    # transcript, messages, parts
    "AssistantTextEntry": "lovia.transcript",
    "InputEntry": "lovia.transcript",
    "ReasoningEntry": "lovia.transcript",
    "ToolCallEntry": "lovia.transcript",
    "ToolResultEntry": "lovia.transcript",
    "TranscriptEntry": "lovia.transcript",
    "Message": "lovia.messages",
    "ToolCall": "lovia.messages",
    "Usage": "lovia.messages",
    "assistant": "lovia.messages",
    "system": "lovia.messages",
    "user": "lovia.messages",
    "FilePart": "lovia.parts",
    "ImagePart": "lovia.parts",
    "TextPart": "lovia.parts",
    # providers
    "ModelSettings": "lovia.providers.base",
    "Provider": "lovia.providers.base",
    # context policy seam
    "CompactionRequest": "lovia.context_policy",
    "ContextPolicy": "lovia.context_policy",
    "ContextResult": "lovia.context_policy",
    "NoopContextPolicy": "lovia.context_policy",
    # plugins
    "Plugin": "lovia.plugin",
    "PluginInstance": "lovia.plugin",
    # errors
    "BudgetExceeded": "lovia.exceptions",
    "ContextOverflowError": "lovia.exceptions",
    "GuardrailTripped": "lovia.exceptions",
    "InvalidToolArguments": "lovia.exceptions",
    "LoviaError": "lovia.exceptions",
    "MaxTurnsExceeded": "lovia.exceptions",
    "MissingDistributionError": "lovia.exceptions",
    "OutputValidationError": "lovia.exceptions",
    "ProviderError": "lovia.exceptions",
    "RunCancelled": "lovia.exceptions",
    "ToolError": "lovia.exceptions",
    "UserError": "lovia.exceptions",
}

# Convenience names owned by other distributions: name -> (module, distribution).
# Deliberately not in __all__, so `from lovia import *` never needs them.
_OPTIONAL: dict[str, tuple[str, str]] = {
    "Compaction": ("lovia.context", "lovia-context"),
    "Workspace": ("lovia.workspace", "lovia-workspace"),
    "WorkspacePolicy": ("lovia.workspace", "lovia-workspace"),
    "Memory": ("lovia.plugins", "lovia-plugins"),
    "MCP": ("lovia.plugins", "lovia-plugins"),
    "Skills": ("lovia.plugins", "lovia-plugins"),
    "Todo": ("lovia.plugins", "lovia-plugins"),
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 - computed from the single export table

if TYPE_CHECKING:  # for type checkers only; never executed
    from lovia.agent import Agent as Agent
    from lovia.context_policy import CompactionRequest as CompactionRequest
    from lovia.context_policy import ContextPolicy as ContextPolicy
    from lovia.context_policy import ContextResult as ContextResult
    from lovia.context_policy import NoopContextPolicy as NoopContextPolicy
    from lovia.exceptions import BudgetExceeded as BudgetExceeded
    from lovia.exceptions import ContextOverflowError as ContextOverflowError
    from lovia.exceptions import GuardrailTripped as GuardrailTripped
    from lovia.exceptions import InvalidToolArguments as InvalidToolArguments
    from lovia.exceptions import LoviaError as LoviaError
    from lovia.exceptions import MaxTurnsExceeded as MaxTurnsExceeded
    from lovia.exceptions import MissingDistributionError as MissingDistributionError
    from lovia.exceptions import OutputValidationError as OutputValidationError
    from lovia.exceptions import ProviderError as ProviderError
    from lovia.exceptions import RunCancelled as RunCancelled
    from lovia.exceptions import ToolError as ToolError
    from lovia.exceptions import UserError as UserError
    from lovia.messages import Message as Message
    from lovia.messages import ToolCall as ToolCall
    from lovia.messages import Usage as Usage
    from lovia.messages import assistant as assistant
    from lovia.messages import system as system
    from lovia.messages import user as user
    from lovia.parts import FilePart as FilePart
    from lovia.parts import ImagePart as ImagePart
    from lovia.parts import TextPart as TextPart
    from lovia.plugin import Plugin as Plugin
    from lovia.plugin import PluginInstance as PluginInstance
    from lovia.providers.base import ModelSettings as ModelSettings
    from lovia.providers.base import Provider as Provider
    from lovia.run_context import RunContext as RunContext
    from lovia.runner import Runner as Runner
    from lovia.runtime.result import RunHandle as RunHandle
    from lovia.runtime.result import RunResult as RunResult
    from lovia.tools.base import Tool as Tool
    from lovia.tools.base import tool as tool
    from lovia.transcript import AssistantTextEntry as AssistantTextEntry
    from lovia.transcript import InputEntry as InputEntry
    from lovia.transcript import ReasoningEntry as ReasoningEntry
    from lovia.transcript import ToolCallEntry as ToolCallEntry
    from lovia.transcript import ToolResultEntry as ToolResultEntry
    from lovia.transcript import TranscriptEntry as TranscriptEntry

    __version__: str
    # ignore: lets lovia-core be type-checked alone (the other distributions absent)
    from lovia.context import Compaction as Compaction  # type: ignore[import-not-found, unused-ignore]


def __getattr__(name: str) -> Any:
    import importlib

    if name == "__version__":  # lazy: importlib.metadata costs tens of ms to import
        from importlib.metadata import version

        globals()["__version__"] = v = version("lovia-core")
        return v
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # cache: __getattr__ is not called again for this name
        return value
    try:
        module, dist = _OPTIONAL[name]
    except KeyError:
        raise AttributeError(f"module 'lovia' has no attribute {name!r}") from None
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # Translate only "the portion itself is absent"; a missing third-party dependency
        # inside an installed portion must surface unchanged.
        if exc.name != module:
            raise
        from lovia.exceptions import MissingDistributionError

        raise MissingDistributionError(name, module, dist) from exc
    value = getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | set(_OPTIONAL))
