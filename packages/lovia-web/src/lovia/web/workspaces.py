"""``WorkspaceRegistry``: one bound workspace session per chat.

By default the run loop opens a workspace session per run and closes it at the run's end,
which kills every background process the run started. A chat is longer than a run, so the
server binds one caller-owned session per chat (``LocalWorkspace.bind``) and runs the chat's
agent as a clone carrying that binding (``agent_for``): a dev server started in one turn is
still up when the next message arrives.

The registry closes a chat's session (killing its process groups) when the chat is deleted
(``release``), on delete-all (``release_all``) and at server shutdown (``aclose``).
Processes are never restored after a restart. An agent whose workspace object changed
since the chat's session was bound (a reconfiguration) gets a fresh session, the old one is
closed. Agents without a workspace, or with a workspace that is not a ``LocalWorkspace``
(a custom backend, an already bound one), pass through unchanged.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lovia.workspace import (
    LocalWorkspace,
    LocalWorkspaceSession,
    WorkspaceClosedError,
    WorkspaceSessionBinding,
)

from .errors import NotFound

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.workspace import ProcessStatus

__all__ = [
    "WorkspaceRegistry",
]


class WorkspaceRegistry:
    """Chat id → the chat's bound ``LocalWorkspaceSession``; see the module docstring."""

    def __init__(self) -> None:
        self._bound: dict[str, WorkspaceSessionBinding] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"WorkspaceRegistry(bound={len(self._bound)})"

    def __len__(self) -> int:
        return len(self._bound)

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    async def agent_for(self, session_id: str, agent: Agent[Any]) -> Agent[Any]:
        """The agent to run for chat ``session_id``: a clone bound to the chat's workspace
        session (opened on first use), or ``agent`` itself when it has no local workspace
        or the registry is closed."""
        workspace = agent.workspace
        if not isinstance(workspace, LocalWorkspace) or self._closed:
            return agent
        binding = await self.bind(session_id, workspace)
        return agent.clone(workspace=binding)

    async def bind(self, session_id: str, workspace: LocalWorkspace) -> WorkspaceSessionBinding:
        """The chat's binding to ``workspace``; a binding to another workspace object, or a
        closed one, is replaced (the old session is closed)."""
        async with self._lock(session_id):
            current = self._bound.get(session_id)
            if current is not None:
                if current.workspace is workspace and not current.session.closed:
                    return current
                del self._bound[session_id]
                await current.session.close()
            binding = workspace.bind(await workspace.open())
            if self._closed:  # shut down while opening: nothing may outlive aclose
                await binding.session.close()
                return binding
            self._bound[session_id] = binding
            return binding

    def session(self, session_id: str) -> LocalWorkspaceSession | None:
        """The chat's open session, if one is bound."""
        binding = self._bound.get(session_id)
        if binding is None or binding.session.closed:
            return None
        return binding.session

    def processes(self, session_id: str) -> list[ProcessStatus]:
        """The chat's background processes (running and ended); ``[]`` without a session."""
        session = self.session(session_id)
        return [] if session is None else session.background_processes()

    async def kill(self, session_id: str, process_id: str) -> list[ProcessStatus]:
        """Kill one of the chat's background processes (its whole group); returns the
        refreshed list. Raises ``NotFound`` for an unknown process id."""
        session = self.session(session_id)
        known = [] if session is None else session.background_processes()
        if session is None or not any(p.process_id == process_id for p in known):
            raise NotFound(
                f"chat {session_id!r} has no background process {process_id!r}",
                hint="list them with GET /api/sessions/{id}/processes",
            )
        try:
            await session.kill_process(process_id)
        except WorkspaceClosedError:  # the chat was deleted meanwhile: its processes died
            raise NotFound(
                f"chat {session_id!r} has no background process {process_id!r}"
            ) from None
        return self.processes(session_id)  # ``[]`` when the chat was deleted during the kill

    async def release(self, session_id: str) -> None:
        """Close the chat's session (its processes die); a no-op without one."""
        async with self._lock(session_id):
            binding = self._bound.pop(session_id, None)
            if binding is not None:
                await binding.session.close()
        self._locks.pop(session_id, None)

    async def release_all(self) -> None:
        """Close every chat's session (delete-all)."""
        await asyncio.gather(*(self.release(sid) for sid in list(self._bound)))

    async def aclose(self) -> None:
        """Close every session and refuse new bindings (server shutdown)."""
        self._closed = True
        await self.release_all()
