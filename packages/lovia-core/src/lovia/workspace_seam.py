"""What core knows of a workspace: the structural ``WorkspaceLike`` protocol.

The implementation lives in lovia-workspace (``lovia.workspace``); core never imports it.
The run loop opens one workspace session per run (``await ws.open()``), exposes it as
``ctx.workspace``, merges ``ws.tools()`` into the tool set, appends ``ws.instructions()``
to the system prompt, runs ``ws.view_injectors()`` per call, and closes the session at run
end when ``ws.close_after_run`` is true (a caller-owned, bound session stays open).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from .plugin import ViewInjector
    from .tools.base import Tool

__all__ = ["WorkspaceLike", "WorkspaceSessionLike"]


class WorkspaceSessionLike(Protocol):
    """An open workspace session: core only needs to close it."""

    async def close(self) -> None: ...


S_co = TypeVar("S_co", bound=WorkspaceSessionLike, covariant=True)


class WorkspaceLike(Protocol[S_co]):
    """A workspace an ``Agent`` can carry (``Agent(workspace=...)``).

    Generic in the session ``open()`` returns: core needs only ``close()``
    (``WorkspaceLike[Any]``); lovia-workspace's sessions are ``WorkspaceLike[WorkspaceSession]``.
    This is the one declaration; ``lovia.workspace.protocol`` re-exports it.
    """

    close_after_run: bool

    async def open(self) -> S_co: ...

    def tools(self) -> Sequence[Tool]: ...

    def instructions(self) -> str: ...

    def view_injectors(self) -> Sequence[ViewInjector]: ...
