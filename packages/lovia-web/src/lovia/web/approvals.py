"""``ApprovalRegistry``: gated tool calls waiting for a decision over HTTP, keyed by session.

The supervisor parks each ``ApprovalRequired`` here and holds the run's stream until the call
is decided (the core waits for its consumer while the consumer holds the event). A route
answers with ``decide(session_id, call_id, ...)``. Approval fails closed: nobody answering
within ``timeout`` seconds denies the call, and ``release`` (a cancel) denies everything a
session still has pending. A shutdown ``abandon``s them instead: undecided, so a resumed run
asks again.
"""

from __future__ import annotations

import asyncio
import math
from typing import Optional, Union

from lovia.events import ApprovalRequired
from lovia.exceptions import UserError

__all__ = ["ApprovalRegistry"]

_Decision = Union[tuple[bool, Optional[str]], None]
"""``(approved, reason)``, or ``None``: abandoned undecided (see ``abandon``)."""


class ApprovalRegistry:
    """Pending approvals by ``(session_id, call_id)``; see the module docstring."""

    def __init__(self, *, timeout: float | None = 300.0) -> None:
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise UserError(
                f"approval_timeout must be a positive number of seconds or None, got {timeout!r}",
                hint="None waits for an answer without limit",
            )
        self.timeout = timeout
        self._pending: dict[tuple[str, str], asyncio.Future[_Decision]] = {}

    def __repr__(self) -> str:
        return f"ApprovalRegistry(pending={len(self._pending)}, timeout={self.timeout})"

    async def wait(self, session_id: str, event: ApprovalRequired) -> bool:
        """Park ``event`` until a decision or the timeout, apply it to the event, return it.

        An abandoned wait returns ``False`` and leaves the event undecided.
        """
        key = (session_id, event.call.id)
        future: asyncio.Future[_Decision] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            decision = await asyncio.wait_for(future, self.timeout)
        except asyncio.TimeoutError:
            decision = (False, f"nobody answered within {self.timeout:g} s")
        finally:
            if self._pending.get(key) is future:
                del self._pending[key]
        if decision is None:
            return False
        approved, reason = decision
        if approved:
            event.approve()
        else:
            event.reject(reason)
        return approved

    def decide(
        self, session_id: str, call_id: str, approved: bool, *, reason: str | None = None
    ) -> bool:
        """Answer a pending call; ``False`` when nothing is pending under that id."""
        future = self._pending.pop((session_id, call_id), None)
        if future is None or future.done():
            return False
        future.set_result((approved, reason))
        return True

    def pending(self, session_id: str) -> list[str]:
        """The call ids ``session_id`` waits on, oldest first."""
        return [call_id for (sid, call_id) in self._pending if sid == session_id]

    def abandon(self, session_id: str) -> int:
        """Stop waiting on every call of ``session_id`` *without* deciding it.

        For a shutdown: the run's cancellation then records no result for the call, so the
        resumed run asks again instead of inheriting a denial.
        """
        abandoned = 0
        for call_id in self.pending(session_id):
            future = self._pending.pop((session_id, call_id))
            if not future.done():
                future.set_result(None)
                abandoned += 1
        return abandoned

    def release(self, session_id: str, *, reason: str = "released without a decision") -> int:
        """Deny every call ``session_id`` waits on; returns how many."""
        denied = 0
        for call_id in self.pending(session_id):
            denied += self.decide(session_id, call_id, False, reason=reason)
        return denied
