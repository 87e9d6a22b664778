"""``ApprovalChannel``: decide gated tool calls out of band, by call id.

When a gated call waits for a decision, the run loop ``register``s it and awaits the
returned future alongside the other routes (the ``ApprovalRequired`` event, the agent's
``approval_handler``). A UI that holds no event object answers through the channel
(``handle.approvals.approve(call_id)``). The optional ``scope`` lets one channel serve many
runs or sessions at once (the web layer keys it by session).

Invariants:

* A decision resolves exactly one pending registration, once; answering an id that is not
  pending (never registered, already decided or discarded) returns ``False``.
* A decision made before the loop awaits the future is kept by the future.
* The channel never decides by itself: the loop owns the fail-closed default (deny when
  nobody answers), and ``release()`` lets a host deny everything still pending, for example
  when its client disconnects.

A channel holds no asyncio object until ``register`` runs inside a loop, so it can be built
anywhere. A decision may come from another thread: it is handed to the future's loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .messages import ToolCall

__all__ = ["ApprovalChannel", "PendingApproval"]

_Decision = tuple[bool, "str | None"]  # (approved, reason): what a pending future resolves to

_RELEASED = "released without a decision"
_SUPERSEDED = "superseded by a newer request for the same call"


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """One call waiting for a decision on the channel."""

    call_id: str
    """The id of the gated call (``ToolCall.id``)."""
    scope: str | None = None
    """The scope it was registered under (``None``: unscoped)."""
    call: ToolCall | None = None
    """The gated call, when the loop supplied it."""


class ApprovalChannel:
    """Out-of-band approvals for gated tool calls (``RunHandle.approvals``)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: dict[
            tuple[str | None, str], tuple[PendingApproval, asyncio.Future[_Decision]]
        ] = {}

    def __repr__(self) -> str:
        return f"ApprovalChannel(pending={len(self._pending)})"

    # -- the loop's side -------------------------------------------------------------------

    def register(
        self, call_id: str, *, scope: str | None = None, call: ToolCall | None = None
    ) -> asyncio.Future[_Decision]:
        """Mark ``call_id`` pending and return the future its decision resolves.

        Must run inside the event loop that awaits the future. If the same id is already
        pending in ``scope`` (a cancelled run left it behind and its resume asks again), the
        older registration is denied as superseded, so its waiter, if any, cannot hang.
        """
        key = (scope, call_id)
        stale = self._pending.pop(key, None)
        if stale is not None:
            _settle(stale[1], (False, _SUPERSEDED))
        future: asyncio.Future[_Decision] = asyncio.get_running_loop().create_future()
        self._pending[key] = (PendingApproval(call_id, scope, call), future)
        return future

    def discard(self, call_id: str, *, scope: str | None = None) -> None:
        """Stop tracking ``call_id`` (decided through another route, or abandoned).

        The future is left unresolved; later answers for the id return ``False``. No-op if
        nothing is pending.
        """
        self._pending.pop((scope, call_id), None)

    # -- the deciding side -----------------------------------------------------------------

    def approve(self, call_id: str, *, scope: str | None = None) -> bool:
        """Allow the pending call; ``False`` if nothing is pending under that id and scope."""
        return self.resolve(call_id, True, scope=scope)

    def reject(self, call_id: str, *, scope: str | None = None, reason: str | None = None) -> bool:
        """Deny the pending call with an optional ``reason`` the model will see."""
        return self.resolve(call_id, False, scope=scope, reason=reason)

    def resolve(
        self,
        call_id: str,
        decision: bool,
        *,
        scope: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """Decide the pending call; ``False`` if nothing is pending under that id and scope."""
        entry = self._pending.pop((scope, call_id), None)
        if entry is None:
            return False
        return _settle(entry[1], (bool(decision), reason))

    def release(self, *, scope: str | None = None, decision: bool = False) -> int:
        """Decide every pending call (in ``scope``, or all when ``scope`` is ``None``).

        Denies by default. Returns how many calls it decided.
        """
        keys = [key for key in self._pending if scope is None or key[0] == scope]
        reason = None if decision else _RELEASED
        decided = 0
        for key in keys:
            entry = self._pending.pop(key, None)
            if entry is not None and _settle(entry[1], (decision, reason)):
                decided += 1
        return decided

    def is_pending(self, call_id: str, *, scope: str | None = None) -> bool:
        """Whether ``call_id`` waits for a decision in ``scope``."""
        entry = self._pending.get((scope, call_id))
        return entry is not None and not entry[1].done()

    def pending(self, *, scope: str | None = None) -> list[PendingApproval]:
        """The calls waiting for a decision (in ``scope``, or all), oldest first."""
        return [
            info
            for (key_scope, _), (info, future) in self._pending.items()
            if (scope is None or key_scope == scope) and not future.done()
        ]


def _settle(future: asyncio.Future[_Decision], decision: _Decision) -> bool:
    """Resolve ``future`` on its own loop; ``False`` if it was already done."""
    if future.done():
        return False
    loop = future.get_loop()
    if loop.is_closed():  # the run that waited is gone: nobody can receive the decision
        return False
    try:
        same_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        same_loop = False
    if same_loop:
        _apply(future, decision)
    else:
        loop.call_soon_threadsafe(_apply, future, decision)
    return True


def _apply(future: asyncio.Future[_Decision], decision: _Decision) -> None:
    if not future.done():  # the waiter may have gone away (cancelled) meanwhile
        future.set_result(decision)
