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

from .approvals import ApprovalRegistry
from .deps import WebState
from .errors import WebError
from .models import ErrorBody, FieldError
from .routes import chat, info, sessions
from .store.base import ChatStore
from .supervisor import RunSupervisor

if TYPE_CHECKING:
    from .config.runtime import ConfigRuntime

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


def _agents(
    agent_or_agents: Agent[Any] | Mapping[str, Agent[Any]], runtime: ConfigRuntime | None
) -> dict[str, Agent[Any]]:
    if runtime is not None and isinstance(agent_or_agents, Mapping) and not agent_or_agents:
        return {runtime.agent_name: runtime.served_agent()}
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
    config_runtime: ConfigRuntime | None = None,
) -> FastAPI:
    """Build the app. ``store`` wins over ``db_path``; the default database is
    ``./.lovia/<agent>.db`` (``./.lovia/lovia.db`` for several agents).

    ``approval_timeout`` (seconds, ``None`` waits forever) denies a gated call nobody
    answered; ``max_background_runs`` bounds live runs (one more gets 429).
    ``config_runtime`` (the CLI's default agent) adds ``/api/config`` and swaps the agent it
    builds into the served ones; with it, an empty mapping serves the setup state.
    """
    agents = _agents(agent_or_agents, config_runtime)
    if store is None:
        if db_path is None:
            name = next(iter(agents)) if len(agents) == 1 else "lovia"
            db_path = Path(".lovia") / f"{name}.db"
        store = ChatStore.sqlite(str(db_path))
    supervisor = RunSupervisor(
        agents,
        store,
        approvals=ApprovalRegistry(timeout=approval_timeout),
        max_background_runs=max_background_runs,
        max_turns=max_turns,
    )
    state = WebState(
        title=title,
        agents=agents,
        store=store,
        supervisor=supervisor,
        config_runtime=config_runtime,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            try:
                await supervisor.aclose()
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
    _install_error_handlers(app)
    for module in (info, chat, sessions):
        app.include_router(module.router)
    if config_runtime is not None:
        from .routes import config

        config_runtime.bind(agents, supervisor.agents)
        app.state.lovia_config = config_runtime
        config.install_setup_gate(app, config_runtime)
        app.include_router(config.router)
    return app
