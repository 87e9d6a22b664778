"""``GET /api/sessions/{id}/turns/{n}/context``: the context inspector (``lovia.web.inspector``)."""

from __future__ import annotations

from fastapi import APIRouter, Path, Query

from ..deps import State
from ..inspector import TurnContext, turn_context
from ..models import SESSION_ID_PATTERN, error_responses

__all__ = ["router", "turn_context_route"]

router = APIRouter(prefix="/api/sessions")


@router.get(
    "/{session_id}/turns/{turn}/context",
    response_model=TurnContext,
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
