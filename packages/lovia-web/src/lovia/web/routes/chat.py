"""``/api/chat*``: blocking chat, stream (start or attach, resume, reconnect), approve,
answer, cancel, inject and uninject."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Query
from lovia.exceptions import LoviaError, UserError
from lovia.transcript import to_json_safe
from sse_starlette import EventSourceResponse, ServerSentEvent

from ..attachments import chat_input
from ..deps import State, WebState
from ..encoders.sse import session_frame, snapshot_frame, sse_frame
from ..errors import NotFound, RunConflict, WebError
from ..eventlog import error_record
from ..models import (
    SESSION_ID_PATTERN,
    AnswerRequest,
    AnswerResult,
    ApproveRequest,
    ApproveResult,
    CancelResult,
    ChatRequest,
    ChatResponse,
    ChatUsage,
    InjectRequest,
    InjectResult,
    UninjectRequest,
    UninjectResult,
    error_responses,
)
from ..supervisor import RunSupervisor, Snapshot

__all__ = [
    "RunFailedError",
    "answer",
    "approve",
    "cancel",
    "chat",
    "inject",
    "pending_state",
    "reconnect",
    "resume_stream",
    "router",
    "start_stream",
    "uninject",
]

router = APIRouter(prefix="/api/chat")
logger = logging.getLogger(__name__)


class RunFailedError(WebError):
    """A blocking chat's run failed (the model, a budget, ...): 502, naming the error."""

    status = 502


_PING_SECONDS = 15
_MAX_EVENT_ID = 2**63 - 1
"""The largest id a store can hold (a signed 64-bit integer): a larger one is a 422."""
_ERRORS = error_responses(404, 409, 422, 429)
_CHAT_ERRORS = error_responses(404, 409, 422, 502)
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "an SSE stream"},
    **_ERRORS,
}


async def _elsewhere(
    state: WebState, session_id: str, op: str, **args: Any
) -> dict[str, Any] | None:
    """Run ``op`` on the worker holding the chat's live run when several workers share the
    database (``lovia.web.scale``); ``None`` on a single server or when no worker holds it."""
    cluster = state.supervisor.cluster
    if cluster is None or state.supervisor.live(session_id) is not None:
        return None
    return await cluster.call(session_id, op, **args)


async def _frames(
    supervisor: RunSupervisor,
    *,
    session_id: str,
    run_id: str | None,
    attached: bool,
    after: int,
    snapshot: Snapshot | None = None,
    pending: dict[str, Any] | None = None,
) -> AsyncIterator[ServerSentEvent]:
    yield session_frame(session_id=session_id, run_id=run_id, attached=attached, after=after)
    if snapshot is not None:
        yield snapshot_frame(_snapshot_data(supervisor, snapshot, pending))
    if run_id is not None:
        async for record in supervisor.follow(run_id, after=after):
            yield sse_frame(record)


def _snapshot_data(
    supervisor: RunSupervisor, snapshot: Snapshot, pending: dict[str, Any] | None = None
) -> dict[str, Any]:
    run = snapshot.run
    data: dict[str, Any] = {
        "session_id": snapshot.session_id,
        "run_id": run.run_id if run is not None else None,
        "entries": snapshot.entries,
    }
    data.update(pending if pending is not None else pending_state(supervisor, snapshot.session_id))
    return data


def pending_state(supervisor: RunSupervisor, session_id: str) -> dict[str, Any]:
    """What the chat's run waits on in this process: approvals and a question (a snapshot's
    part that only the worker holding the run knows)."""
    data: dict[str, Any] = {
        "pending_approvals": supervisor.approvals.pending(session_id),
        "pending_question": None,
    }
    question = supervisor.questions.pending(session_id) if supervisor.questions else None
    if question is not None:
        data["pending_question"] = {
            "id": question.id,
            "question": question.question,
            "options": [{"label": o.label, "description": o.description} for o in question.options],
            "multi_select": question.multi_select,
        }
    return data


@router.post("", response_model=ChatResponse, responses=_CHAT_ERRORS)
async def chat(body: ChatRequest, state: State) -> ChatResponse:
    """Run the message to its end and answer with the output (no stream, no supervision).

    409 while a run (streamed or blocking) owns the session; 502 when the run fails.
    """
    message = await chat_input(state.supervisor, body)  # attachments resolved
    try:
        session_id, result = await state.supervisor.run_blocking(
            message, session_id=body.session_id, agent=body.agent
        )
    except (WebError, UserError):
        raise
    except LoviaError as exc:  # the run failed: what the stream's ``error`` event would say
        error = error_record(exc)
        raise RunFailedError(f"the run failed: {error['type']}: {error['message']}") from exc
    except Exception as exc:  # a bug in a tool or a provider: its message may hold internals
        logger.exception("blocking chat of session %s failed", body.session_id)
        raise RunFailedError(f"the run failed: {type(exc).__name__}") from exc
    usage = result.usage
    return ChatResponse(
        output=to_json_safe(result.output),
        session_id=session_id,
        usage=ChatUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            requests=usage.requests,
            last_input_tokens=result.last_input_tokens,
        ),
    )


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
    last_event_id: int | None = Query(default=None, ge=0, le=_MAX_EVENT_ID),
    last_event_id_header: int | None = Header(
        default=None, alias="Last-Event-ID", ge=0, le=_MAX_EVENT_ID
    ),
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


