"""Our SSE wire format: one frame per record, ``id:`` is the record's ``seq``.

``data`` is the record's JSON (non-ASCII kept readable); the ``event`` name is the record's
type. The ``session`` frame that opens every stream is built here too. The context
inspector's records (``recorder.PRIVATE_RECORDS``) go out as an empty ``context`` frame:
their content is the inspector's, but their id keeps the stream's ids contiguous.
"""

from __future__ import annotations

import json
from typing import Any

from sse_starlette import ServerSentEvent

from ..eventlog import EventRecord
from ..recorder import PRIVATE_RECORDS
from ..store.sql import well_formed

__all__ = ["json_data", "session_frame", "snapshot_frame", "sse_frame"]


def json_data(data: dict[str, Any]) -> str:
    """``data`` as one line of JSON that UTF-8 can carry (a lone surrogate from a model
    becomes U+FFFD instead of failing the stream)."""
    return well_formed(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def sse_frame(record: EventRecord) -> ServerSentEvent:
    if record.type in PRIVATE_RECORDS:
        return ServerSentEvent(data="{}", event="context", id=str(record.seq))
    return ServerSentEvent(data=json_data(record.data), event=record.type, id=str(record.seq))


def session_frame(
    *, session_id: str, run_id: str | None, attached: bool, after: int
) -> ServerSentEvent:
    """The first frame of a stream; its ``id`` is the position the stream resumes after."""
    data = {"session_id": session_id, "run_id": run_id, "attached": attached}
    return ServerSentEvent(data=json_data(data), event="session", id=str(after))


def snapshot_frame(data: dict[str, Any]) -> ServerSentEvent:
    """A reconnect's ``snapshot``: no ``id``, so it leaves the client's last id alone."""
    return ServerSentEvent(data=json_data(data), event="snapshot")
