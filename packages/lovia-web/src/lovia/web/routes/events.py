"""``/api/events``: the lifecycle event bus as Server-Sent Events.

No history is replayed: a client fetches a snapshot (``/api/sessions``, ``/api/runs``) once
it is subscribed (the stream's first line is the comment ``: subscribed after seq N``), then
applies the events. Every frame carries ``id: <seq>`` (the bus's
counter), ``event: <kind>`` and the event's JSON ``data`` with ``seq`` and ``at`` added. A
client that the bus drops for being slow, or that loses its connection, reconnects and
fetches a fresh snapshot. Closing the connection unsubscribes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from sse_starlette import EventSourceResponse, ServerSentEvent

from ..deps import State
from ..encoders.sse import json_data
from ..errors import NotFound
from ..lifecycle import LifecycleBus
from ..models import error_responses

__all__ = ["lifecycle_frames", "router", "stream_events"]

router = APIRouter(prefix="/api")

_PING_SECONDS = 15
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "an SSE stream"},
    **error_responses(404),
}


async def lifecycle_frames(bus: LifecycleBus) -> AsyncIterator[ServerSentEvent]:
    """The bus's events as frames, from now until the bus closes or drops the client."""
    sub = bus.subscribe()
    try:
        # A comment, so a client knows it is subscribed (and from which seq) before it
        # fetches its snapshot.
        yield ServerSentEvent(comment=f"subscribed after seq {bus.seq}")
        async for event in sub:
            data = {**event.data, "seq": event.seq, "at": event.at}
            yield ServerSentEvent(
                data=json_data(data),
                event=event.kind,
                id=str(event.seq),
            )
    finally:
        bus.unsubscribe(sub)


@router.get("/events", response_class=EventSourceResponse, responses=_STREAM)
async def stream_events(state: State) -> EventSourceResponse:
    """Follow the server's lifecycle: ``run_started``, ``run_finished``, ``session_created``,
    ``session_retitled``, ``config_changed``."""
    if state.lifecycle is None:
        raise NotFound("this server has no lifecycle events")
    return EventSourceResponse(lifecycle_frames(state.lifecycle.bus), ping=_PING_SECONDS)
