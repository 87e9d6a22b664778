"""lovia.web (distribution lovia-web): the HTTP/SSE server behind ``lovia web``.

Names resolve lazily, so ``import lovia.web`` stays cheap until one is used; FastAPI is
imported only with ``create_app`` / ``serve`` (``lovia.web.app``). See docs/web.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ApprovalRegistry": "lovia.web.approvals",
    "CapacityExceeded": "lovia.web.errors",
    "ChatMeta": "lovia.web.store.base",
    "ChatStore": "lovia.web.store.base",
    "ConfigRuntime": "lovia.web.config.runtime",
    "SURFACE_NOTE": "lovia.web.default_agent",
    "WebConfig": "lovia.web.config.schema",
    "build_default_agent": "lovia.web.default_agent",
    "validate_connection": "lovia.web.config.probe",
    "EventHub": "lovia.web.hub",
    "EventRecord": "lovia.web.eventlog",
    "EventRetention": "lovia.web.eventlog",
    "NotFound": "lovia.web.errors",
    "PostgresChatStore": "lovia.web.store.postgres",
    "QuestionRegistry": "lovia.web.questions",
    "RouterDeps": "lovia.web.deps",
    "RunConflict": "lovia.web.errors",
    "RunRecord": "lovia.web.store.base",
    "RunSupervisor": "lovia.web.supervisor",
    "SQLiteChatStore": "lovia.web.store.sqlite",
    "ScheduleRow": "lovia.web.store.base",
    "Scheduling": "lovia.web.scheduling",
    "WebError": "lovia.web.errors",
    "WorkspaceRegistry": "lovia.web.workspaces",
    "create_app": "lovia.web.app",
    "make_describe_image_tool": "lovia.web.vision",
    "subagent_deliver": "lovia.web.subagents",
    "wire_subagents": "lovia.web.subagents",
    "build_api_router": "lovia.web.app",
    "generate_token": "lovia.web.auth",
    "install_error_handlers": "lovia.web.app",
    "is_loopback": "lovia.web.auth",
    "rebinding_guard": "lovia.web.auth",
    "serve": "lovia.web.app",
    "token_dependency": "lovia.web.auth",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lovia.web' has no attribute {name!r}")
    value = getattr(__import__("importlib").import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from lovia.web.app import build_api_router as build_api_router
    from lovia.web.app import create_app as create_app
    from lovia.web.app import install_error_handlers as install_error_handlers
    from lovia.web.app import serve as serve
    from lovia.web.approvals import ApprovalRegistry as ApprovalRegistry
    from lovia.web.auth import generate_token as generate_token
    from lovia.web.auth import is_loopback as is_loopback
    from lovia.web.auth import rebinding_guard as rebinding_guard
    from lovia.web.auth import token_dependency as token_dependency
    from lovia.web.config.probe import validate_connection as validate_connection
    from lovia.web.config.runtime import ConfigRuntime as ConfigRuntime
    from lovia.web.config.schema import WebConfig as WebConfig
    from lovia.web.default_agent import SURFACE_NOTE as SURFACE_NOTE
    from lovia.web.default_agent import build_default_agent as build_default_agent
    from lovia.web.deps import RouterDeps as RouterDeps
    from lovia.web.errors import CapacityExceeded as CapacityExceeded
    from lovia.web.errors import NotFound as NotFound
    from lovia.web.errors import RunConflict as RunConflict
    from lovia.web.errors import WebError as WebError
    from lovia.web.eventlog import EventRecord as EventRecord
    from lovia.web.eventlog import EventRetention as EventRetention
    from lovia.web.hub import EventHub as EventHub
    from lovia.web.questions import QuestionRegistry as QuestionRegistry
    from lovia.web.scheduling import Scheduling as Scheduling
    from lovia.web.store.base import ChatMeta as ChatMeta
    from lovia.web.store.base import ChatStore as ChatStore
    from lovia.web.store.base import RunRecord as RunRecord
    from lovia.web.store.base import ScheduleRow as ScheduleRow
    from lovia.web.store.postgres import PostgresChatStore as PostgresChatStore
    from lovia.web.store.sqlite import SQLiteChatStore as SQLiteChatStore
    from lovia.web.subagents import subagent_deliver as subagent_deliver
    from lovia.web.subagents import wire_subagents as wire_subagents
    from lovia.web.supervisor import RunSupervisor as RunSupervisor
    from lovia.web.vision import make_describe_image_tool as make_describe_image_tool
    from lovia.web.workspaces import WorkspaceRegistry as WorkspaceRegistry
