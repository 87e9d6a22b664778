"""What routes take: the server's shared objects, reached through the request's app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from lovia.agent import Agent

from .store.base import ChatStore
from .supervisor import RunSupervisor

if TYPE_CHECKING:
    from .config.runtime import ConfigRuntime

__all__ = ["State", "WebState", "get_state"]


@dataclass(frozen=True, slots=True)
class WebState:
    """Everything a route may use; one per app, on ``app.state.lovia``."""

    title: str
    agents: dict[str, Agent[Any]]
    store: ChatStore
    supervisor: RunSupervisor
    config_runtime: ConfigRuntime | None = None
    """Set when the server serves the CLI's default agent (``/api/config``)."""


def get_state(request: Request) -> WebState:
    state: WebState = request.app.state.lovia
    return state


State = Annotated[WebState, Depends(get_state)]
"""The parameter type a route declares to receive the app's ``WebState``."""
