"""AG-UI: lovia event records as AG-UI protocol events (PyPI ``ag-ui-protocol``).

``AguiEncoder`` is the pure mapping, one instance per AG-UI run: it keeps what the protocol
needs open or closed (the text message, the reasoning message, the step, the announced tool
calls) and returns the events each record becomes. ``agui_events`` drives it over a
supervised run (``RunSupervisor.follow``), across auto-chained runs, and stops at an
approval, which ends the AG-UI run with an *interrupt* outcome while the lovia run waits.

The mapping (docs/web-agui.md has the full table):

* ``turn_started`` -> ``STEP_STARTED`` ``turn N`` (the previous step finished first);
* ``text_delta`` -> ``TEXT_MESSAGE_START`` (first) + ``TEXT_MESSAGE_CONTENT``; the message
  ends at ``message_completed``, a tool call, or ``output_discarded``;
* ``reasoning_delta`` -> ``REASONING_START`` / ``REASONING_MESSAGE_*`` / ``REASONING_END``;
* ``tool_call`` -> ``TOOL_CALL_START`` / ``TOOL_CALL_ARGS`` (the JSON arguments) /
  ``TOOL_CALL_END``; ``tool_result`` -> ``TOOL_CALL_RESULT``;
* ``todo`` -> ``STATE_SNAPSHOT`` ``{"todos": [...]}``;
* ``approval_required`` -> the call's ``TOOL_CALL_*``, ``CUSTOM`` ``lovia.approval_required``
  and ``RUN_FINISHED`` with an ``interrupt`` outcome (the interrupt id is the call id);
* ``done`` -> ``RUN_FINISHED`` (``result`` = the output; ``cancelled`` outcome for a
  cancelled run), or ``RUN_ERROR`` (``code`` = the error type) for a failed one;
* anything else (``user_injected``, ``handoff``, ``context_compacted``, ...) -> ``CUSTOM``
  ``lovia.<type>`` with the record's data.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import RunFinishedCancelledOutcome, RunFinishedInterruptOutcome

from ..eventlog import EventRecord
from ..recorder import PRIVATE_RECORDS

if TYPE_CHECKING:
    from ..supervisor import RunSupervisor

__all__ = ["APPROVAL_EVENT", "APPROVAL_REASON", "AguiEncoder", "agui_events"]

APPROVAL_EVENT = "lovia.approval_required"
"""The ``CUSTOM`` event name of a gated tool call (value: ``{call_id, name, arguments}``)."""
APPROVAL_REASON = "tool_approval"
"""The ``reason`` of the interrupt a gated tool call ends an AG-UI run with."""

_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _new_id() -> str:
    return uuid4().hex


class AguiEncoder:
    """The AG-UI events of one AG-UI run, record by record (see the module docstring).

    ``announced`` are tool-call ids the client already saw started (a resumed run's
    interrupted call): they get their result without a second ``TOOL_CALL_START``.
    """

    def __init__(self, thread_id: str, run_id: str, *, announced: Iterable[str] = ()) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.finished = False
        self._announced = set(announced)
        self._text: str | None = None
        self._reasoning: str | None = None
        self._step: str | None = None
        self._parent: str | None = None
        self._error: dict[str, Any] | None = None

    def start(self) -> list[BaseEvent]:
        return [
            RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
            )
        ]

    # -- what stays open ------------------------------------------------------------------

    def _close_text(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        message_id, self._text = self._text, None
        return [TextMessageEndEvent(message_id=message_id)]

    def _close_reasoning(self) -> list[BaseEvent]:
        if self._reasoning is None:
            return []
        message_id, self._reasoning = self._reasoning, None
        return [
            ReasoningMessageEndEvent(message_id=message_id),
            ReasoningEndEvent(message_id=message_id),
        ]

    def _close_step(self) -> list[BaseEvent]:
        if self._step is None:
            return []
        name, self._step = self._step, None
        return [StepFinishedEvent(step_name=name)]

    def _close_all(self) -> list[BaseEvent]:
        return [*self._close_reasoning(), *self._close_text(), *self._close_step()]

    def _announce(self, data: dict[str, Any]) -> list[BaseEvent]:
        call_id = str(data.get("call_id", ""))
        if call_id in self._announced:
            return []
        self._announced.add(call_id)
        raw = data.get("arguments")
        args = raw if isinstance(raw, str) else _json(raw if raw is not None else {})
        return [
            ToolCallStartEvent(
                tool_call_id=call_id,
                tool_call_name=str(data.get("name", "")),
                parent_message_id=self._parent,
            ),
            ToolCallArgsEvent(tool_call_id=call_id, delta=args or "{}"),
            ToolCallEndEvent(tool_call_id=call_id),
        ]

    # -- records --------------------------------------------------------------------------

    def events_of(self, record: EventRecord) -> list[BaseEvent]:
        """The AG-UI events ``record`` becomes (``[]`` once the AG-UI run has finished)."""
        if self.finished or record.type in PRIVATE_RECORDS:
            return []  # (the context inspector's records are not chat events)
        kind, data = record.type, record.data
        if kind == "turn_started":
            closing = self._close_all()
            self._step = f"turn {data.get('turn', '?')}"
            return [*closing, StepStartedEvent(step_name=self._step)]
        if kind == "text_delta":
            out = self._close_reasoning()
            if self._text is None:
                self._text = self._parent = _new_id()
                out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
            if data.get("delta"):
                out.append(TextMessageContentEvent(message_id=self._text, delta=data["delta"]))
            return out
        if kind == "reasoning_delta":
            out = self._close_text()
            if self._reasoning is None:
                self._reasoning = _new_id()
                out.append(ReasoningStartEvent(message_id=self._reasoning))
                out.append(ReasoningMessageStartEvent(message_id=self._reasoning))
            if data.get("delta"):
                out.append(
                    ReasoningMessageContentEvent(message_id=self._reasoning, delta=data["delta"])
                )
            return out
        if kind == "message_completed":
            return [*self._close_reasoning(), *self._close_text()]
        if kind == "output_discarded":
            closing = [*self._close_reasoning(), *self._close_text()]
            return [*closing, CustomEvent(name="lovia.output_discarded", value=data)]
        if kind == "tool_call":
            return [*self._close_reasoning(), *self._close_text(), *self._announce(data)]
        if kind == "tool_result":
            out = [*self._close_reasoning(), *self._close_text(), *self._announce(data)]
            output = data.get("output")
            content = output if isinstance(output, str) else _json(data.get("result"))
            out.append(
                ToolCallResultEvent(
                    message_id=_new_id(),
                    tool_call_id=str(data.get("call_id", "")),
                    content=content,
                    role="tool",
                )
            )
            return out
        if kind == "todo":
            todos = data.get("todos", data)
            return [StateSnapshotEvent(snapshot={"todos": todos})]
        if kind == "approval_required":
            return self._interrupt(data)
        if kind == "error":
            self._error = data
            return []
        if kind == "done":
            return self._done(data)
        return [CustomEvent(name=f"lovia.{kind}", value=data)]

    def _interrupt(self, data: dict[str, Any]) -> list[BaseEvent]:
        call_id = str(data.get("call_id", ""))
        out = [*self._close_reasoning(), *self._close_text(), *self._announce(data)]
        out.append(CustomEvent(name=APPROVAL_EVENT, value=data))
        out.extend(self._close_step())
        interrupt = Interrupt(
            id=call_id,
            reason=APPROVAL_REASON,
            message=f"approve the call to {data.get('name')!s}?",
            tool_call_id=call_id,
            response_schema=_RESPONSE_SCHEMA,
        )
        self.finished = True
        out.append(
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                outcome=RunFinishedInterruptOutcome(interrupts=[interrupt]),
            )
        )
        return out

    def _done(self, data: dict[str, Any]) -> list[BaseEvent]:
        self.finished = True
        status = data.get("status")
        if status == "failed":
            error = self._error or {}
            message = str(error.get("message") or "the run failed")
            code = error.get("type")
            return [RunErrorEvent(message=message, code=str(code) if code else None)]
        out = self._close_all()
        if status == "cancelled":
            outcome = RunFinishedCancelledOutcome()
            out.append(
                RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)
            )
        else:
            out.append(
                RunFinishedEvent(
                    thread_id=self.thread_id, run_id=self.run_id, result=data.get("output")
                )
            )
        return out

    def end_of_stream(self) -> list[BaseEvent]:
        """The run's log ended without ``done`` (a server shutdown interrupted it)."""
        if self.finished:
            return []
        self.finished = True
        return [
            RunErrorEvent(
                message="the server stopped before the run ended; send the thread again to resume",
                code="interrupted",
            )
        ]


async def agui_events(
    supervisor: RunSupervisor,
    encoder: AguiEncoder,
    lovia_run_id: str,
    *,
    after: int = 0,
) -> AsyncIterator[BaseEvent]:
    """The AG-UI run: ``RUN_STARTED``, then the lovia run's records from ``after`` (and the
    runs it auto-chains into) as AG-UI events, until the run ends or asks for an approval."""
    for event in encoder.start():
        yield event
    run_id: str | None = lovia_run_id
    while run_id is not None:
        current, run_id = run_id, None
        async for record in supervisor.follow(current, after=after):
            chained = record.data.get("next_run_id") if record.type == "done" else None
            if isinstance(chained, str) and record.data.get("status") == "completed":
                run_id, after = chained, 0  # the leftovers' run continues this AG-UI run
                break
            for event in encoder.events_of(record):
                yield event
            if encoder.finished:
                return
    for event in encoder.end_of_stream():
        yield event
