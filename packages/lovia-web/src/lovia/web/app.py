"""App assembly: ``create_app`` (the FastAPI app), ``build_api_router`` (the same API for an
embedder's own app) and ``serve`` (``create_app`` under uvicorn, with the loopback rules).

``build_api_router`` is the one place the API routers are listed; ``create_app`` is that
router plus ``/healthz``, the error handlers, authentication, CORS and the UI. The router's
lifespan closes the supervisor (cancelling live runs cooperatively, checkpoints kept) and
then the store. Errors are answered as ``ErrorBody``: ``WebError``s with their own status,
validation failures as 422 naming every field, a usage mistake as 422, and anything else as
a bare 500 (logged, never echoed).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from lovia.agent import Agent
from lovia.exceptions import UserError

from . import subagents
from .approvals import ApprovalRegistry
from .auth import (
    TokenLinkMiddleware,
    cross_site_guard,
    custom_auth_dependency,
    generate_token,
    is_loopback,
    normalise_token,
    token_dependency,
)
from .background import Background
from .deps import RouterDeps, WebState, agents_of
from .errors import WebError
from .followups import FollowupFn, Followups
from .lifecycle import LifecycleBus, RunLifecycle
from .models import ErrorBody, FieldError, error_responses
from .questions import QuestionRegistry
from .routes import (
    agui,
    chat,
    context,
    events,
    info,
    memory,
    render,
    runs,
    schedules,
    sessions,
    tasks,
    workspace,
)
from .store.base import ChatStore
from .titles import TitleGenerator

if TYPE_CHECKING:
    from lovia.budget import RunBudget
    from lovia.providers.base import Provider
    from lovia.tools.human import HumanChannel

    from .scale.engine import RunEngine

if TYPE_CHECKING:
    from .config.runtime import ConfigChanged, ConfigRuntime

__all__ = ["build_api_router", "create_app", "install_error_handlers", "serve", "serve_banner"]

logger = logging.getLogger(__name__)

_SERVE_BACKGROUND_RUNS = 8


def _error(status: int, body: ErrorBody) -> JSONResponse:
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    """Answer the API's errors as ``ErrorBody``, and document them so in the app's OpenAPI
    schema (an embedder calls this on its own app)."""

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
    _declare_error_bodies(app)


def _declare_error_bodies(app: FastAPI) -> None:
    """Make the OpenAPI schema tell the truth about errors: every 422 is an ``ErrorBody``
    (FastAPI would document its own validation shape, which the handler replaces), and an
    operation with a body may answer 400 (a body that is not JSON at all)."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        schema = original()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        if "ErrorBody" not in components:
            body = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(body.pop("$defs", {}))
            components["ErrorBody"] = body
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                if "422" in responses:
                    responses["422"]["content"] = error
                if "requestBody" in operation and "400" not in responses:
                    responses["400"] = {"description": "the body is not JSON", "content": error}
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _lifespan(state: WebState, background: Background) -> Callable[[Any], Any]:
    """Startup: stale run records swept, the scheduler and the question channel started.
    Shutdown: background services, then the supervisor, the lifecycle and the store."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        cluster = state.supervisor.cluster
        if cluster is not None:  # several workers: only records no chat points at are stale
            swept = await cluster.start()
        else:
            swept = await state.store.sweep_stale_runs()
        if swept:
            logger.info("marked %d run record(s) left running as interrupted", swept)
        await background.start()
        try:
            if state.supervisor.questions is not None:
                state.supervisor.questions.ensure_started()
            yield
        finally:
            try:
                await background.aclose()
                if cluster is not None:
                    # the engine waits for its running tasks, which end as the supervisor
                    # interrupts their runs (and hands them to another worker)
                    try:
                        await asyncio.gather(cluster.stop_consuming(), state.supervisor.aclose())
                    finally:
                        await cluster.aclose()
                else:
                    await state.supervisor.aclose()
                if state.lifecycle is not None:
                    await state.lifecycle.aclose()
            finally:
                await state.store.aclose()

    return lifespan


def _api_router(state: WebState, background: Background) -> APIRouter:
    def bind_state(request: Request) -> None:
        request.state.lovia = state

    router = APIRouter(lifespan=_lifespan(state, background), dependencies=[Depends(bind_state)])
    routers = (
        info,
        chat,
        sessions,
        tasks,
        runs,
        events,
        workspace,
        schedules,
        memory,
        agui,
        context,
        render,
    )
    for module in routers:
        router.include_router(module.router)
    return router


def build_api_router(deps: RouterDeps) -> APIRouter:
    """The whole ``/api`` for an embedder's FastAPI app. It has no auth of its own: add it
    where you include it, e.g. ``dependencies=[Depends(token_dependency(token))]``, and call
    ``install_error_handlers(app)`` so its errors keep their shape. The router's lifespan
    runs the scheduler and closes the supervisor and the store when the app shuts down.
    """
    state = deps.state()
    return _api_router(state, Background(state, scheduler_poll=deps.scheduler_poll))


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


def _auth_dependencies(token: str | None, auth: Callable[..., Any] | None) -> list[Any]:
    if token is not None and auth is not None:
        raise UserError(
            "token= and auth= are mutually exclusive",
            hint="pass token= for the built-in server token, or auth= for your own dependency",
        )
    if token is not None:
        return [Depends(token_dependency(token))]
    if auth is not None:
        if not callable(auth):
            raise UserError(
                f"auth= must be a FastAPI dependency (a callable), got {type(auth).__name__}",
                hint="pass a function that raises HTTPException(401) to refuse a request",
            )
        return [Depends(custom_auth_dependency(auth))]
    return []


def _cors_origins(cors_origins: str | Sequence[str] | None) -> list[str]:
    if cors_origins is None:
        return []
    origins = [cors_origins] if isinstance(cors_origins, str) else list(cors_origins)
    if not all(isinstance(o, str) and o.strip() for o in origins):
        raise UserError(
            "cors_origins must be origin strings such as 'https://app.example.com'",
            hint="leave it unset to send no CORS headers",
        )
    return [o.strip() for o in origins]


def _publish_config_changes(state: WebState, runtime: ConfigRuntime) -> None:
    """Forward ``config_changed`` to the lifecycle bus (``/api/events``) when the server
    has one."""
    if state.lifecycle is not None:
        bus = state.lifecycle.bus

        def publish(event: ConfigChanged) -> None:
            bus.publish("config_changed", event.model_dump())

        runtime.on_change(publish)


def _mount_ui(app: FastAPI, state: WebState) -> None:
    """The bundled UI's hook: ``lovia.web.ui.mount_ui(app, state)``, when the module exists.
    Its routes are mounted on the app itself, outside the guarded API router (open)."""
    try:
        ui = importlib.import_module("lovia.web.ui")
    except ModuleNotFoundError as exc:
        if exc.name != "lovia.web.ui":
            raise
        return
    ui.mount_ui(app, state)


def create_app(
    agent_or_agents: Agent[Any] | Mapping[str, Agent[Any]],
    *,
    db_path: str | Path | None = None,
    store: ChatStore | None = None,
    title: str = "lovia",
    max_background_runs: int = 8,
    approval_timeout: float | None = 300.0,
    max_turns: int = 50,
    token: str | None = None,
    auth: Callable[..., Any] | None = None,
    cors_origins: str | Sequence[str] | None = None,
    ui: bool = True,
    generate_titles: bool = True,
    title_model: Provider | str | None = None,
    followups: bool | FollowupFn = False,
    followup_model: Provider | str | None = None,
    scheduler_poll: float | None = 1.0,
    wire_subagents: bool = False,
    budget: RunBudget | None = None,
    question_channel: HumanChannel | None = None,
    question_timeout: float | None = 600.0,
    config_runtime: ConfigRuntime | None = None,
    engine: RunEngine | None = None,
) -> FastAPI:
    """Build the app. ``store`` wins over ``db_path``; the default database is
    ``./.lovia/<agent>.db`` (``./.lovia/lovia.db`` for several agents).

    ``approval_timeout`` (seconds, ``None`` waits forever) denies a gated call nobody
    answered; ``max_background_runs`` bounds live runs (one more gets 429). ``token`` (the
    server token) or ``auth`` (your own dependency) guards the API; without either the app
    has no authentication. ``cors_origins`` unset sends no CORS headers; ``ui=False`` serves
    the API only.

    ``generate_titles`` titles a new chat with a model once its first run ends
    (``title_model``, else the chat agent's own); ``followups`` (off by default) serves
    ``POST /api/sessions/{id}/followups`` with a model (``followup_model``, else the chat
    agent's) or with a ``FollowupFn`` (docs/web-sessions.md). ``scheduler_poll`` is the
    scheduler's pass interval (``None``: no scheduler loop); ``wire_subagents`` runs default
    ``Subagents`` children as supervised runs. ``budget`` is copied for each run
    (``RunBudget.fresh``). ``question_channel`` is the ``HumanChannel`` the agents'
    ``ask_human`` tool was built on; its questions are answered with ``POST /api/chat/answer``
    and cancelled after ``question_timeout`` seconds. ``config_runtime`` (the CLI's default
    agent) adds ``/api/config`` and swaps the agent it builds into the served ones; with it,
    an empty mapping serves the setup state.

    ``engine`` (a ``lovia.web.scale.RunEngine``; needs a PostgreSQL ``store``) makes this
    app one worker of several: runs are dispatched through the engine and recovered by it
    when a worker dies (docs/web-scale.md). It takes ``max_background_runs`` runs at once.
    """
    if config_runtime is not None and isinstance(agent_or_agents, Mapping) and not agent_or_agents:
        agent_or_agents = {config_runtime.agent_name: config_runtime.served_agent()}
    agents = agents_of(agent_or_agents, caller="create_app()")
    guard = _auth_dependencies(token, auth)
    origins = _cors_origins(cors_origins)
    if store is None:
        if db_path is None:
            name = next(iter(agents)) if len(agents) == 1 else "lovia"
            db_path = Path(".lovia") / f"{name}.db"
        store = ChatStore.from_url(str(db_path))  # a file path or a postgresql:// URL
    deps = RouterDeps(
        agents=agents,
        store=store,
        approvals=ApprovalRegistry(timeout=approval_timeout),
        title=title,
        max_background_runs=max_background_runs,
        max_turns=max_turns,
        questions=(
            QuestionRegistry(question_channel, timeout=question_timeout)
            if question_channel is not None
            else None
        ),
        lifecycle=_lifecycle(store, agents, generate_titles, title_model),
        followups=(
            Followups(followups, agents=agents, model=followup_model)
            if followups is not False
            else None
        ),
        budget=budget,
        scheduler_poll=scheduler_poll,
    )
    state = deps.state()
    if config_runtime is not None:
        state = replace(state, config_runtime=config_runtime)
        state.features["model_config"] = True
        config_runtime.bind(state.agents, state.supervisor.agents)
        _publish_config_changes(state, config_runtime)
    if engine is not None:
        from .scale.cluster import Cluster

        engine.concurrency = max_background_runs
        bus = state.lifecycle.bus if state.lifecycle is not None else None
        Cluster(store, engine).attach(state.supervisor, bus)
    background = Background(state, scheduler_poll=scheduler_poll)
    app = FastAPI(
        title=title, docs_url="/api/docs", openapi_url="/api/openapi.json", redoc_url=None
    )
    app.state.lovia = state
    app.state.lovia_background = background
    if wire_subagents:
        subagents.wire_subagents(app)
    install_error_handlers(app)
    app.include_router(info.health_router)
    unauthorized = error_responses(401) if guard else None
    gate: list[Any] = []
    if config_runtime is not None:
        from .routes import config

        gate = [Depends(config.setup_gate(config_runtime))]  # after the auth: 401 first
    api = _api_router(state, background)
    # An open server refuses other sites' forms and body-less posts (no CORS preflight).
    open_api = [] if guard else [Depends(cross_site_guard(origins))]
    app.include_router(api, dependencies=[*guard, *open_api, *gate], responses=unauthorized)
    if config_runtime is not None:
        app.include_router(config.router, dependencies=[*guard, *open_api], responses=unauthorized)
    if ui:
        _mount_ui(app, state)
    if origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_credentials="*" not in origins,  # a wildcard never carries the cookie
            allow_methods=["*"],
            allow_headers=["*"],
        )
    if token is not None:
        app.add_middleware(TokenLinkMiddleware, token=token)
    return app


def _url_host(host: str) -> str:
    name = host.strip()
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def serve_banner(
    host: str, port: int, token: str | None, *, generated: bool, ui: bool = True
) -> list[str]:
    """What ``serve`` prints about access: the token and the ``/?token=`` link (IPv6
    bracketed), or the loopback note. Empty when a custom ``auth`` guards the server."""
    base = f"http://{_url_host(host)}:{port}"
    if token is None:
        return [f"lovia web: {base}/ (no authentication: loopback only)"]
    lines = [
        f"lovia web: {'generated ' if generated else ''}server token: {token}",
        "lovia web: clients send it as 'Authorization: Bearer <token>' or the lovia_token cookie",
    ]
    if ui:
        lines.append(f"lovia web: open {base}/?token={token}")
    return lines


def _split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    import uvicorn

    app_names = set(inspect.signature(create_app).parameters) - {"agent_or_agents"}
    uvicorn_names = set(inspect.signature(uvicorn.Config).parameters) - {"app", "host", "port"}
    app_options = {k: v for k, v in options.items() if k in app_names}
    uvicorn_options = {k: v for k, v in options.items() if k not in app_names}
    unknown = sorted(set(uvicorn_options) - uvicorn_names)
    if unknown:
        raise UserError(
            f"serve() got unknown option(s): {', '.join(unknown)}",
            hint="serve takes create_app's options plus uvicorn.Config's",
        )
    return app_options, uvicorn_options


def serve(
    agent_or_agents: Agent[Any] | Mapping[str, Agent[Any]],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    auth: Callable[..., Any] | None = None,
    ui: bool = True,
    out: TextIO | None = None,
    **options: Any,
) -> None:
    """Serve the agent(s) with uvicorn until interrupted.

    ``options`` are ``create_app``'s (``db_path``, ``title``, ``approval_timeout``, ...) and,
    for the rest, ``uvicorn.Config``'s (``log_level``, ``ssl_certfile``, ...). A server always
    has 8 background runs. On a non-loopback ``host`` without ``token`` or ``auth``, a token
    is generated; the token (generated or given) and a ``/?token=`` link are printed to
    ``out`` (stdout by default). A custom ``auth`` is never paired with a generated token.
    """
    import uvicorn

    if "max_background_runs" in options:
        raise UserError(
            "serve() always uses 8 background runs",
            hint="build the app with create_app(max_background_runs=...) and run it yourself",
        )
    app_options, uvicorn_options = _split_options(options)
    if token is not None:
        token = normalise_token(token)
    generated = token is None and auth is None and not is_loopback(host)
    if generated:
        token = generate_token()
    app = create_app(
        agent_or_agents,
        token=token,
        auth=auth,
        ui=ui,
        max_background_runs=_SERVE_BACKGROUND_RUNS,
        **app_options,
    )
    if auth is None:
        stream = out if out is not None else sys.stdout
        for line in serve_banner(host, port, token, generated=generated, ui=ui):
            print(line, file=stream, flush=True)
    uvicorn.run(app, host=host, port=port, **uvicorn_options)
