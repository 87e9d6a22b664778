"""What routes take: the server's shared objects (``WebState``), and ``RouterDeps``, what an
embedder hands ``build_api_router``.

A route declares ``state: State``. The API router binds its ``WebState`` to each request
(``request.state.lovia``) before the route runs, so the routes work the same in the app
``create_app`` builds and in an embedder's own FastAPI app.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from lovia.agent import Agent
from lovia.exceptions import UserError

from .approvals import ApprovalRegistry
from .background import find_memory
from .followups import Followups
from .lifecycle import RunLifecycle
from .questions import QuestionRegistry
from .store.base import ChatStore
from .supervisor import RunSupervisor

if TYPE_CHECKING:
    from lovia.budget import RunBudget

    from .config.runtime import ConfigRuntime

__all__ = ["FEATURES", "RouterDeps", "State", "WebState", "agents_of", "get_state"]

FEATURES = (
    "checkpointing",
    "titles",
    "followups",
    "scheduling",
    "workspace",
    "memory",
    "rewind",
    "events",
    "model_config",
)
"""The feature flags ``/api/info`` reports; a flag the server does not set is ``False``."""


def agents_of(
    agent_or_agents: Agent[Any] | Mapping[str, Agent[Any]], *, caller: str = "RouterDeps"
) -> dict[str, Agent[Any]]:
    """One ``Agent`` (served under its name) or a non-empty ``{name: Agent}`` mapping;
    ``caller`` names the API in the error."""
    if isinstance(agent_or_agents, Agent):
        return {agent_or_agents.name: agent_or_agents}
    if isinstance(agent_or_agents, Mapping):
        agents = dict(agent_or_agents)
        bad = [name for name, agent in agents.items() if not isinstance(agent, Agent)]
        if bad or not agents:
            raise UserError(
                f"{caller} needs at least one agent, and every mapping value must be an Agent"
                + (f" (not: {', '.join(map(repr, bad))})" if bad else ""),
                hint="pass an Agent or a {name: Agent} mapping",
            )
        return agents
    raise UserError(
        f"{caller} takes an Agent or a {{name: Agent}} mapping, "
        f"got {type(agent_or_agents).__name__}",
        hint="pass an Agent or a {name: Agent} mapping",
    )


@dataclass(frozen=True, slots=True)
class WebState:
    """Everything a route may use; one per API router (``app.state.lovia`` in ``create_app``).

    ``features`` holds the flags other parts of the server switch on when they are mounted;
    ``/api/info`` reports every name of ``FEATURES``, ``False`` when absent.
    """

    title: str
    agents: dict[str, Agent[Any]]
    store: ChatStore
    supervisor: RunSupervisor
    features: dict[str, bool] = field(default_factory=dict)
    lifecycle: RunLifecycle | None = None
    """Run records, titles and the ``/api/events`` bus (``None``: none of them)."""
    followups: Followups | None = None
    """The follow-up suggester (``None``: follow-ups are off)."""
    config_runtime: ConfigRuntime | None = None
    """Set when the server serves the CLI's default agent (``/api/config``)."""


@dataclass
class RouterDeps:
    """What ``build_api_router`` serves: the agents and the store, plus optional parts.

    ``approvals`` defaults to an ``ApprovalRegistry(timeout=300)``; ``supervisor`` defaults to
    a ``RunSupervisor`` over the agents, the store and the registry. The router's lifespan
    (merged into the app's by ``include_router``) closes the supervisor, then the store.
    """

    agents: Agent[Any] | Mapping[str, Agent[Any]]
    store: ChatStore
    approvals: ApprovalRegistry | None = None
    supervisor: RunSupervisor | None = None
    title: str = "lovia"
    max_background_runs: int = 8
    max_turns: int = 50
    questions: QuestionRegistry | None = None
    lifecycle: RunLifecycle | None = None
    followups: Followups | None = None
    budget: RunBudget | None = None
    scheduler_poll: float | None = 1.0
    """The scheduler's pass interval (``None``: no scheduler loop)."""

    def state(self) -> WebState:
        """The ``WebState`` these parts make (a new supervisor unless one was given)."""
        agents = agents_of(self.agents)
        supervisor = self.supervisor
        if supervisor is None:
            supervisor = RunSupervisor(
                agents,
                self.store,
                approvals=self.approvals or ApprovalRegistry(),
                questions=self.questions,
                max_background_runs=self.max_background_runs,
                max_turns=self.max_turns,
                lifecycle=self.lifecycle,
                budget=self.budget,
            )
        features = {
            "checkpointing": True,  # every ChatStore carries a checkpointer
            "rewind": self.store.supports_rewind,
            "titles": self.lifecycle is not None and self.lifecycle.titles is not None,
            "followups": self.followups is not None,
            "events": self.lifecycle is not None,
            "scheduling": self.scheduler_poll is not None,
            "workspace": any(a.workspace is not None for a in agents.values()),
            "memory": any(find_memory(a) is not None for a in agents.values()),
        }
        return WebState(
            title=self.title,
            agents=agents,
            store=self.store,
            supervisor=supervisor,
            features=features,
            lifecycle=self.lifecycle,
            followups=self.followups,
        )


def get_state(request: Request) -> WebState:
    """The request's ``WebState``: the one its API router bound, else the app's."""
    state: WebState | None = getattr(request.state, "lovia", None)
    if state is None:
        state = request.app.state.lovia
    return state


State = Annotated[WebState, Depends(get_state)]
"""The parameter type a route declares to receive its ``WebState``."""
