"""Workspace errors: every one is a ``ToolError``, so the model sees it and adapts.

The tree::

    ToolError
    └── WorkspaceError              a workspace operation failed (bad path, bad range, ...)
        ├── PermissionDeniedError   the policy denies the path or command
        ├── WorkspaceClosedError    the session was used after close()
        └── FileTooLargeError       a file is over a byte cap for the operation
"""

from __future__ import annotations

from lovia.exceptions import ToolError

__all__ = [
    "FileTooLargeError",
    "PermissionDeniedError",
    "WorkspaceClosedError",
    "WorkspaceError",
]


class WorkspaceError(ToolError):
    """A workspace operation failed; the message names the path or command."""


class PermissionDeniedError(WorkspaceError):
    """The workspace policy denies this path or command (enforced in the session)."""


class WorkspaceClosedError(WorkspaceError):
    """The workspace session was used after ``close()``."""


class FileTooLargeError(WorkspaceError):
    """A file exceeds the byte cap of the operation (see ``WorkspaceLimits``)."""
