"""The app's background services: the scheduler loop, wired subagents, memory curation.

``Background`` is created by ``create_app`` (on ``app.state.lovia_background``) and driven
by its lifespan: ``start()`` binds store-less ``Scheduling`` plugins to the app's store and
starts the scheduler loop; ``aclose()`` stops the loop, cancels detached subagent children
(so a task session is not left resumable), closes the supervisor and then waits, at most
``MEMORY_DRAIN_SECONDS``, for background memory curation to settle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request

from .scheduling import Scheduler, Scheduling

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.plugins.memory import Memory

    from .deps import WebState
    from .subagents import SupervisedSubagents

__all__ = [
    "Background",
    "MEMORY_DRAIN_SECONDS",
    "Services",
    "find_memory",
    "get_background",
]

logger = logging.getLogger(__name__)

MEMORY_DRAIN_SECONDS = 15.0
"""How long shutdown waits for background memory curation before giving up on it."""


def _plugins(agents: dict[str, Agent[Any]]) -> Iterator[tuple[str, object]]:
    for name, agent in agents.items():
        for plugin in agent.plugins:
            yield name, plugin


def find_memory(agent: Agent[Any]) -> Memory | None:
    """The agent's ``Memory`` plugin, if it has one."""
    from lovia.plugins.memory import Memory

    return next((p for p in agent.plugins if isinstance(p, Memory)), None)


class Background:
    """What runs beside the routes for one app (see the module docstring)."""

    def __init__(self, state: WebState, *, scheduler_poll: float | None = 1.0) -> None:
        self.state = state
        self.scheduler = Scheduler(
            state.store,
            state.supervisor,
            poll=scheduler_poll if scheduler_poll is not None else 1.0,
        )
        self.scheduler_poll = scheduler_poll
        self.subagents: SupervisedSubagents | None = None

    def __repr__(self) -> str:
        return f"Background(scheduler={self.scheduler!r}, subagents={self.subagents!r})"

    async def start(self) -> None:
        for name, plugin in _plugins(self.state.agents):
            if isinstance(plugin, Scheduling):
                if plugin.store is None:
                    plugin.store = self.state.store
                elif plugin.store is not self.state.store:
                    logger.warning(
                        "agent %r's Scheduling plugin uses another store than the app: its "
                        "schedules are not fired by this server",
                        name,
                    )
        if self.scheduler_poll is not None:
            self.scheduler.start()

    async def aclose(self) -> None:
        await self.scheduler.aclose()
        if self.subagents is not None:
            await self.subagents.aclose()
        await self.state.supervisor.aclose()
        memories = {id(m): m for m in map(find_memory, self.state.agents.values()) if m}
        if memories:
            drains = asyncio.gather(*(m.drain() for m in memories.values()))
            try:
                await asyncio.wait_for(drains, MEMORY_DRAIN_SECONDS)
            except asyncio.TimeoutError:
                logger.warning(
                    "memory curation still running after %.0f s; shutting down without it",
                    MEMORY_DRAIN_SECONDS,
                )


def get_background(request: Request) -> Background:
    background: Background = request.app.state.lovia_background
    return background


Services = Annotated[Background, Depends(get_background)]
"""The parameter type a route declares to receive the app's ``Background``."""
