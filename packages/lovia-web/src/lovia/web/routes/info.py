"""``/healthz`` (open, on ``health_router``), ``/api/info`` and ``/api/agents``."""

from __future__ import annotations

import logging
from importlib.metadata import version
from typing import Any

from fastapi import APIRouter
from lovia.agent import Agent
from lovia.providers.base import supports_vision

from ..deps import FEATURES, State, WebState
from ..errors import NotFound
from ..models import AgentInfo, Health, ServerInfo, error_responses

__all__ = [
    "agent",
    "agent_info",
    "agents",
    "context_window",
    "health_router",
    "healthz",
    "info",
    "router",
]

logger = logging.getLogger(__name__)

health_router = APIRouter()
router = APIRouter()


def _model_name(model: object) -> str | None:
    if model is None or isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else type(model).__name__


@health_router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness; open even when the API needs a token."""
    return Health()


def _configured(state: WebState) -> bool:
    if state.config_runtime is not None:
        return state.config_runtime.configured
    return all(agent.model is not None for agent in state.agents.values())


@router.get("/api/info", response_model=ServerInfo)
async def info(state: State) -> ServerInfo:
    return ServerInfo(
        title=state.title,
        version=version("lovia-web"),
        agents=list(state.agents),
        default_agent=state.supervisor.default_agent,
        configured=_configured(state),
        features={name: bool(state.features.get(name, False)) for name in FEATURES},
    )


async def context_window(agent: Agent[Any]) -> int | None:
    """The window the agent's runs are sized against, by the core's resolution chain: the
    context policy's configured ``context_window``, else what the provider claims (its
    endpoint's ``/models``, never the official OpenAI API; then its bundled table)."""
    configured = getattr(agent.context_policy, "context_window", None)
    if isinstance(configured, int) and not isinstance(configured, bool) and configured > 0:
        return configured
    provider: object = agent.model
    if provider is None:
        return None
    if isinstance(provider, str):
        from lovia.providers.registry import provider_from_string

        try:
            provider = provider_from_string(provider)
        except Exception:  # noqa: BLE001 - an unresolvable model string just has no window
            logger.debug("cannot resolve model %r for its context window", agent.model)
            return None
        try:
            return await _claimed(provider)
        finally:
            close = getattr(provider, "aclose", None)
            if callable(close):
                await close()
    return await _claimed(provider)


async def _claimed(provider: object) -> int | None:
    from lovia.context.window import WindowProbe

    return await WindowProbe().claimed_by(provider)


def _capabilities(agent: Agent[Any]) -> list[str]:
    found = []
    if not isinstance(agent.model, str) and supports_vision(agent.model):
        found.append("vision")
    if agent.workspace is not None:
        found.append("workspace")
    if agent.handoffs:
        found.append("handoffs")
    if any(getattr(t, "needs_approval", False) for t in agent.tools):
        found.append("approvals")
    if agent.output_type is not str:
        found.append("structured_output")
    if agent.plugins:
        found.append("plugins")
    return found


async def agent_info(name: str, agent: Agent[Any]) -> AgentInfo:
    return AgentInfo(
        name=name,
        model=_model_name(agent.model),
        tools=[t.name for t in agent.tools],
        capabilities=_capabilities(agent),
        context_window=await context_window(agent),
    )


@router.get("/api/agents", response_model=list[AgentInfo])
async def agents(state: State) -> list[AgentInfo]:
    return [await agent_info(name, agent) for name, agent in state.agents.items()]


@router.get("/api/agents/{name}", response_model=AgentInfo, responses=error_responses(404))
async def agent(name: str, state: State) -> AgentInfo:
    found = state.agents.get(name)
    if found is None:
        raise NotFound(f"unknown agent {name!r}", hint=f"agents: {', '.join(state.agents)}")
    return await agent_info(name, found)
