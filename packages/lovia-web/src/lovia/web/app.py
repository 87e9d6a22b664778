"""``create_app``: the FastAPI application serving one agent or a ``{name: agent}`` mapping.

The app owns one ``ChatStore``, one ``RunSupervisor`` (with its ``EventHub`` and
``ApprovalRegistry``) and the routers; its lifespan closes the supervisor (cancelling live runs
cooperatively, checkpoints kept) and then the store. Errors are answered as ``ErrorBody``:
``WebError``s with their own status, validation failures as 422 naming every field, a usage
mistake as 422, and anything else as a bare 500 (logged, never echoed).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from lovia.agent import Agent
from lovia.exceptions import UserError
from lovia.providers.base import Provider

from . import subagents
from .approvals import ApprovalRegistry
from .background import Background
from .deps import WebState
from .errors import WebError
from .followups import FollowupFn, Followups
from .lifecycle import LifecycleBus, RunLifecycle
from .models import ErrorBody, FieldError
from .questions import QuestionRegistry
from .routes import chat, events, info, memory, runs, schedules, sessions, workspace
from .store.base import ChatStore
from .supervisor import RunSupervisor
from .titles import TitleGenerator

if TYPE_CHECKING:
    from lovia.budget import RunBudget
    from lovia.tools.human import HumanChannel

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


def _agents(agent_or_agents: Agent[Any] | Mapping[str, Agent[Any]]) -> dict[str, Agent[Any]]:
    if isinstance(agent_or_agents, Agent):
        return {agent_or_agents.name: agent_or_agents}
    if isinstance(agent_or_agents, Mapping):
        agents = dict(agent_or_agents)
        bad = [name for name, agent in agents.items() if not isinstance(agent, Agent)]
        if bad or not agents:
            raise UserError(
                "create_app() needs at least one agent, and every mapping value must be an Agent"
                + (f" (not: {', '.join(map(repr, bad))})" if bad else ""),
                hint="pass an Agent or a {name: Agent} mapping",
            )
        return agents
    raise UserError(
        "create_app() takes an Agent or a {name: Agent} mapping, "
        f"got {type(agent_or_agents).__name__}",
        hint="pass an Agent or a {name: Agent} mapping",
    )


def _lifecycle(
    store: ChatStore,
    agents: dict[str, Agent[Any]],
    generate_titles: bool,
    title_model: Provider | str | None,
) -> RunLifecycle:
    bus = LifecycleBus()
    titles = None
    if generate_titles:

        def model_for(agent: str) -> Provider | str | None:
            found = agents.get(agent)
            return title_model or (found.model if found is not None else None)

        titles = TitleGenerator(store, model_for=model_for, bus=bus)
    return RunLifecycle(store, bus, titles=titles)


def _error(status: int, body: ErrorBody) -> JSONResponse:
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status)


def _install_error_handlers(app: FastAPI) -> None:
    async def web_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, WebError)
        return _error(exc.status, ErrorBody(detail=exc.message, hint=exc.hint))

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            FieldError(
                loc=[str(p) if not isinstance(p, int) else p for p in e.get("loc", ())],
                msg=str(e.get("msg", "invalid")),
            )
            for e in exc.errors()
        ]
        detail = "; ".join(f"{'.'.join(map(str, e.loc))}: {e.msg}" for e in errors)
        return _error(422, ErrorBody(detail=detail or "invalid request", errors=errors))

    async def usage(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, UserError)
        return _error(422, ErrorBody(detail=exc.message, hint=exc.hint))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error in %s %s", request.method, request.url.path)
        return _error(500, ErrorBody(detail="internal server error"))

    app.add_exception_handler(WebError, web_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(UserError, usage)
    app.add_exception_handler(Exception, unexpected)


def create_app(
    agent_or_agents: Agent[Any] | Mapping[str, Agent[Any]],
    *,
    db_path: str | Path | None = None,
    store: ChatStore | None = None,
    title: str = "lovia",
    max_background_runs: int = 8,
    approval_timeout: float | None = 300.0,
    max_turns: int = 50,
    generate_titles: bool = True,
    title_model: Provider | str | None = None,
    followups: bool | FollowupFn = False,
    followup_model: Provider | str | None = None,
    scheduler_poll: float | None = 1.0,
    wire_subagents: bool = False,
    budget: RunBudget | None = None,
    question_channel: HumanChannel | None = None,
    question_timeout: float | None = 600.0,
) -> FastAPI:
    """Build the app. ``store`` wins over ``db_path``; the default database is
    ``./.lovia/<agent>.db`` (``./.lovia/lovia.db`` for several agents).

    ``approval_timeout`` (seconds, ``None`` waits forever) denies a gated call nobody
    answered; ``max_background_runs`` bounds live runs (one more gets 429).
    ``generate_titles`` titles a new chat with a model once its first run ends
    (``title_model``, else the chat agent's own); ``followups`` (off by default) serves
    ``POST /api/sessions/{id}/followups`` with a model (``followup_model``, else the chat
    agent's) or with a ``FollowupFn``. See docs/web-sessions.md.
    ``scheduler_poll`` is the scheduler's pass interval (``None``: no scheduler loop);
    ``wire_subagents`` runs default ``Subagents`` children as supervised runs.
    answered; ``max_background_runs`` bounds live runs (one more gets 429). ``budget`` is
    copied for each run (``RunBudget.fresh``). ``question_channel`` is the ``HumanChannel``
    the agents' ``ask_human`` tool was built on; its questions are answered with
    ``POST /api/chat/answer`` and cancelled after ``question_timeout`` seconds.
    """
    agents = _agents(agent_or_agents)
    if store is None:
        if db_path is None:
            name = next(iter(agents)) if len(agents) == 1 else "lovia"
            db_path = Path(".lovia") / f"{name}.db"
        store = ChatStore.from_url(str(db_path))  # a file path or a postgresql:// URL
    lifecycle = _lifecycle(store, agents, generate_titles, title_model)
    supervisor = RunSupervisor(
        agents,
        store,
        approvals=ApprovalRegistry(timeout=approval_timeout),
        questions=(
            QuestionRegistry(question_channel, timeout=question_timeout)
            if question_channel is not None
            else None
        ),
        max_background_runs=max_background_runs,
        max_turns=max_turns,
        lifecycle=lifecycle,
        budget=budget,
    )
    suggester = None
    if followups is not False:
        suggester = Followups(followups, agents=agents, model=followup_model)
    state = WebState(
        title=title,
        agents=agents,
        store=store,
        supervisor=supervisor,
        lifecycle=lifecycle,
        followups=suggester,
    )
    background = Background(state, scheduler_poll=scheduler_poll)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        swept = await store.sweep_stale_runs()
        if swept:
            logger.info("marked %d run record(s) left running as interrupted", swept)
        await background.start()
        try:
            if supervisor.questions is not None:
                supervisor.questions.ensure_started()
            yield
        finally:
            try:
                await background.aclose()
                await supervisor.aclose()
                await lifecycle.aclose()
            finally:
                await store.aclose()

    app = FastAPI(
        title=title,
        lifespan=lifespan,
        docs_url="/api/docs",
        openapi_url="/api/openapi.json",
        redoc_url=None,
    )
    app.state.lovia = state
    app.state.lovia_background = background
    if wire_subagents:
        subagents.wire_subagents(app)
    _install_error_handlers(app)
    for module in (info, chat, sessions, runs, events, workspace, schedules, memory):
        app.include_router(module.router)
    return app
