"""``/api/sessions``: list, read, rename or pin, delete."""

from __future__ import annotations

from fastapi import APIRouter, Query, Response
from lovia.transcript import entry_to_dict

from ..deps import State, WebState
from ..errors import NotFound
from ..models import SessionDetail, SessionInfo, SessionList, SessionPatch, error_responses
from ..store.base import ChatMeta

__all__ = ["delete_session", "get_session", "list_sessions", "patch_session", "router"]

router = APIRouter(prefix="/api/sessions")

_ERRORS = error_responses(404, 422)


def _info(state: WebState, meta: ChatMeta) -> SessionInfo:
    return SessionInfo.of(meta, live=state.supervisor.live(meta.id) is not None)


@router.get("", response_model=SessionList, responses=_ERRORS)
async def list_sessions(
    state: State,
    limit: int = Query(default=50, ge=1, le=200),
    offset: int = Query(default=0, ge=0),
    q: str | None = Query(default=None, max_length=200),
) -> SessionList:
    """Pinned chats first, then the most recently updated; ``q`` searches the titles."""
    metas = await state.store.list_sessions(limit=limit, offset=offset, query=q)
    return SessionList(sessions=[_info(state, m) for m in metas], limit=limit, offset=offset)


@router.get("/{session_id}", response_model=SessionDetail, responses=_ERRORS)
async def get_session(session_id: str, state: State) -> SessionDetail:
    """The chat's metadata and its transcript (what completed runs appended)."""
    meta = await state.store.get_session(session_id)
    if meta is None:
        raise NotFound(f"unknown session {session_id!r}")
    entries = [entry_to_dict(e) for e in await state.store.session.load(session_id)]
    return SessionDetail(**_info(state, meta).model_dump(), entries=entries)


@router.patch("/{session_id}", response_model=SessionInfo, responses=_ERRORS)
async def patch_session(session_id: str, body: SessionPatch, state: State) -> SessionInfo:
    meta = await state.store.update_session(session_id, title=body.title, pinned=body.pinned)
    if meta is None:
        raise NotFound(f"unknown session {session_id!r}")
    return _info(state, meta)


@router.delete("/{session_id}", status_code=204, responses=_ERRORS)
async def delete_session(session_id: str, state: State) -> Response:
    """Stop the chat's live run (waiting for it to end), then delete everything it owns."""
    if await state.store.get_session(session_id) is None:
        raise NotFound(f"unknown session {session_id!r}")
    await state.supervisor.stop(session_id)
    await state.store.delete_session(session_id)
    return Response(status_code=204)
