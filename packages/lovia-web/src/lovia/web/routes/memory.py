"""``/api/memory``: read and replace an agent's long-term notes, and dream on demand.

Present for every app, answering 404 for an agent without a ``Memory`` plugin. The notes
are blocking file operations, so they run on worker threads.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from ..background import find_memory
from ..deps import State, WebState
from ..errors import NotFound
from ..models import error_responses

if TYPE_CHECKING:
    from lovia.plugins.memory import Memory

__all__ = [
    "DreamResult",
    "MemoryNotes",
    "MemoryUpdate",
    "dream",
    "get_memory",
    "put_memory",
    "router",
]

router = APIRouter(prefix="/api/memory")

_ERRORS = error_responses(404, 422)
_MAX_BODY_CHARS = 1_000_000


class MemoryNotes(BaseModel):
    content: str
    """The notes as ``MEMORY.md`` text (normalised)."""
    used: int
    """Characters the notes take in the system prompt."""
    budget: int
    """The ``notes_budget`` a dream consolidates down to."""


class MemoryUpdate(BaseModel):
    """``PUT /api/memory``: the new notes, as ``MEMORY.md`` text (one ``- fact`` a line)."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(max_length=_MAX_BODY_CHARS)


class DreamResult(BaseModel):
    before: int
    """Notes before the dream."""
    after: int
    """Notes after it."""


def _memory(state: WebState, agent: str | None) -> tuple[Any, Memory]:
    name = agent if agent is not None else state.supervisor.default_agent
    if name is None or name not in state.agents:
        raise NotFound(
            f"unknown agent {name!r}" if name else "this server has several agents",
            hint=f"pass ?agent= one of: {', '.join(sorted(state.agents))}",
        )
    memory = find_memory(state.agents[name])
    if memory is None:
        raise NotFound(f"agent {name!r} has no memory", hint="give the agent a Memory plugin")
    return state.agents[name], memory


def _notes(memory: Memory, content: str) -> MemoryNotes:
    return MemoryNotes(content=content, used=len(content), budget=memory.notes_budget)


_AGENT = Query(default=None, max_length=200)


@router.get("", response_model=MemoryNotes, responses=_ERRORS)
async def get_memory(state: State, agent: str | None = _AGENT) -> MemoryNotes:
    _, memory = _memory(state, agent)
    return _notes(memory, await asyncio.to_thread(memory.notes_body))


@router.put("", response_model=MemoryNotes, responses=_ERRORS)
async def put_memory(body: MemoryUpdate, state: State, agent: str | None = _AGENT) -> MemoryNotes:
    """Replace the notes; the answer is the body as stored (parsed and normalised)."""
    _, memory = _memory(state, agent)
    return _notes(memory, await asyncio.to_thread(memory.replace_notes, body.content))


@router.post("/dream", response_model=DreamResult, responses=_ERRORS)
async def dream(state: State, agent: str | None = _AGENT) -> DreamResult:
    """Consolidate the notes now, with the memory's model or else the agent's."""
    served, memory = _memory(state, agent)
    before, after = await memory.dream(model=memory.model or served.model)
    return DreamResult(before=before, after=after)
