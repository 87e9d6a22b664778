"""lovia.workspace: files and shell under one allow / ask / deny policy.

``Workspace.local(...)`` builds a ``LocalWorkspace`` for ``Agent(workspace=...)``; its
sessions (``LocalWorkspaceSession``) are the single enforcement point of the policy.
``BubblewrapExecutor`` runs commands in an OS sandbox derived from the same policy.
The protocols (``WorkspaceSession``, ``WorkspaceLike``, ``ShellExecutor``) live in
``lovia.workspace.protocol``.
"""

from __future__ import annotations

from .errors import FileTooLargeError, PermissionDeniedError, WorkspaceClosedError, WorkspaceError
from .local import DecisionObserver, LocalWorkspaceSession
from .policy import (
    CommandRule,
    Decision,
    FileOp,
    PathRule,
    PermissionDecision,
    Ruling,
    WorkspaceMode,
    WorkspacePolicy,
)
from .results import (
    CommandResult,
    DirEntry,
    DirListing,
    EditResult,
    FileBytes,
    FileChange,
    FileContent,
    GrepMatch,
    GrepResult,
    ProcessOutput,
    ProcessStart,
    ProcessStatus,
    WorkspaceLimits,
)
from .sandbox import BubblewrapExecutor
from .tools import background_process_reminder, workspace_tools
from .workspace import LocalWorkspace, Workspace, WorkspaceSessionBinding

__all__ = [
    "BubblewrapExecutor",
    "CommandResult",
    "CommandRule",
    "Decision",
    "DecisionObserver",
    "DirEntry",
    "DirListing",
    "EditResult",
    "FileBytes",
    "FileChange",
    "FileContent",
    "FileOp",
    "FileTooLargeError",
    "GrepMatch",
    "GrepResult",
    "LocalWorkspace",
    "LocalWorkspaceSession",
    "PathRule",
    "PermissionDecision",
    "PermissionDeniedError",
    "ProcessOutput",
    "ProcessStart",
    "ProcessStatus",
    "Ruling",
    "Workspace",
    "WorkspaceClosedError",
    "WorkspaceError",
    "WorkspaceLimits",
    "WorkspaceMode",
    "WorkspacePolicy",
    "WorkspaceSessionBinding",
    "background_process_reminder",
    "workspace_tools",
]
