"""``/healthz``, ``/api/info`` and ``/api/agents``."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter

from ..deps import State
from ..models import AgentInfo, Health, ServerInfo

__all__ = ["agents", "healthz", "info", "router"]

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
    )


@router.get("/api/agents", response_model=list[AgentInfo])
async def agents(state: State) -> list[AgentInfo]:
    return [
        AgentInfo(
            name=name,
            model=_model_name(agent.model),
            tools=[t.name for t in agent.tools],
        )
        for name, agent in state.agents.items()
    ]
