"""``/api/config/*``: read and change the served model configuration (only on a server whose
agent is the CLI's default agent, i.e. one built with a ``ConfigRuntime``).

Reads never show a key (``{set, hint}``) and are not cached. Writes to a server without
authentication whose ``Host`` is not a loopback name are refused (403, ``rebinding_guard``):
a DNS-rebinding page must not reconfigure a local server; token auth lifts the guard. While
no model is configured, the chat endpoints answer 503 with a hint (``setup_gate``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from ..auth import rebinding_guard
from ..config.probe import ProbeResult
from ..config.runtime import (
    ConfigRuntime,
    ConfigView,
    ProfileInput,
    RolesInput,
    SearchInput,
    TestRequest,
)
from ..deps import State
from ..errors import NotFound, WebError
from ..models import error_responses

__all__ = [
    "SetupRequired",
    "add_model",
    "delete_model",
    "get_config",
    "router",
    "runtime_of",
    "set_roles",
    "set_search",
    "setup_gate",
    "test_connection",
    "update_model",
]

_NO_STORE = {"Cache-Control": "no-store"}


def runtime_of(state: State) -> ConfigRuntime:
    if state.config_runtime is None:  # mounted only with a runtime; belt and braces
        raise NotFound("this server has no model configuration", hint="it serves --app agents")
    return state.config_runtime


Runtime = Annotated[ConfigRuntime, Depends(runtime_of)]
router = APIRouter(prefix="/api/config", dependencies=[Depends(rebinding_guard)])
_ERRORS = error_responses(403, 404, 409, 422)


@router.get("", response_model=ConfigView)
async def get_config(runtime: Runtime, response: Response) -> ConfigView:
    response.headers.update(_NO_STORE)
    return runtime.view()


@router.post("/models", response_model=ConfigView, status_code=201, responses=_ERRORS)
async def add_model(body: ProfileInput, runtime: Runtime, response: Response) -> ConfigView:
    response.headers.update(_NO_STORE)
    return await runtime.add_model(body)


@router.put("/models/{model_id}", response_model=ConfigView, responses=_ERRORS)
async def update_model(
    model_id: str, body: ProfileInput, runtime: Runtime, response: Response
) -> ConfigView:
    response.headers.update(_NO_STORE)
    return await runtime.update_model(model_id, body)


@router.delete("/models/{model_id}", response_model=ConfigView, responses=_ERRORS)
async def delete_model(model_id: str, runtime: Runtime, response: Response) -> ConfigView:
    response.headers.update(_NO_STORE)
    return await runtime.delete_model(model_id)


@router.put("/roles", response_model=ConfigView, responses=_ERRORS)
async def set_roles(body: RolesInput, runtime: Runtime, response: Response) -> ConfigView:
    response.headers.update(_NO_STORE)
    return await runtime.set_roles(body)


@router.put("/search", response_model=ConfigView, responses=_ERRORS)
async def set_search(body: SearchInput, runtime: Runtime, response: Response) -> ConfigView:
    response.headers.update(_NO_STORE)
    return await runtime.set_search(body)


@router.post("/test", response_model=ProbeResult, responses=_ERRORS)
async def test_connection(body: TestRequest, runtime: Runtime, response: Response) -> ProbeResult:
    """Probe a connection live (nothing is saved)."""
    response.headers.update(_NO_STORE)
    return await runtime.test(body)


_BLOCKED_PREFIX = "/api/chat"


class SetupRequired(WebError):
    """A chat request while no model is configured yet."""

    status = 503


def setup_gate(runtime: ConfigRuntime) -> Callable[[Request], Awaitable[None]]:
    """A dependency answering 503 to the chat endpoints while no model is configured. It
    guards the API router after the server's auth, so an unauthenticated client gets its
    401 and learns nothing about the setup."""

    async def require_a_model(request: Request) -> None:
        path = request.url.path
        if (
            not runtime.configured
            and request.method == "POST"
            and (path == _BLOCKED_PREFIX or path.startswith(_BLOCKED_PREFIX + "/"))
        ):
            raise SetupRequired(
                "no model is configured yet",
                hint="open the server's page to add a model, or POST /api/config/models",
            )

    return require_a_model
