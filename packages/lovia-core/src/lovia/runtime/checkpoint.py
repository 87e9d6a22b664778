"""``CheckpointWriter``: how a checkpointed run persists itself while it runs.

The run loop calls the writer at fixed points (the durability cadence):

* ``save_running`` after each model output and each tool result (and after a mailbox
  drain, so an injected message is stored before the model call): the run's own entries
  appended since the previous save, plus a fresh ``RunHead`` (status ``running``). A store
  failure here propagates: it aborts the tool batch, which cancels the in-flight siblings,
  and ends the run; a resume re-executes the calls left without results.
* ``finalise`` once on success, **before** the session append: status ``completed`` and
  the output as JSON. A crash between the two leaves a completed checkpoint whose replay
  re-applies the idempotent session append; the reverse order could leave a run both in
  the session and resumable, and a resume would then count it twice.
* ``save_failure`` once when the run fails: ``interrupted`` (resumable) for a retryable
  provider error, a budget trip, a cancellation or a store failure; ``failed`` with an
  error payload otherwise. A store failure here is logged and swallowed: the run already
  has its outcome, and the last good save stays resumable.

``record_in_session`` is the success path's second half, shared by the loop and the replay:
the session append (one segment, ``segment_meta``), then ``after_session``.

The writer keeps a cursor (how many of the run's own entries are stored), so each save
costs O(new entries). The cursor only moves after a successful append.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..checkpointer import RunHead, RunStatus
from ..exceptions import (
    BudgetExceeded,
    LoviaError,
    ProviderError,
    RunCancelled,
    StoreError,
    UserError,
)
from ..transcript import to_json_safe

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..checkpointer import Checkpointer
    from ..session import Session
    from ..transcript import TranscriptEntry
    from .run_state import RunState

__all__ = [
    "CheckpointWriter",
    "classify_failure",
    "record_in_session",
    "segment_meta",
]

_log = logging.getLogger("lovia.runtime")


def classify_failure(error: BaseException) -> tuple[RunStatus, dict[str, Any]]:
    """The checkpoint status a run ending with ``error`` gets, and its JSON error payload.

    Resumable (``interrupted``): a retryable ``ProviderError``, ``BudgetExceeded``,
    ``RunCancelled`` and ``StoreError`` (the store may be back later; the last good save is
    intact). Everything else is final (``failed``).
    """
    resumable = isinstance(error, (BudgetExceeded, RunCancelled, StoreError)) or (
        isinstance(error, ProviderError) and error.retryable
    )
    payload: dict[str, Any] = {"type": type(error).__name__}
    if isinstance(error, LoviaError):
        payload["message"] = error.message
        if error.hint:
            payload["hint"] = error.hint
    else:
        payload["message"] = str(error)
    return ("interrupted" if resumable else "failed"), payload


class CheckpointWriter:
    """Saves one run to its ``Checkpointer`` (see the module docstring).

    ``saved`` is how many of the run's own entries the store already holds (non-zero when
    resuming from it). ``delete_on_success`` makes ``after_session`` delete the checkpoint.
    """

    __slots__ = ("checkpointer", "completed", "delete_on_success", "run_id", "saved")

    def __init__(
        self,
        checkpointer: Checkpointer,
        run_id: str,
        *,
        saved: int = 0,
        delete_on_success: bool = False,
    ) -> None:
        self.checkpointer = checkpointer
        self.run_id = run_id
        self.saved = saved
        self.delete_on_success = delete_on_success
        self.completed = False
        """Set once ``finalise`` stored the completed head; later failures keep it."""

    async def save_running(self, state: RunState) -> None:
        """Store the entries since the last save and a ``running`` head."""
        await self._append(state, _head(state, "running"))

    async def finalise(self, state: RunState, output: Any) -> None:
        """Store the remaining entries and the ``completed`` head with ``output`` as JSON.

        Raises ``UserError`` when ``output`` is not JSON-safe (a replay could not rebuild it).
        """
        try:
            data = to_json_safe(output)
        except TypeError as exc:
            raise UserError(
                f"the run's output ({type(output).__name__}) cannot be checkpointed: {exc}",
                hint="use an output_type made of JSON types, dataclasses or pydantic models, "
                "or run without checkpoint=",
            ) from exc
        await self._append(state, _head(state, "completed", output=data))
        self.completed = True

    async def save_failure(self, state: RunState | None, error: BaseException) -> None:
        """Store the run's end as ``interrupted`` or ``failed``; never raises.

        Nothing is stored when the run failed before it started (``state`` is ``None``: a
        stored snapshot then stays as it was) or after it was finalised.
        """
        if state is None or self.completed:
            return
        status, payload = classify_failure(error)
        try:
            await self._append(state, _head(state, status, error=payload))
        except Exception:  # noqa: BLE001 - fail-open: the run already has its outcome
            _log.warning(
                "checkpoint.save_failed: run_id=%s status=%s", self.run_id, status, exc_info=True
            )

    async def after_session(self) -> None:
        """After the session append: delete the checkpoint when ``delete_on_success``."""
        if self.delete_on_success:
            await self.checkpointer.delete(self.run_id)

    async def _append(self, state: RunState, head: RunHead) -> None:
        transcript = state.transcript
        start = state.run_start + self.saved
        new = transcript[start:]
        await self.checkpointer.append(self.run_id, new, head)
        self.saved += len(new)


def _head(
    state: RunState,
    status: RunStatus,
    *,
    output: Any = None,
    error: dict[str, Any] | None = None,
) -> RunHead:
    return RunHead(
        agent_name=state.active.agent.name,
        usage=state.usage,
        turns=state.turn,
        status=status,
        output=output,
        error=error,
        last_input_tokens=state.last_input_tokens,
        context_state=state.context_scratch,
        notices=list(state.notices),  # a copy: the run keeps appending to its own list
    )


def segment_meta(
    context_state: dict[str, Any],
    notices: Sequence[dict[str, Any]],
    last_input_tokens: int | None = None,
) -> dict[str, Any]:
    """A run's session-segment ``meta``: the policy state, the last prompt's size as the
    provider counted it (the next run's first calibration sample), and compaction notices."""
    meta: dict[str, Any] = {"context": context_state}
    if last_input_tokens is not None:
        meta["last_input_tokens"] = last_input_tokens
    if notices:
        meta["notices"] = list(notices)
    return meta


async def record_in_session(
    session: Session | None,
    session_id: str | None,
    entries: Sequence[TranscriptEntry],
    *,
    run_id: str,
    meta: dict[str, Any],
    writer: CheckpointWriter | None,
) -> None:
    """Append a completed run to its session (when it has one), then ``after_session``."""
    if session is not None:
        assert session_id is not None
        await session.append(session_id, list(entries), run_id=run_id, meta=meta)
    if writer is not None:
        await writer.after_session()
