"""Helpers for the workspace tests: a RunContext around a session, /proc process lookup."""

from __future__ import annotations

import os
from typing import Any

from lovia.cancellation import CancelToken
from lovia.run_context import RunContext
from lovia.steering import Mailbox
from lovia.workspace import LocalWorkspaceSession


def make_ctx(session: LocalWorkspaceSession | None) -> RunContext[None]:
    """A RunContext as the run loop builds it, with ``session`` as ``ctx.workspace``."""
    agent: Any = None  # the workspace tools never look at the agent
    return RunContext(
        deps=None, agent=agent, cancel_token=CancelToken(), mailbox=Mailbox(), workspace=session
    )


RUN = f"{os.getpid():07d}"
"""This test process's own marker suffix (``sleep 1001.{RUN}``): two test runs at once on
one machine never see, or wait on, each other's processes."""


def processes_with(marker: str, *, exact: bool = False) -> list[int]:
    """Live (non-zombie) pids whose command line contains (or, ``exact``, is) ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{name}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        hit = cmdline.strip() == marker if exact else marker in cmdline
        if hit and state != "Z" and int(name) != os.getpid():
            found.append(int(name))
    return found


async def until_running(marker: str) -> None:
    """Poll (bounded; a process start has no event visible from here) until ``marker`` runs.

    ``marker`` is a whole command line (``sleep 1001.{RUN}``), so the shell whose script
    merely mentions it does not count.
    """
    import asyncio

    for _ in range(500):
        if processes_with(marker, exact=True):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{marker!r} never started")


def wait_gone(marker: str, attempts: int = 200) -> list[int]:
    """Poll (bounded; SIGKILL delivery has no event to wait on) until no process matches."""
    import time

    for _ in range(attempts):
        left = processes_with(marker)
        if not left:
            return []
        time.sleep(0.01)
    return processes_with(marker)
