"""``Workspace.local``: the factory, and ``LocalWorkspace``, the agent-facing config.

A ``LocalWorkspace`` is what ``Agent(workspace=...)`` carries. By default the run loop
opens one session per run and closes it at run end (``close_after_run``). A caller that
needs a session to outlive runs (a chat server keeping a dev server up) binds its own:
``ws.bind(session)`` or ``async with ws.session() as bound`` — the runner never closes a
bound session.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from lovia.exceptions import UserError

from ._instructions import Sandbox, workspace_instructions
from .errors import WorkspaceClosedError
from .local import LocalWorkspaceSession
from .policy import CommandRule, PathRule, WorkspaceMode, WorkspacePolicy, expand_grants
from .protocol import ShellExecutor
from .results import WorkspaceLimits
from .sandbox import BubblewrapExecutor
from .tools import background_process_reminder, workspace_tools

if TYPE_CHECKING:
    from lovia.plugin import ViewInjector
    from lovia.tools.base import Tool

__all__ = ["LocalWorkspace", "Workspace", "WorkspaceSessionBinding"]


class LocalWorkspace:
    """A local directory under a ``WorkspacePolicy``; build it with ``Workspace.local``."""

    close_after_run: bool = True
    """The runner closes sessions it opened from this workspace at run end."""

    def __init__(
        self,
        root: Path,
        *,
        policy: WorkspacePolicy,
        limits: WorkspaceLimits,
        env: Mapping[str, str] | None,
        inherit_env: bool,
        shell_timeout: float,
        executor: ShellExecutor | None,
    ) -> None:
        self.root = root
        self.policy = policy
        self.limits = limits
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.shell_timeout = shell_timeout
        self.executor = executor
        self._tools = workspace_tools(policy)

    async def open(self) -> LocalWorkspaceSession:
        """A new session (the caller closes it)."""
        return LocalWorkspaceSession(
            self.root, policy=self.policy, limits=self.limits, env=self.env,
            inherit_env=self.inherit_env, shell_timeout=self.shell_timeout,
            executor=self.executor,
        )  # fmt: skip

    def bind(self, session: LocalWorkspaceSession) -> WorkspaceSessionBinding:
        """This workspace bound to a caller-owned ``session`` (never closed by the runner)."""
        return WorkspaceSessionBinding(self, session)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[WorkspaceSessionBinding]:
        """Hold one session open across runs; it is closed when the block exits."""
        session = await self.open()
        try:
            yield self.bind(session)
        finally:
            await session.close()

    def tools(self) -> Sequence[Tool]:
        """The tool bundle adapted to the policy."""
        return self._tools

    def instructions(self) -> str:
        """The generated ``## Workspace`` system-prompt section."""
        sandbox: Sandbox = "none"
        if isinstance(self.executor, BubblewrapExecutor):
            sandbox = "network" if self.executor.allow_network else "offline"
        elif self.executor is not None:
            sandbox = "custom"
        return workspace_instructions(
            self.root, self.policy, sandbox=sandbox, shell_timeout=self.shell_timeout
        )

    def view_injectors(self) -> Sequence[ViewInjector]:
        """The per-turn background-process reminder."""
        return (background_process_reminder,) if self.policy.allow_shell else ()


class WorkspaceSessionBinding:
    """A ``LocalWorkspace`` bound to one caller-owned session (``close_after_run`` false)."""

    close_after_run: bool = False
    """A bound session belongs to its caller; the runner never closes it."""

    def __init__(self, workspace: LocalWorkspace, session: LocalWorkspaceSession) -> None:
        self.workspace = workspace
        self.session = session

    async def open(self) -> LocalWorkspaceSession:
        """The bound session; raises ``WorkspaceClosedError`` once it was closed."""
        if self.session.closed:
            raise WorkspaceClosedError(
                "the bound workspace session is closed", hint="bind a new session"
            )
        return self.session

    def tools(self) -> Sequence[Tool]:
        """The workspace's tool bundle."""
        return self.workspace.tools()

    def instructions(self) -> str:
        """The workspace's generated instructions."""
        return self.workspace.instructions()

    def view_injectors(self) -> Sequence[ViewInjector]:
        """The workspace's view injectors."""
        return self.workspace.view_injectors()


class Workspace:
    """Factories for workspaces (``Workspace.local``)."""

    @staticmethod
    def local(
        root: str | os.PathLike[str] = ".",
        *,
        mode: WorkspaceMode = "coding",
        policy: WorkspacePolicy | None = None,
        readable: Sequence[str] = (),
        writable: Sequence[str] = (),
        denied_paths: Sequence[str] = (),
        allow_secrets: Sequence[str] = (),
        path_rules: Sequence[PathRule] = (),
        command_rules: Sequence[CommandRule] = (),
        env: Mapping[str, str] | None = None,
        shell_timeout: float = 300.0,
        inherit_env: bool = False,
        limits: WorkspaceLimits | None = None,
        executor: ShellExecutor | None = None,
    ) -> LocalWorkspace:
        """A workspace on the local directory ``root`` under a policy.

        ``mode`` picks a preset; ``readable``/``writable`` grant extra paths (as allow
        rules), ``denied_paths`` block paths outright, ``path_rules``/``command_rules``
        refine it; or pass a whole ``policy`` (then none of those). Secret files
        (``.env``, keys, credentials: ``DEFAULT_SECRET_PATHS``) are denied in every mode;
        ``allow_secrets`` lists the ones the agent may use (a grant naming one raises).
        ``env`` adds variables to the minimal command environment; ``inherit_env=True``
        passes the full one.
        ``executor`` runs commands (e.g. ``BubblewrapExecutor()``). Raises ``UserError`` for
        an unknown mode, a missing root, ``policy`` mixed with shorthand knobs, or write or
        command knobs on a read-only workspace.
        """
        resolved = Path(os.path.expanduser(os.fspath(root))).resolve()
        if not resolved.is_dir():
            raise UserError(
                f"workspace root {os.fspath(root)!r} is not an existing directory",
                hint="create it first or pass the right path",
            )
        knobs = readable or writable or denied_paths or allow_secrets or path_rules or command_rules
        if policy is not None and knobs:
            raise UserError(
                "policy= cannot be combined with readable/writable/denied_paths/"
                "allow_secrets/path_rules/command_rules",
                hint="put those into the WorkspacePolicy you pass",
            )
        if policy is None:
            if mode == "readonly" and (command_rules or writable):
                raise UserError(
                    "a readonly workspace takes no command_rules or writable grants",
                    hint="use mode='coding' or 'trusted' for a shell or writes",
                )
            policy = WorkspacePolicy.for_mode(
                mode,
                path_rules=tuple(path_rules) + expand_grants(readable, writable),
                denied_paths=tuple(denied_paths),
                allow_secrets=tuple(allow_secrets),
                command_rules=tuple(command_rules),
            )
        return LocalWorkspace(
            resolved, policy=policy, limits=limits or WorkspaceLimits(), env=env,
            inherit_env=inherit_env, shell_timeout=shell_timeout, executor=executor,
        )  # fmt: skip
