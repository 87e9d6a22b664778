"""``/api/runs``: the live runs, and the history of run records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Query
from pydantic import BaseModel

from ..deps import State
from ..models import SESSION_ID_PATTERN, error_responses
from ..store.base import RunSource

if TYPE_CHECKING:
    from ..store.base import RunRecord

__all__ = ["LiveRunList", "RunHistory", "RunInfo", "history", "live_runs", "router"]

router = APIRouter(prefix="/api/runs")

_MAX_OFFSET = 1_000_000_000


class RunInfo(BaseModel):
    """One run record; ``duration`` (seconds) is ``None`` while it runs."""

    run_id: str
    session_id: str
    agent: str
    source: str
    """``chat``, ``schedule``, ``subagent`` or ``resume``."""
    status: str
    """``running``, ``completed``, ``failed``, ``cancelled`` or ``interrupted``."""
    started_at: float | None
    ended_at: float | None = None
    duration: float | None = None
    error: str | None = None
    usage: dict[str, object] | None = None

    @classmethod
    def of(cls, record: RunRecord) -> RunInfo:
        ended = record.ended_at
        return cls(
            run_id=record.run_id,
            session_id=record.session_id,
            agent=record.agent,
            source=record.source,
            status=record.status,
            started_at=record.started_at,
            ended_at=ended,
            duration=None if ended is None else max(0.0, ended - record.started_at),
            error=record.error,
            usage=record.usage,
        )


class LiveRunList(BaseModel):
    runs: list[RunInfo]


class RunHistory(BaseModel):
    runs: list[RunInfo]
    limit: int
    offset: int


@router.get("", response_model=LiveRunList)
async def live_runs(state: State) -> LiveRunList:
    """The runs executing in this server now, oldest first."""
    out = []
    for live in state.supervisor.live_runs():
        record = state.lifecycle.record(live.run_id) if state.lifecycle is not None else None
        if record is not None:
            out.append(RunInfo.of(record))
        else:  # reserved, not yet recorded
            out.append(
                RunInfo(
                    run_id=live.run_id,
                    session_id=live.session_id,
                    agent=live.agent,
                    source="resume" if live.resumed else "chat",
                    status="running",
                    started_at=None,
                )
            )
    out.sort(key=lambda r: r.started_at or 0.0)
    return LiveRunList(runs=out)


@router.get("/history", response_model=RunHistory, responses=error_responses(422))
async def history(
    state: State,
    session_id: str | None = Query(default=None, pattern=SESSION_ID_PATTERN),
    source: RunSource | None = None,
    since: float | None = Query(default=None, ge=0, le=1e11),
    limit: int = Query(default=50, ge=1, le=500),
    offset: int = Query(default=0, ge=0, le=_MAX_OFFSET),
) -> RunHistory:
    """Run records, newest first; ``since`` keeps runs started at or after it (Unix s)."""
    records = await state.store.list_runs(
        session_id=session_id, source=source, since=since, limit=limit, offset=offset
    )
    return RunHistory(runs=[RunInfo.of(r) for r in records], limit=limit, offset=offset)
