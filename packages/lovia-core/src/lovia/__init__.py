"""lovia: a lightweight, provider-neutral agent framework (distribution: lovia-core).

Other distributions (lovia-context, lovia-workspace, lovia-plugins, lovia-eval, lovia-web)
contribute ``lovia.<sub>`` portions; they ship no ``lovia/__init__.py``. This file is the
only one, and it must stay cheap to import: every public name resolves lazily on first
access, so ``import lovia`` loads neither pydantic nor httpx.
"""

# Must run before anything imports a lovia.* submodule: lets portions that live in other
# sys.path entries (editable workspace installs, --target, user site) join this package.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

import logging as _logging
from typing import TYPE_CHECKING, Any

# Library etiquette: lovia logs to the "lovia" logger and stays silent unless the application
# configures logging (or calls lovia.log.enable_logging).
_logging.getLogger("lovia").addHandler(_logging.NullHandler())

# Core names: name -> defining module (all inside lovia-core).
_EXPORTS: dict[str, str] = {
    "Agent": "lovia.agent",
    "ApprovalChannel": "lovia.approvals",
    "RunBudget": "lovia.budget",
    "CancelToken": "lovia.cancellation",
    "CheckpointOptions": "lovia.checkpointer",
    "Checkpointer": "lovia.checkpointer",
    "RunHead": "lovia.checkpointer",
    "RunSnapshot": "lovia.checkpointer",
    "CompactionRequest": "lovia.context_policy",
    "ContextPolicy": "lovia.context_policy",
    "ContextResult": "lovia.context_policy",
    "NoopContextPolicy": "lovia.context_policy",
    "BudgetExceeded": "lovia.exceptions",
    "ContextOverflowError": "lovia.exceptions",
    "GuardrailTripped": "lovia.exceptions",
    "InvalidToolArguments": "lovia.exceptions",
    "LoviaError": "lovia.exceptions",
    "MCPError": "lovia.exceptions",
    "MaxTurnsExceeded": "lovia.exceptions",
    "MissingDistributionError": "lovia.exceptions",
    "OutputValidationError": "lovia.exceptions",
    "ProviderError": "lovia.exceptions",
    "RunBusyError": "lovia.exceptions",
    "RunCancelled": "lovia.exceptions",
    "SessionBusyError": "lovia.exceptions",
    "StoreError": "lovia.exceptions",
    "ToolError": "lovia.exceptions",
    "UserError": "lovia.exceptions",
    "GuardrailFn": "lovia.guardrails",
    "Handoff": "lovia.handoff",
    "agent_as_tool": "lovia.agent_tool",
    "GuardrailVerdict": "lovia.guardrails",
    "AgentHooks": "lovia.hooks",
    "enable_logging": "lovia.log",
    "Message": "lovia.messages",
    "ToolCall": "lovia.messages",
    "Usage": "lovia.messages",
    "assistant": "lovia.messages",
    "system": "lovia.messages",
    "user": "lovia.messages",
    "DefaultOutputRepair": "lovia.output",
    "OutputRepairStrategy": "lovia.output",
    "FilePart": "lovia.parts",
    "ImagePart": "lovia.parts",
    "TextPart": "lovia.parts",
    "Plugin": "lovia.plugin",
    "PluginInstance": "lovia.plugin",
    "ViewInjector": "lovia.plugin",
    "AnthropicProvider": "lovia.providers.anthropic",
    "ModelSettings": "lovia.providers.base",
    "Provider": "lovia.providers.base",
    "OpenAIChatProvider": "lovia.providers.openai_chat",
    "OpenAIResponsesProvider": "lovia.providers.openai_responses",
    "model_from_env": "lovia.providers.registry",
    "provider_from_string": "lovia.providers.registry",
    "register_provider": "lovia.providers.registry",
    "RetryPolicy": "lovia.retry",
    "RunContext": "lovia.run_context",
    "Runner": "lovia.runner",
    "RunHandle": "lovia.runtime.result",
    "RunResult": "lovia.runtime.result",
    "Segment": "lovia.session",
    "Session": "lovia.session",
    "Mailbox": "lovia.steering",
    "InMemoryCheckpointer": "lovia.stores.memory",
    "InMemorySession": "lovia.stores.memory",
    "PostgresCheckpointer": "lovia.stores.postgres",
    "PostgresSession": "lovia.stores.postgres",
    "SQLiteCheckpointer": "lovia.stores.sqlite",
    "SQLiteSession": "lovia.stores.sqlite",
    "Tool": "lovia.tools.base",
    "ToolPolicy": "lovia.tools.base",
    "tool": "lovia.tools.base",
    "ConsoleTracer": "lovia.tracing",
    "InMemoryTracer": "lovia.tracing",
    "NoopTracer": "lovia.tracing",
    "RecordedSpan": "lovia.tracing",
    "Tracer": "lovia.tracing",
    "AssistantTextEntry": "lovia.transcript",
    "InputEntry": "lovia.transcript",
    "ReasoningEntry": "lovia.transcript",
    "ToolCallEntry": "lovia.transcript",
    "ToolResultEntry": "lovia.transcript",
    "TranscriptEntry": "lovia.transcript",
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
    "Subagents": ("lovia.plugins", "lovia-plugins"),
    "Todo": ("lovia.plugins", "lovia-plugins"),
}

__all__ = sorted(_EXPORTS)

