"""``GET /api/sessions/{id}/tasks``: a chat's task sessions (its subagents' children) with
the status of each one's latest run, for the UI's Tasks view.

A module of its own rather than a route in ``routes/sessions.py``: it only reads what the
store and the supervisor already keep (``ChatStore.task_sessions``, the run records)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel

from ..deps import State, WebState
from ..errors import NotFound
from ..models import SESSION_ID_PATTERN, error_responses
from ..store.base import ChatMeta

__all__ = ["TaskInfo", "TaskList", "TaskStatus", "list_tasks", "router"]

router = APIRouter(prefix="/api/sessions")

MAX_TASKS = 200
"""A chat lists at most this many task sessions (the oldest first)."""

TaskStatus = Literal["pending", "running", "done", "failed", "cancelled", "interrupted"]

# Run statuses as a person reads a task: "completed" is the task being done.
_STATUS: dict[str, TaskStatus] = {
    "running": "running",
    "completed": "done",
    "failed": "failed",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
}


class TaskInfo(BaseModel):
    id: str
    title: str
    agent: str
    status: TaskStatus
    """``running``; ``done``, ``failed`` or ``cancelled`` after its latest run;
    ``interrupted`` (a shutdown: it resumes when opened); ``pending`` before its first run
    is recorded."""
    error: str | None
    """The latest run's error, when it failed."""
    created_at: float
    updated_at: float


class TaskList(BaseModel):
    tasks: list[TaskInfo]
    """The chat's own task sessions (not their children's), oldest first."""


async def _status(state: WebState, meta: ChatMeta) -> tuple[TaskStatus, str | None]:
    if state.supervisor.live(meta.id) is not None:
        return "running", None
    runs = await state.store.list_runs(session_id=meta.id, limit=1)
    if not runs:
        return ("running" if meta.active_run_id else "pending"), None
    return _STATUS.get(runs[0].status, "failed"), runs[0].error


@router.get("/{session_id}/tasks", response_model=TaskList, responses=error_responses(404, 422))
async def list_tasks(state: State, session_id: str = Path(pattern=SESSION_ID_PATTERN)) -> TaskList:
    """The chat's task sessions with the status of each one's latest run."""
    if await state.store.get_session(session_id) is None:
        raise NotFound(f"unknown session {session_id!r}")
    tasks: list[TaskInfo] = []
    for task_id in await state.store.task_sessions(session_id):
        meta = await state.store.get_session(task_id)
        # task_sessions goes to any depth: a grandchild shows in its own parent's view
        if meta is None or meta.parent_id != session_id:
            continue
        status, error = await _status(state, meta)
        tasks.append(
            TaskInfo(
                id=meta.id,
                title=meta.title,
                agent=meta.agent,
                status=status,
                error=error,
                created_at=meta.created_at,
                updated_at=meta.updated_at,
            )
        )
        if len(tasks) == MAX_TASKS:
            break
    return TaskList(tasks=tasks)
