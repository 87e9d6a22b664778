"""The workspace seams: ``WorkspaceSession``, ``WorkspaceLike`` and ``ShellExecutor``.

Importable for custom backends but not re-exported in ``lovia.workspace.__all__``.
``WorkspaceLike`` is core's ``lovia.workspace_seam.WorkspaceLike`` (declared once, there),
re-exported here; ``WorkspaceLike[WorkspaceSession]`` is what ``Workspace.local`` satisfies.
``WorkspaceSession`` is the full surface the built-in tools and custom tools use.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lovia.workspace_seam import WorkspaceLike

from .policy import Decision, WorkspacePolicy
from .results import (
    CommandResult,
    DirListing,
    EditResult,
    FileBytes,
    FileChange,
    FileContent,
    GrepResult,
    ProcessOutput,
    ProcessStart,
    ProcessStatus,
)

if TYPE_CHECKING:
    pass

__all__ = ["SandboxLauncher", "ShellExecutor", "WorkspaceLike", "WorkspaceSession"]


class ShellExecutor(Protocol):
    """Runs one foreground command after the policy and approval gates passed.

    It decides how a command runs (for example inside an OS sandbox derived from
    ``policy``), never whether. ``env`` is the already-built command environment.
    """

    async def run(
        self,
        command: str,
        *,
        cwd: str,
        env: Mapping[str, str],
        timeout: float | None,
        policy: WorkspacePolicy,
        root: Path,
    ) -> CommandResult: ...


@runtime_checkable
class SandboxLauncher(Protocol):
    """An executor that wraps a command into a sandboxed argv (``BubblewrapExecutor``).

    ``launch_argv`` returns the argv that runs ``command`` in the sandbox. The session runs
    that argv itself, foreground and background, in a fresh process group with the command
    environment, and owns its lifetime (timeouts, ``close()``). Without this, ``spawn``
    refuses to run under a custom executor rather than bypass its sandbox.
    """

    def launch_argv(
        self, command: str, *, cwd: str, policy: WorkspacePolicy, root: Path
    ) -> list[str]: ...


class WorkspaceSession(Protocol):
    """An open workspace: every file op and command passes its policy gate."""

    root: Path
    policy: WorkspacePolicy

    @property
    def closed(self) -> bool: ...

    def decide_path(self, path: str, *, write: bool = False) -> Decision: ...

    def decide_command(self, command: str, cwd: str = ".") -> Decision: ...

    async def read_text(
        self, path: str, start: int | None = None, end: int | None = None
    ) -> FileContent: ...

    async def read_bytes(self, path: str, max_bytes: int | None = None) -> FileBytes: ...

    async def write_text(
        self, path: str, content: str, create_only: bool = False
    ) -> FileChange: ...

    async def edit_text(
        self, path: str, old: str, new: str, replace_all: bool = False
    ) -> EditResult: ...

    async def list_files(
        self, path: str = ".", pattern: str | None = None, include_hidden: bool = False
    ) -> DirListing: ...

    async def grep(self, pattern: str, path: str = ".", glob: str | None = None) -> GrepResult: ...

    async def run(
        self,
        command: str,
        cwd: str = ".",
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult: ...

    async def spawn(
        self,
        command: str,
        cwd: str = ".",
        env: Mapping[str, str] | None = None,
        description: str | None = None,
    ) -> ProcessStart: ...

    async def read_process_output(self, process_id: str) -> ProcessOutput: ...

    async def kill_process(self, process_id: str) -> ProcessOutput: ...

    def background_processes(self) -> list[ProcessStatus]: ...

    async def close(self) -> None: ...
