"""``/api/schedules``: list, create, read, change (pause/resume), delete, run now, past runs."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from ..background import Services
from ..deps import State, WebState
from ..errors import NotFound
from ..models import SESSION_ID_PATTERN, error_responses
from ..scheduling import Schedule, SchedulePatch, ScheduleSpec
from ..store.base import RunRecord

__all__ = [
    "ScheduleCreate",
    "ScheduleFire",
    "ScheduleInfo",
    "ScheduleList",
    "ScheduleRunInfo",
    "ScheduleRuns",
    "create_schedule",
    "delete_schedule",
    "get_schedule",
    "list_schedules",
    "patch_schedule",
    "router",
    "run_schedule",
    "schedule_runs",
]

router = APIRouter(prefix="/api/schedules")

_ERRORS = error_responses(404, 409, 422, 429)
_ID = r"^[A-Za-z0-9_-]{1,64}$"


class ScheduleCreate(ScheduleSpec):
    """``POST /api/schedules``: a ``ScheduleSpec`` plus who runs it and where."""

    agent: str | None = Field(default=None, max_length=200)
    """The agent (the server's only agent by default)."""
    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN)
    """With ``continue_session``: the chat every fire goes to (the first fire creates one
    when omitted)."""


class ScheduleInfo(BaseModel):
    id: str
    agent: str
    session_id: str | None
    instruction: str
    trigger_kind: Literal["at", "every", "cron"]
    trigger_expr: str
    continue_session: bool
    until: str | None
    max_fires: int | None
    expires_at: float | None
    status: Literal["active", "paused", "finished"]
    active: bool
    next_fire_at: float | None
    finished_reason: str | None
    fires: int
    skipped: int
    failures: int
    last_fire_at: float | None
    last_run_id: str | None
    last_session_id: str | None
    last_error: str | None
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, s: Schedule) -> ScheduleInfo:
        return cls(
            id=s.id,
            agent=s.agent,
            session_id=s.session_id,
            **s.spec.model_dump(),
            status=s.status,
            active=s.active,
            next_fire_at=s.next_fire_at,
            finished_reason=s.finished_reason,
            fires=s.fires,
            skipped=s.skipped,
            failures=s.failures,
            last_fire_at=s.last_fire_at,
            last_run_id=s.last_run_id,
            last_session_id=s.last_session_id,
            last_error=s.last_error,
            created_at=s.created_at,
            updated_at=s.updated_at,
        )


class ScheduleList(BaseModel):
    schedules: list[ScheduleInfo]


class ScheduleFire(BaseModel):
    """``POST /api/schedules/{id}/run``: the run the fire started (or joined)."""

    schedule_id: str
    run_id: str
    session_id: str
    attached: bool


class ScheduleRunInfo(BaseModel):
    run_id: str
    session_id: str
    fired_at: float
    attached: bool
    status: str | None
    """The run record's status, once the store has it (``None`` before)."""
    started_at: float | None
    ended_at: float | None
    error: str | None


class ScheduleRuns(BaseModel):
    runs: list[ScheduleRunInfo]
    """Newest first."""


def _agent(state: WebState, name: str | None) -> str:
    chosen = name if name is not None else state.supervisor.default_agent
    if chosen is None or chosen not in state.agents:
        raise NotFound(
            f"unknown agent {chosen!r}" if chosen else "this server has several agents",
            hint=f"pass one of: {', '.join(sorted(state.agents))}",
        )
    return chosen


@router.get("", response_model=ScheduleList, responses=_ERRORS)
async def list_schedules(
    state: State,
    services: Services,
    agent: str | None = Query(default=None, max_length=200),
    active: bool | None = None,
) -> ScheduleList:
    found = await services.scheduler.schedules.list(agent=agent, active=active)
    return ScheduleList(schedules=[ScheduleInfo.of(s) for s in found])


@router.post("", response_model=ScheduleInfo, status_code=201, responses=_ERRORS)
async def create_schedule(body: ScheduleCreate, state: State, services: Services) -> ScheduleInfo:
    agent = _agent(state, body.agent)
    if body.session_id is not None and await state.store.get_session(body.session_id) is None:
        raise NotFound(f"unknown session {body.session_id!r}")
    spec = ScheduleSpec.model_validate(body.model_dump(exclude={"agent", "session_id"}))
    schedule = await services.scheduler.schedules.create(
        spec, agent=agent, session_id=body.session_id
    )
    services.scheduler.wake()
    return ScheduleInfo.of(schedule)


@router.get("/{schedule_id}", response_model=ScheduleInfo, responses=_ERRORS)
async def get_schedule(services: Services, schedule_id: str) -> ScheduleInfo:
    return ScheduleInfo.of(await services.scheduler.schedules.get(schedule_id))


@router.patch("/{schedule_id}", response_model=ScheduleInfo, responses=_ERRORS)
async def patch_schedule(schedule_id: str, body: SchedulePatch, services: Services) -> ScheduleInfo:
    """Change fields; a new trigger or a resume (``active: true``) recomputes the next fire
    and a resume clears the finished reason; ``active: false`` pauses."""
    schedule = await services.scheduler.schedules.update(schedule_id, body)
    services.scheduler.wake()
    return ScheduleInfo.of(schedule)


@router.delete("/{schedule_id}", status_code=204, responses=_ERRORS)
async def delete_schedule(schedule_id: str, services: Services) -> Response:
    await services.scheduler.schedules.delete(schedule_id)
    return Response(status_code=204)


@router.post("/{schedule_id}/run", response_model=ScheduleFire, responses=_ERRORS)
async def run_schedule(schedule_id: str, services: Services) -> ScheduleFire:
    """Fire once now. A paused schedule stays paused; 409 while the previous fire runs."""
    fired = await services.scheduler.run_now(schedule_id)
    return ScheduleFire(
        schedule_id=fired.schedule_id,
        run_id=fired.run_id,
        session_id=fired.session_id,
        attached=fired.attached,
    )


@router.get("/{schedule_id}/runs", response_model=ScheduleRuns, responses=_ERRORS)
async def schedule_runs(schedule_id: str, state: State, services: Services) -> ScheduleRuns:
    """The schedule's recent fires, newest first, with their run records' outcome."""
    schedule = await services.scheduler.schedules.get(schedule_id)
    records: dict[str, RunRecord] = {}
    for session_id in {f.session_id for f in schedule.recent}:
        for record in await state.store.list_runs(session_id=session_id, limit=200):
            records[record.run_id] = record
    runs = []
    for fire in reversed(schedule.recent):
        found = records.get(fire.run_id)
        runs.append(
            ScheduleRunInfo(
                run_id=fire.run_id,
                session_id=fire.session_id,
                fired_at=fire.at,
                attached=fire.attached,
                status=found.status if found else None,
                started_at=found.started_at if found else None,
                ended_at=found.ended_at if found else None,
                error=found.error if found else None,
            )
        )
    return ScheduleRuns(runs=runs)
