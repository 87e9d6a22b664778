"""``/api/sessions``: list, read, rename or pin, delete (one or all), rewind, export, todos,
tool-result images and follow-up suggestions."""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from typing import Any, Literal

from fastapi import APIRouter, Path, Query, Response
from lovia.exceptions import UserError
from lovia.parts import ImagePart, text_of
from lovia.session import read_segments
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry, entry_to_dict
from pydantic import BaseModel, ConfigDict, Field

from ..deps import State, WebState
from ..errors import NotFound, RunConflict, WebError
from ..export import export_session
from ..models import (
    SESSION_ID_PATTERN,
    SessionDetail,
    SessionInfo,
    SessionList,
    SessionPatch,
    error_responses,
)
from ..store.base import ChatMeta
from ..store.sql import well_formed

__all__ = [
    "DeletedSessions",
    "FollowupList",
    "RewindRequest",
    "RewindResult",
    "RewindUnsupported",
    "SessionView",
    "TodoItemModel",
    "TodoListModel",
    "delete_all_sessions",
    "delete_session",
    "export_chat",
    "get_session",
    "list_sessions",
    "patch_session",
    "rewind_session",
    "suggest_followups",
    "todos",
    "tool_image",
]

router = APIRouter(prefix="/api/sessions")

_ERRORS = error_responses(404, 422)
_SESSION_ID = Path(pattern=SESSION_ID_PATTERN)
_REWIND_DRAIN_SECONDS = 5.0
"""How long a rewind waits for a run that is already stopping before answering 409."""
_IMAGE_STUB = "/api/sessions/{session_id}/tool-images/{call_id}/{index}"
_SAFE_IMAGE = re.compile(r"^image/(?:png|jpeg|gif|webp|avif|bmp|heic|heif)$")


class RewindUnsupported(WebError):
    """The store cannot truncate a transcript."""

    status = 501


class SessionView(SessionDetail):
    """``GET /api/sessions/{id}``: the metadata, the transcript and the last compaction."""

    compaction: dict[str, Any] | None = None
    """The newest persisted compaction notice (``reason, summary, tokens_before, ...``)."""


class DeletedSessions(BaseModel):
    deleted: list[str]
    """The ids of the chats removed."""


class RewindRequest(BaseModel):
    """``POST /api/sessions/{id}/rewind``: drop user message ``user_turn`` (zero-based) and
    everything after it."""

    model_config = ConfigDict(extra="forbid")

    user_turn: int = Field(ge=0, le=1_000_000, strict=True)


class RewindResult(BaseModel):
    session_id: str
    user_turn: int
    removed: int
    """Transcript entries dropped."""
    message: str
    """The text of the user message that was dropped (to edit and resend)."""


