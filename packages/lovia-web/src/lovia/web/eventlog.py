"""The durable per-run event log's record type, and how core events become records.

A record is the JSON-safe form of one lovia event, in the wire vocabulary of
``docs/web.md`` (``text_delta``, ``tool_call``, ..., ``done``). The supervisor numbers a run's
records with a monotonic ``seq`` (1, 2, ...), appends each to the ``ChatStore`` *before*
publishing it to the ``EventHub``: that order is what lets a reconnecting client read the log
and then follow the hub with no gap and no duplicate.

``RunLog`` is one run's writer. The run's task hands it records without waiting; a writer
task appends whatever has queued up in one transaction and then publishes that batch, so a
fast stream of deltas costs one commit per batch, not per event, and a record still reaches
the hub only once it is durable.

Retention (``EventRetention``): the events of a finished run are kept for the session's
``runs_per_session`` most recent runs, and the whole log holds at most ``max_events`` rows;
past that the oldest finished runs' events go first. A live run's events are never pruned.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lovia.events import (
    ApprovalRequired,
    ContextCompacted,
    Event,
    HandoffOccurred,
    MessageCompleted,
    OutputDiscarded,
    ReasoningDelta,
    RunCompleted,
    RunFailed,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
    TurnStarted,
    UserMessageInjected,
)
from lovia.exceptions import RunCancelled, UserError
from lovia.messages import ToolCall
from lovia.transcript import entry_to_dict, to_json_safe

if TYPE_CHECKING:
    from .hub import EventHub
    from .store.base import ChatStore

__all__ = [
    "EventRecord",
    "EventRetention",
    "RunLog",
    "done_record",
    "error_record",
    "records_of",
]

logger = logging.getLogger(__name__)

_MAX_PENDING = 4096
"""Records a run may queue ahead of its writer before ``put`` waits (backpressure)."""


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One logged event: ``seq`` is its position in run ``run_id`` (from 1)."""

    run_id: str
    seq: int
    type: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventRetention:
    """How much of the event log a store keeps (see the module docstring)."""

    runs_per_session: int = 5
    """Finished runs per session whose events are kept (the live run always is)."""
    max_events: int = 200_000
    """Rows in the whole log; the oldest finished runs are pruned first past it."""

    def __post_init__(self) -> None:
        for name in ("runs_per_session", "max_events"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserError(
                    f"EventRetention.{name} must be an int >= 0, got {value!r}",
                    hint="0 keeps only the live runs' events",
                )


def _safe(value: Any) -> Any:
    """JSON-safe ``value``; what ``to_json_safe`` cannot represent degrades to its ``repr``."""
    try:
        return to_json_safe(value)
    except TypeError:
        return repr(value)


def _call(call: ToolCall) -> dict[str, Any]:
    return {"call_id": call.id, "name": call.name, "arguments": call.arguments}


def error_record(error: BaseException) -> dict[str, Any]:
    """``error`` data: the error's type name and message (never a traceback)."""
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return {"type": type(error).__name__, "message": message}


def done_record(status: str, result: Any = None) -> dict[str, Any]:
    """``done`` data: ``status`` is ``completed``, ``failed`` or ``cancelled``."""
    data: dict[str, Any] = {"status": status}
    if result is not None:
        data["output"] = _safe(result.output)
        usage = result.usage
        data["usage"] = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        }
    return data


def records_of(
    event: Event, *, todo_tools: frozenset[str] = frozenset()
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(type, data)`` records an event becomes; ``[]`` for events clients never see.

    A run's end becomes ``done`` (after an ``error`` when it failed), so every logged run ends
    with exactly one ``done``. A successful call of a tool in ``todo_tools`` (the todo list's
    ``todo_write``) becomes ``todo`` with the whole list instead of ``tool_result``.
    """
    if isinstance(event, TextDelta):
        return [("text_delta", {"delta": event.delta})]
    if isinstance(event, ReasoningDelta):
        return [("reasoning_delta", {"delta": event.delta})]
    if isinstance(event, OutputDiscarded):
        return [("output_discarded", {"reason": event.reason})]
    if isinstance(event, ToolCallStarted):
        return [("tool_call", _call(event.call))]
    if isinstance(event, ToolCallCompleted):
        if event.call.name in todo_tools and not event.is_error:
            todos = _safe(event.result)
            if isinstance(todos, list):
                return [("todo", {"call_id": event.call.id, "todos": todos})]
        data = _call(event.call)
        data.update(result=_safe(event.result), is_error=event.is_error, output=event.output)
        return [("tool_result", data)]
    if isinstance(event, ApprovalRequired):
        return [("approval_required", _call(event.call))]
    if isinstance(event, MessageCompleted):
        return [("message_completed", {"entries": [entry_to_dict(e) for e in event.entries]})]
    if isinstance(event, UserMessageInjected):
        return [("user_injected", {"content": _safe(event.content), "turn": event.turn})]
    if isinstance(event, TurnStarted):
        return [("turn_started", {"turn": event.turn, "agent": event.agent.name})]
    if isinstance(event, HandoffOccurred):
        return [("handoff", {"from": event.from_agent.name, "to": event.to_agent.name})]
    if isinstance(event, ContextCompacted):
        data = event.notice.to_dict()
        data.update(entries_before=event.entries_before, entries_after=event.entries_after)
        return [("context_compacted", data)]
    if isinstance(event, RunCompleted):
        return [("done", done_record("completed", event.result))]
    if isinstance(event, RunFailed):
        status = "cancelled" if isinstance(event.error, RunCancelled) else "failed"
        return [("error", error_record(event.error)), ("done", done_record(status))]
    return []


class RunLog:
    """The writer of one run's records: numbered, logged in batches, then published.

    ``put`` numbers a record and queues it; it waits only when ``_MAX_PENDING`` records are
    queued. ``close`` flushes everything queued and stops the writer. A batch the store
    refuses is still published (live watchers see it; a replay will not) and logged as an
    error, so a failing disk degrades resumption but never stalls the run.
    """

    def __init__(
        self, run_id: str, session_id: str, store: ChatStore, hub: EventHub, *, last_seq: int
    ) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self.seq = last_seq
        self._store = store
        self._hub = hub
        self._pending: list[EventRecord] = []
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()
        self._closed = False
        self._task = asyncio.create_task(self._write(), name=f"lovia-log-{run_id}")

    async def put(self, kind: str, data: dict[str, Any]) -> None:
        self.seq += 1
        self._pending.append(EventRecord(self.run_id, self.seq, kind, data))
        self._wake.set()
        if len(self._pending) >= _MAX_PENDING:
            self._drained.clear()
            await self._drained.wait()

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        await asyncio.shield(self._task)

    async def _write(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if batch:
                try:
                    await self._store.append_events(self.session_id, batch)
                except Exception:
                    logger.exception("could not log %d events of run %s", len(batch), self.run_id)
                for record in batch:
                    self._hub.publish(record)
            self._drained.set()
            if self._closed and not self._pending:
                return