@router.post("/reconnect", response_class=EventSourceResponse, responses=_STREAM)
async def reconnect(
    state: State, session_id: str = Query(pattern=SESSION_ID_PATTERN)
) -> EventSourceResponse:
    """Re-attach to the chat: ``session``, then a ``snapshot`` (the completed turns as
    transcript entries, the live run's input last), then the live run's events from its
    first (a pending ``approval_required`` included) and the live ones after them.

    A run a restart interrupted is resumed from its checkpoint first. With no run at all the
    stream ends after the snapshot.
    """
    if await state.store.get_session(session_id) is None:
        raise NotFound(f"unknown session {session_id!r}")
    snapshot = await state.supervisor.snapshot(session_id)
    run_id = snapshot.run.run_id if snapshot.run is not None else None
    pending = None
    cluster = state.supervisor.cluster
    if cluster is not None and run_id is not None and state.supervisor.live(session_id) is None:
        # the run lives on another worker: only that worker knows what it waits on
        pending = await cluster.pending_state(session_id, run_id)
    frames = _frames(
        state.supervisor,
        session_id=session_id,
        run_id=run_id,
        attached=True,
        after=0,
        snapshot=snapshot,
        pending=pending,
    )
    return EventSourceResponse(frames, ping=_PING_SECONDS)


@router.post("/answer", response_model=AnswerResult, responses=_ERRORS)
async def answer(body: AnswerRequest, state: State) -> AnswerResult:
    """Answer the ``ask_human`` question the session's run waits on."""
    questions = state.supervisor.questions
    if questions is None:
        raise NotFound(
            "this server has no question channel",
            hint="pass create_app(question_channel=...) with the channel of ask_human",
        )
    question = questions.answer(body.session_id, body.answer)
    if question is None:
        remote = await _elsewhere(state, body.session_id, "answer", answer=body.answer)
        if remote is not None and remote.get("answered"):
            return AnswerResult(
                session_id=body.session_id,
                question_id=remote["question_id"],
                question=remote["question"],
            )
        raise NotFound(
            f"no question pending in session {body.session_id!r}",
            hint="it may have been answered already or timed out",
        )
    return AnswerResult(
        session_id=body.session_id, question_id=question.id, question=question.question
    )


@router.post("/approve", response_model=ApproveResult, responses=_ERRORS)
async def approve(body: ApproveRequest, state: State) -> ApproveResult:
    """Decide a gated tool call the session's run waits on."""
    decided = state.supervisor.approvals.decide(
        body.session_id, body.call_id, body.decision == "approve", reason=body.reason
    )
    if not decided:
        remote = await _elsewhere(
            state,
            body.session_id,
            "approve",
            call_id=body.call_id,
            approve=body.decision == "approve",
            reason=body.reason,
        )
        decided = remote is not None and bool(remote.get("decided"))
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
    """Cancel the session's live run (it ends with ``error`` then ``done``, ``cancelled``;
    its turns so far stay in the chat). With no live run, a run a restart left interrupted
    is forgotten the same way; 404 when there is neither."""
    if state.supervisor.live(session_id) is None:
        remote = await _elsewhere(state, session_id, "cancel")
        if remote is not None:
            return CancelResult(session_id=session_id, run_id=remote["run_id"])
        stranded = await state.supervisor.clear_stranded(session_id)
        if stranded is None:
            raise NotFound(f"session {session_id!r} has no live run")
        return CancelResult(session_id=session_id, run_id=stranded)
    run = state.supervisor.cancel(session_id)
    return CancelResult(session_id=session_id, run_id=run.run_id)


@router.post("/inject", response_model=InjectResult, responses=_ERRORS)
async def inject(body: InjectRequest, state: State) -> InjectResult:
    """Queue a message into the live run; it becomes a user entry at the next turn."""
    remote = await _elsewhere(state, body.session_id, "inject", message=body.message)
    if remote is not None:
        return InjectResult(id=remote["id"])
    await _live_or_error(state, body.session_id)
    return InjectResult(id=state.supervisor.inject(body.session_id, body.message))


@router.post("/uninject", response_model=UninjectResult, responses=_ERRORS)
async def uninject(body: UninjectRequest, state: State) -> UninjectResult:
    """Withdraw a message ``inject`` queued, while the run has not taken it yet."""
    remote = await _elsewhere(state, body.session_id, "uninject", id=body.id)
    withdrawn = remote is not None and bool(remote.get("withdrawn"))
    if not withdrawn and not state.supervisor.uninject(body.session_id, body.id):
        raise NotFound(
            f"no queued message {body.id} in session {body.session_id!r}",
            hint="the run may have taken it already",
        )
    return UninjectResult(session_id=body.session_id, id=body.id)
