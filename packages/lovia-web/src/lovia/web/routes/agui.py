"""``POST /api/agui``: the AG-UI protocol over a supervised run (docs/web-agui.md).

The body is AG-UI's ``RunAgentInput``. ``threadId`` is the lovia session id; the server
keeps the transcript, so only the last ``user`` message is new input. A request with
``resume`` entries answers the approval interrupt a previous AG-UI run ended with, and the
same lovia run continues. The answer is an SSE stream written with AG-UI's ``EventEncoder``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import ResumeEntry, RunAgentInput
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from lovia.exceptions import UserError

from ..deps import State, WebState
from ..encoders.agui import AguiEncoder, agui_events
from ..errors import NotFound, RunConflict
from ..models import SESSION_ID_PATTERN, error_responses

__all__ = ["agui", "router"]

router = APIRouter()

_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_MAX_MESSAGE_CHARS = 100_000
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "an AG-UI event stream"},
    **error_responses(404, 409, 422, 429),
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: the text ones
        return "\n".join(
            str(getattr(part, "text", ""))
            for part in content
            if getattr(part, "type", "") == "text"
        )
    return ""


def _user_message(body: RunAgentInput) -> str:
    for message in reversed(body.messages):
        if getattr(message, "role", None) == "user":
            text = _text_of(getattr(message, "content", ""))
            if text.strip() and len(text) <= _MAX_MESSAGE_CHARS:
                return text
            break
    raise UserError(
        "messages: the last user message must have text (at most 100000 characters)",
        hint="AG-UI sends the conversation; the server runs its last user message",
    )


def _decision(entry: ResumeEntry) -> tuple[bool, str | None]:
    """``(approved, reason)`` from a resume entry: ``cancelled`` denies; a ``resolved``
    payload is ``{"approved": bool, "reason"?: str}``, a bool, or ``"approve"``/``"deny"``."""
    if entry.status == "cancelled":
        return False, "the interrupt was cancelled"
    payload = entry.payload
    if isinstance(payload, bool):
        return payload, None
    if payload in ("approve", "deny"):
        return payload == "approve", None
    if isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
        reason = payload.get("reason")
        return payload["approved"], reason if isinstance(reason, str) else None
    raise UserError(
        f"resume: the answer to interrupt {entry.interrupt_id!r} must be "
        '{"approved": true|false}, a boolean, or "approve"/"deny"',
        hint="the interrupt's responseSchema describes the answer",
    )


async def _resume(state: WebState, thread_id: str, entries: list[ResumeEntry]) -> tuple[str, int]:
    """Decide the answered approvals; the live run and the position its stream stopped at."""
    decisions = {entry.interrupt_id: _decision(entry) for entry in entries}
    live = state.supervisor.live(thread_id)
    if live is None:
        raise NotFound(
            f"thread {thread_id!r} has no run waiting on an interrupt",
            hint="it may have ended (an unanswered approval is denied after the timeout)",
        )
    records = await state.store.read_events(live.run_id)
    stops = [
        r.seq
        for r in records
        if r.type == "approval_required" and r.data.get("call_id") in decisions
    ]
    if not stops:
        raise NotFound(
            f"thread {thread_id!r} asked for no approval with the interrupt id(s) "
            f"{', '.join(sorted(decisions))}",
            hint="answer the interrupts the last RUN_FINISHED named",
        )
    for call_id, (approved, reason) in decisions.items():
        # False when the timeout already denied it: the run went on, and the stream shows it.
        state.supervisor.approvals.decide(thread_id, call_id, approved, reason=reason)
    return live.run_id, max(stops)  # the stream continues after the (latest) ask


@router.post(
    "/api/agui",
    response_class=StreamingResponse,
    responses=_STREAM,
    summary="Run the agent over the AG-UI protocol",
)
async def agui(body: RunAgentInput, state: State) -> StreamingResponse:
    """Start a run of the thread's last user message (or, with ``resume``, continue the run
    an approval interrupted) and stream it as AG-UI events. ``forwardedProps.agent`` picks
    the agent on a multi-agent server."""
    thread_id = body.thread_id
    if not _SESSION_ID.match(thread_id):
        raise UserError(
            f"threadId: must match {SESSION_ID_PATTERN}",
            hint="use letters, digits, '_' and '-' (at most 64)",
        )
    if body.resume:
        lovia_run, after = await _resume(state, thread_id, list(body.resume))
        announced = [entry.interrupt_id for entry in body.resume]
    else:
        message = _user_message(body)
        if state.supervisor.live(thread_id) is not None:
            raise RunConflict(
                f"thread {thread_id!r} already has a live run",
                hint="answer its pending interrupt with resume, or wait for it to finish",
            )
        props = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
        agent = props.get("agent")
        started = await state.supervisor.start(
            message,
            session_id=thread_id,
            agent=agent if isinstance(agent, str) else None,
            attach=False,  # a request racing this check gets the 409 too
        )
        lovia_run, after, announced = started.run.run_id, 0, []
    encoder = EventEncoder()
    events = agui_events(
        state.supervisor,
        AguiEncoder(thread_id, body.run_id, announced=announced),
        lovia_run,
        after=after,
    )

    async def frames() -> AsyncIterator[str]:
        async for event in events:
            yield encoder.encode(event)

    return StreamingResponse(
        frames(),
        media_type=encoder.get_content_type(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
