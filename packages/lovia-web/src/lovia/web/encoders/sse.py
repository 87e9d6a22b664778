"""Our SSE wire format: one frame per record, ``id:`` is the record's ``seq``.

``data`` is the record's JSON (non-ASCII kept readable); the ``event`` name is the record's
type. The ``session`` frame that opens every stream is built here too.
"""

from __future__ import annotations

import json
from typing import Any

from sse_starlette import ServerSentEvent

from ..eventlog import EventRecord

__all__ = ["session_frame", "snapshot_frame", "sse_frame"]


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def sse_frame(record: EventRecord) -> ServerSentEvent:
    return ServerSentEvent(data=_json(record.data), event=record.type, id=str(record.seq))


def session_frame(
    *, session_id: str, run_id: str | None, attached: bool, after: int
) -> ServerSentEvent:
    """The first frame of a stream; its ``id`` is the position the stream resumes after."""
    data = {"session_id": session_id, "run_id": run_id, "attached": attached}
    return ServerSentEvent(data=_json(data), event="session", id=str(after))


def snapshot_frame(data: dict[str, Any]) -> ServerSentEvent:
    """A reconnect's ``snapshot``: no ``id``, so it leaves the client's last id alone."""
    return ServerSentEvent(data=_json(data), event="snapshot")