# The portions other distributions contribute: `import lovia.workspace` without lovia-workspace
# raises the same MissingDistributionError (with its install hint) as `lovia.Workspace` does.
_PORTIONS: dict[str, str] = {
    "lovia.context": "lovia-context",
    "lovia.workspace": "lovia-workspace",
    "lovia.plugins": "lovia-plugins",
    "lovia.eval": "lovia-eval",
    "lovia.web": "lovia-web",
}


class _MissingPortionFinder:
    """Last on ``sys.meta_path``: asked only after every real finder failed to find a portion."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> None:
        dist = _PORTIONS.get(fullname)
        if dist is not None:
            from lovia.exceptions import MissingDistributionError

            raise MissingDistributionError("", fullname, dist)


if not any(isinstance(f, _MissingPortionFinder) for f in __import__("sys").meta_path):
    __import__("sys").meta_path.append(_MissingPortionFinder())

if TYPE_CHECKING:  # for type checkers only; never executed
    from lovia.agent import Agent as Agent
    from lovia.agent_tool import agent_as_tool as agent_as_tool
    from lovia.approvals import ApprovalChannel as ApprovalChannel
    from lovia.budget import RunBudget as RunBudget
    from lovia.cancellation import CancelToken as CancelToken
    from lovia.checkpointer import Checkpointer as Checkpointer
    from lovia.checkpointer import CheckpointOptions as CheckpointOptions
    from lovia.checkpointer import RunHead as RunHead
    from lovia.checkpointer import RunSnapshot as RunSnapshot
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
    from lovia.exceptions import MCPError as MCPError
    from lovia.exceptions import MissingDistributionError as MissingDistributionError
    from lovia.exceptions import OutputValidationError as OutputValidationError
    from lovia.exceptions import ProviderError as ProviderError
    from lovia.exceptions import RunBusyError as RunBusyError
    from lovia.exceptions import RunCancelled as RunCancelled
    from lovia.exceptions import SessionBusyError as SessionBusyError
    from lovia.exceptions import StoreError as StoreError
    from lovia.exceptions import ToolError as ToolError
    from lovia.exceptions import UserError as UserError
    from lovia.guardrails import GuardrailFn as GuardrailFn
    from lovia.guardrails import GuardrailVerdict as GuardrailVerdict
    from lovia.handoff import Handoff as Handoff
    from lovia.hooks import AgentHooks as AgentHooks
    from lovia.log import enable_logging as enable_logging
    from lovia.messages import Message as Message
    from lovia.messages import ToolCall as ToolCall
    from lovia.messages import Usage as Usage
    from lovia.messages import assistant as assistant
    from lovia.messages import system as system
    from lovia.messages import user as user
    from lovia.output import DefaultOutputRepair as DefaultOutputRepair
    from lovia.output import OutputRepairStrategy as OutputRepairStrategy
    from lovia.parts import FilePart as FilePart
    from lovia.parts import ImagePart as ImagePart
    from lovia.parts import TextPart as TextPart
    from lovia.plugin import Plugin as Plugin
    from lovia.plugin import PluginInstance as PluginInstance
    from lovia.plugin import ViewInjector as ViewInjector
    from lovia.providers.anthropic import AnthropicProvider as AnthropicProvider
    from lovia.providers.base import ModelSettings as ModelSettings
    from lovia.providers.base import Provider as Provider
    from lovia.providers.openai_chat import OpenAIChatProvider as OpenAIChatProvider
    from lovia.providers.openai_responses import OpenAIResponsesProvider as OpenAIResponsesProvider
    from lovia.providers.registry import model_from_env as model_from_env
    from lovia.providers.registry import provider_from_string as provider_from_string
    from lovia.providers.registry import register_provider as register_provider
    from lovia.retry import RetryPolicy as RetryPolicy
    from lovia.run_context import RunContext as RunContext
    from lovia.runner import Runner as Runner
    from lovia.runtime.result import RunHandle as RunHandle
    from lovia.runtime.result import RunResult as RunResult
    from lovia.session import Segment as Segment
    from lovia.session import Session as Session
    from lovia.steering import Mailbox as Mailbox
    from lovia.stores.memory import InMemoryCheckpointer as InMemoryCheckpointer
    from lovia.stores.memory import InMemorySession as InMemorySession
    from lovia.stores.postgres import PostgresCheckpointer as PostgresCheckpointer
    from lovia.stores.postgres import PostgresSession as PostgresSession
    from lovia.stores.sqlite import SQLiteCheckpointer as SQLiteCheckpointer
    from lovia.stores.sqlite import SQLiteSession as SQLiteSession
    from lovia.tools.base import Tool as Tool
    from lovia.tools.base import ToolPolicy as ToolPolicy
    from lovia.tools.base import tool as tool
    from lovia.tracing import ConsoleTracer as ConsoleTracer
    from lovia.tracing import InMemoryTracer as InMemoryTracer
    from lovia.tracing import NoopTracer as NoopTracer
    from lovia.tracing import RecordedSpan as RecordedSpan
    from lovia.tracing import Tracer as Tracer
    from lovia.transcript import AssistantTextEntry as AssistantTextEntry
    from lovia.transcript import InputEntry as InputEntry
    from lovia.transcript import ReasoningEntry as ReasoningEntry
    from lovia.transcript import ToolCallEntry as ToolCallEntry
    from lovia.transcript import ToolResultEntry as ToolResultEntry
    from lovia.transcript import TranscriptEntry as TranscriptEntry

    __version__: str
    # Names from other distributions (_OPTIONAL) get no static re-export here: core must type-check
    # and import alone, so they type as Any through __getattr__; import them from their own
    # portion (e.g. `from lovia.context import Compaction`) for full types.


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