class TodoItemModel(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"]
    active_form: str


class TodoListModel(BaseModel):
    todos: list[TodoItemModel]


class FollowupList(BaseModel):
    suggestions: list[str]


def _info(state: WebState, meta: ChatMeta) -> SessionInfo:
    return SessionInfo.of(meta, live=state.supervisor.live(meta.id) is not None)


async def _meta(state: WebState, session_id: str) -> ChatMeta:
    meta = await state.store.get_session(session_id)
    if meta is None:
        raise NotFound(f"unknown session {session_id!r}")
    return meta


def _publish(state: WebState, kind: str, data: dict[str, Any]) -> None:
    if state.lifecycle is not None:
        state.lifecycle.bus.publish(kind, data)


def _utf8_safe(value: Any) -> Any:
    """``value`` with every string well-formed (a model may have sent a lone surrogate)."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, dict):
        return {well_formed(k): _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8_safe(v) for v in value]
    return value


def _entry_json(session_id: str, entry: TranscriptEntry) -> dict[str, Any]:
    """An entry as JSON; a tool result's inline images become links to ``tool_image``."""
    data: dict[str, Any] = _utf8_safe(entry_to_dict(entry))
    if isinstance(entry, ToolResultEntry) and entry.parts:
        parts, index = [], 0
        for part, raw in zip(entry.parts, data["parts"], strict=True):
            if isinstance(part, ImagePart) and part.data is not None:
                url = _IMAGE_STUB.format(session_id=session_id, call_id=entry.call_id, index=index)
                raw = {"type": "image", "url": url, "mime_type": part.mime_type}
            if isinstance(part, ImagePart):
                index += 1
            parts.append(raw)
        data["parts"] = parts
    return data


@router.get("", response_model=SessionList, responses=_ERRORS)
async def list_sessions(
    state: State,
    limit: int = Query(default=50, ge=1, le=200),
    offset: int = Query(default=0, ge=0, le=1_000_000_000),
    q: str | None = Query(default=None, max_length=200),
    tasks: bool = Query(default=True),
) -> SessionList:
    """Pinned chats first, then the most recently updated; ``q`` searches the titles;
    ``tasks=false`` leaves task sessions out (the sidebar: they are paged out, not hidden)."""
    metas = await state.store.list_sessions(limit=limit, offset=offset, query=q, tasks=tasks)
    return SessionList(sessions=[_info(state, m) for m in metas], limit=limit, offset=offset)


@router.delete("", response_model=DeletedSessions, responses=_ERRORS)
async def delete_all_sessions(state: State) -> DeletedSessions:
    """Stop every live run (waiting for each to end), then delete every chat."""
    cluster = state.supervisor.cluster
    await asyncio.gather(
        *(state.supervisor.stop(r.session_id) for r in state.supervisor.live_runs()),
        # several workers: the runs the others hold too
        *([cluster.stop_everywhere()] if cluster is not None else []),
    )
    deleted = await state.store.delete_all_sessions()
    # A run that started while the others were stopping has lost its chat: stop it too, and
    # delete again what its stop kept (a cancelled run's partial turns join its chat).
    await asyncio.gather(*(state.supervisor.stop(sid) for sid in deleted))
    for sid in deleted:
        if await state.store.get_session(sid) is not None:
            await state.store.delete_session(sid)
        elif await state.store.session.load(sid):  # no row left, only the kept turns
            await state.store.session.clear(sid)
    return DeletedSessions(deleted=deleted)


@router.get("/{session_id}", response_model=SessionView, responses=_ERRORS)
async def get_session(state: State, session_id: str = _SESSION_ID) -> SessionView:
    """The chat's metadata, its transcript (what completed runs appended; a tool result's
    images as links) and its newest compaction notice."""
    meta = await _meta(state, session_id)
    segments = await read_segments(state.store.session, session_id)
    entries = [_entry_json(session_id, e) for s in segments for e in s.entries]
    notices = [n for s in segments for n in s.meta.get("notices") or () if isinstance(n, dict)]
    return SessionView(
        **_info(state, meta).model_dump(),
        entries=entries,
        compaction=notices[-1] if notices else None,
    )


@router.patch("/{session_id}", response_model=SessionInfo, responses=_ERRORS)
async def patch_session(
    body: SessionPatch, state: State, session_id: str = _SESSION_ID
) -> SessionInfo:
    """Rename and/or pin. A rename is final: a model title never replaces it."""
    meta = await state.store.update_session(session_id, title=body.title, pinned=body.pinned)
    if meta is None:
        raise NotFound(f"unknown session {session_id!r}")
    if body.title is not None:
        _publish(state, "session_retitled", {"session_id": session_id, "title": meta.title})
    return _info(state, meta)


@router.delete("/{session_id}", status_code=204, responses=_ERRORS)
async def delete_session(state: State, session_id: str = _SESSION_ID) -> Response:
    """Stop the chat's live run (waiting for it to end), then delete everything it owns."""
    await _meta(state, session_id)
    await state.supervisor.stop(session_id)
    with state.supervisor.exclusive(session_id):  # no new run writes into it meanwhile
        await state.store.delete_session(session_id)
    return Response(status_code=204)


@router.post(
    "/{session_id}/rewind",
    response_model=RewindResult,
    responses=error_responses(404, 409, 422, 501),
)
async def rewind_session(
    body: RewindRequest, state: State, session_id: str = _SESSION_ID
) -> RewindResult:
    """Drop user message ``user_turn`` (zero-based) and everything after it, to edit and
    resend it. 409 while a run is live; 501 if the store cannot rewind."""
    meta = await _meta(state, session_id)
    if not state.store.supports_rewind:
        raise RewindUnsupported(
            "this server's chat store cannot rewind a transcript",
            hint="use the SQLite or PostgreSQL chat store",
        )
    live = state.supervisor.live(session_id)
    if live is not None and live.stop_reason is not None and live.task is not None:
        # Already winding down (cancelled): give it a moment to finish writing.
        await asyncio.wait({live.task}, timeout=_REWIND_DRAIN_SECONDS)
    if state.supervisor.cluster is not None and live is None and meta.active_run_id is not None:
        # another worker runs it, or the engine is handing it to one: its checkpoint is live
        raise RunConflict(
            f"session {session_id!r} has a run on another worker",
            hint="cancel it or wait until it is done",
        )
    with state.supervisor.exclusive(session_id):  # 409 while a run is live; none starts
        return await _rewind(state, meta, body.user_turn)


async def _rewind(state: WebState, meta: ChatMeta, user_turn: int) -> RewindResult:
    session_id = meta.id
    entries = await state.store.session.load(session_id)
    users = [i for i, e in enumerate(entries) if isinstance(e, InputEntry) and e.role == "user"]
    if user_turn >= len(users):
        raise UserError(
            f"body.user_turn: the chat has {len(users)} user message(s), "
            f"so user_turn must be below {len(users)}",
            hint="user_turn counts the chat's user messages from 0",
        )
    keep = users[user_turn]
    dropped = entries[keep]
    assert isinstance(dropped, InputEntry)
    if meta.active_run_id is not None:
        # An interrupted run's checkpoint holds the old history: resuming it would bring
        # the dropped messages back, so it goes with them.
        await state.store.checkpointer.delete(meta.active_run_id)
        await state.store.set_active_run(session_id, None, expected=meta.active_run_id)
    removed = await state.store.rewind_session(session_id, keep_entries=keep)
    return RewindResult(
        session_id=session_id,
        user_turn=user_turn,
        removed=removed,
        message=text_of(dropped.content),
    )


@router.get(
    "/{session_id}/export",
    response_class=Response,
    responses={
        200: {
            "content": {"text/markdown": {}, "text/plain": {}, "application/json": {}},
            "description": "the chat as a file (Content-Disposition: attachment)",
        },
        **_ERRORS,
    },
)
async def export_chat(
    state: State,
    session_id: str = _SESSION_ID,
    format: Literal["md", "json", "txt"] = Query(default="md"),
) -> Response:
    """Download the chat as Markdown, JSON (``{session, entries}``) or plain text."""
    meta = await _meta(state, session_id)
    exported = export_session(meta, await state.store.session.load(session_id), format)
    return Response(
        exported.body,
        media_type=exported.media_type,
        headers={
            "Content-Disposition": exported.content_disposition,
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.get("/{session_id}/todos", response_model=TodoListModel, responses=_ERRORS)
async def todos(state: State, session_id: str = _SESSION_ID) -> TodoListModel:
    """The chat's todo list as of its newest valid ``todo_write`` (empty if none)."""
    from lovia.plugins.todo import todos_from_entries

    await _meta(state, session_id)
    items = todos_from_entries(await state.store.session.load(session_id))
    return TodoListModel(
        todos=[
            TodoItemModel(content=i.content, status=i.status, active_form=i.active_form)
            for i in items
        ]
    )


@router.get(
    "/{session_id}/tool-images/{call_id}/{index}",
    response_class=Response,
    responses={200: {"content": {"image/*": {}}, "description": "the image"}, **_ERRORS},
)
async def tool_image(
    state: State,
    session_id: str = _SESSION_ID,
    call_id: str = Path(min_length=1, max_length=256),
    index: int = Path(ge=0, le=10_000),
) -> Response:
    """Image ``index`` (zero-based, among the images) of the result of call ``call_id``."""
    await _meta(state, session_id)
    missing = NotFound(f"no image {index} in the result of call {call_id!r}")
    found: ImagePart | None = None
    for entry in reversed(await state.store.session.load(session_id)):
        if isinstance(entry, ToolResultEntry) and entry.call_id == call_id:
            images = [p for p in entry.parts or () if isinstance(p, ImagePart)]
            found = images[index] if index < len(images) else None
            break
    if found is None or found.data is None:
        raise missing
    try:
        data = base64.b64decode(found.data, validate=True)
    except (binascii.Error, ValueError):
        raise missing from None
    mime = (found.mime_type or "").lower()
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=3600"}
    if not _SAFE_IMAGE.match(mime):  # SVG and anything unknown: download, never render
        headers["Content-Disposition"] = f'attachment; filename="image-{index}"'
        mime = "application/octet-stream"
    return Response(data, media_type=mime, headers=headers)


@router.post("/{session_id}/followups", response_model=FollowupList, responses=_ERRORS)
async def suggest_followups(state: State, session_id: str = _SESSION_ID) -> FollowupList:
    """Up to three next questions for the chat's last answered exchange (``[]`` when there
    is none or the suggester fails). 404 when follow-ups are off on this server."""
    meta = await _meta(state, session_id)
    if state.followups is None:
        raise NotFound(
            "follow-up suggestions are off on this server",
            hint="start it with create_app(followups=True)",
        )
    entries = await state.store.session.load(session_id)
    return FollowupList(suggestions=await state.followups.suggest(session_id, meta.agent, entries))
