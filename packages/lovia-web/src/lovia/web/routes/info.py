"""``/healthz``, ``/api/info`` and ``/api/agents``."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from fastapi import APIRouter
from lovia.agent import Agent

from ..deps import State
from ..errors import NotFound
from ..models import AgentInfo, Health, ServerInfo, error_responses

__all__ = ["agent", "agents", "healthz", "info", "router"]

router = APIRouter()


def _model_name(model: object) -> str | None:
    if model is None or isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else type(model).__name__


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health()


@router.get("/api/info", response_model=ServerInfo)
async def info(state: State) -> ServerInfo:
    return ServerInfo(
        title=state.title,
        version=version("lovia-web"),
        agents=list(state.agents),
        default_agent=state.supervisor.default_agent,
        configured=state.config_runtime is None or state.config_runtime.configured,
    )


def _agent_info(name: str, agent: Agent[Any]) -> AgentInfo:
    return AgentInfo(name=name, model=_model_name(agent.model), tools=[t.name for t in agent.tools])


@router.get("/api/agents", response_model=list[AgentInfo])
async def agents(state: State) -> list[AgentInfo]:
    return [_agent_info(name, agent) for name, agent in state.agents.items()]


@router.get("/api/agents/{name}", response_model=AgentInfo, responses=error_responses(404))
async def agent(name: str, state: State) -> AgentInfo:
    found = state.agents.get(name)
    if found is None:
        raise NotFound(f"unknown agent {name!r}", hint=f"agents: {', '.join(state.agents)}")
    return _agent_info(name, found)
