"""``GET /api/sessions/{id}/turns/{n}/context``: the context inspector (``lovia.web.inspector``)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from ..deps import State
from ..inspector import TurnContext, turn_context
from ..models import SESSION_ID_PATTERN, error_responses
from ..store.sql import well_formed

__all__ = ["router", "turn_context_route"]

router = APIRouter(prefix="/api/sessions")


class _WellFormedJSON(JSONResponse):
    """JSON that UTF-8 can carry: the view holds what a model or a tool wrote, and a lone
    surrogate there (kept as is in the record) would fail the plain encoder with a 500."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return well_formed(text).encode("utf-8")


@router.get(
    "/{session_id}/turns/{turn}/context",
    response_model=TurnContext,
    response_class=_WellFormedJSON,
    responses=error_responses(404, 422),
)
async def turn_context_route(
    state: State,
    session_id: str = Path(pattern=SESSION_ID_PATTERN),
    turn: int = Path(ge=1, le=100_000),
    run_id: str | None = Query(default=None, pattern=r"^[0-9a-f]{32}$"),
) -> TurnContext:
    """What the record holds for the turn, what is known of what the model saw (token
    estimates by part against the window, compactions, approvals), and what is not kept."""
    return await turn_context(state.store, state.agents, session_id, turn, run_id=run_id)
