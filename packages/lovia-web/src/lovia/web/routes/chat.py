"""``/api/chat/*``: stream (start or attach, and resume), approve, cancel, inject."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Query
from sse_starlette import EventSourceResponse, ServerSentEvent

from ..attachments import chat_input
from ..deps import State, WebState
from ..encoders.sse import session_frame, sse_frame
from ..errors import NotFound, RunConflict
from ..models import (
    SESSION_ID_PATTERN,
    ApproveRequest,
    ApproveResult,
    CancelResult,
    ChatRequest,
    InjectRequest,
    InjectResult,
    error_responses,
)
from ..supervisor import RunSupervisor

__all__ = ["approve", "cancel", "inject", "resume_stream", "router", "start_stream"]

router = APIRouter(prefix="/api/chat")

_PING_SECONDS = 15
_ERRORS = error_responses(404, 409, 422, 429)
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "an SSE stream"},
    **_ERRORS,
}


async def _frames(
    supervisor: RunSupervisor, *, session_id: str, run_id: str, attached: bool, after: int
) -> AsyncIterator[ServerSentEvent]:
    yield session_frame(session_id=session_id, run_id=run_id, attached=attached, after=after)
    async for record in supervisor.follow(run_id, after=after):
        yield sse_frame(record)


@router.post("/stream", response_class=EventSourceResponse, responses=_STREAM)
async def start_stream(body: ChatRequest, state: State) -> EventSourceResponse:
    """Start a run (or attach the message to the session's live run) and stream it.

    An attached client gets the live run from its first event, like any co-watcher.
    """
    message = await chat_input(state.supervisor, body)  # attachments resolved
    started = await state.supervisor.start(message, session_id=body.session_id, agent=body.agent)
    run = started.run
    frames = _frames(
        state.supervisor,
        session_id=run.session_id,
        run_id=run.run_id,
        attached=started.attached,
        after=0,
    )
    return EventSourceResponse(frames, ping=_PING_SECONDS)


@router.get("/stream", response_class=EventSourceResponse, responses=_STREAM)
async def resume_stream(
    state: State,
    session_id: str = Query(pattern=SESSION_ID_PATTERN),
    run_id: str | None = Query(default=None, pattern=r"^[0-9a-f]{32}$"),
    last_event_id: int | None = Query(default=None, ge=0),
    last_event_id_header: int | None = Header(default=None, alias="Last-Event-ID", ge=0),
) -> EventSourceResponse:
    """Watch a run of the session from after ``Last-Event-ID``: ``run_id`` (from the
    ``session`` frame), else the live run, else the latest one. A run a restart interrupted
    is resumed from its checkpoint first, and its ids continue where they stopped.

    Ids count per run, so a client resuming across runs passes the ``run_id`` its id belongs
    to. The header wins over the ``last_event_id`` query (an ``EventSource`` sends the header
    on its own reconnects). Without either, the whole run is replayed.
    """
    meta = await state.store.get_session(session_id)
    if meta is None:
        raise NotFound(f"unknown session {session_id!r}")
    live = state.supervisor.live(session_id)
    if live is None and meta.active_run_id is not None and run_id in (None, meta.active_run_id):
        live = await state.supervisor.resume(session_id)  # interrupted by a restart
    if run_id is not None:
        known = live is not None and live.run_id == run_id
        if not known and not await state.store.has_run(session_id, run_id):
            raise NotFound(f"session {session_id!r} has no run {run_id!r}")
    elif live is not None:
        run_id = live.run_id
    else:
        run_id = await state.store.latest_run(session_id)
    if run_id is None:
        raise NotFound(f"session {session_id!r} has no run to stream")
    after = last_event_id_header if last_event_id_header is not None else (last_event_id or 0)
    frames = _frames(
        state.supervisor, session_id=session_id, run_id=run_id, attached=True, after=after
    )
    return EventSourceResponse(frames, ping=_PING_SECONDS)


@router.post("/approve", response_model=ApproveResult, responses=_ERRORS)
async def approve(body: ApproveRequest, state: State) -> ApproveResult:
    """Decide a gated tool call the session's run waits on."""
    decided = state.supervisor.approvals.decide(
        body.session_id, body.call_id, body.decision == "approve", reason=body.reason
    )
    if not decided:
        raise NotFound(
            f"no approval pending for call {body.call_id!r} in session {body.session_id!r}",
            hint="it may have been decided already or timed out",
        )
    return ApproveResult(session_id=body.session_id, call_id=body.call_id, decision=body.decision)


async def _live_or_error(state: WebState, session_id: str) -> None:
    if state.supervisor.live(session_id) is None:
        if await state.store.get_session(session_id) is None:
            raise NotFound(f"unknown session {session_id!r}")
        raise RunConflict(f"session {session_id!r} has no live run")


@router.post("/cancel", response_model=CancelResult, responses=_ERRORS)
async def cancel(state: State, session_id: str = Query(pattern=SESSION_ID_PATTERN)) -> CancelResult:
    """Cancel the session's live run (it ends with ``error`` then ``done``, ``cancelled``)."""
    if state.supervisor.live(session_id) is None:
        raise NotFound(f"session {session_id!r} has no live run")
    run = state.supervisor.cancel(session_id)
    return CancelResult(session_id=session_id, run_id=run.run_id)


@router.post("/inject", response_model=InjectResult, responses=_ERRORS)
async def inject(body: InjectRequest, state: State) -> InjectResult:
    """Queue a message into the live run; it becomes a user entry at the next turn."""
    await _live_or_error(state, body.session_id)
    return InjectResult(id=state.supervisor.inject(body.session_id, body.message))
