"""``ask_human(channel)``: the model asks a person a question and waits for the answer.

A ``HumanChannel`` connects runs to whatever shows the questions (a terminal, a web page):
the UI iterates ``channel.questions()`` and calls ``answer``, ``cancel`` or ``close``. The
tool call waits until one of them happens; a cancelled question or a closed channel is a
tool error the model reads, so a run never hangs on a UI that went away (close the channel
when the UI stops). The tool is a barrier: it runs alone in its turn, so a run has at most
one question pending.

The channel is meant for one event loop; ``answer``, ``cancel`` and ``close`` may also be
called from other threads.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidToolArguments, ToolError
from ._args import bool_arg, object_schema, text_arg
from .base import Tool

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = ["HumanChannel", "HumanQuestion", "QuestionOption", "ask_human"]

_Outcome = tuple[str, str | None]  # ("answer", text) | ("cancel", reason) | ("close", reason)


@dataclass(frozen=True, slots=True)
class QuestionOption:
    """One choice offered with a question."""

    label: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class HumanQuestion:
    """A question waiting for a person. ``id`` is what ``answer``/``cancel`` take."""

    id: str
    question: str
    options: tuple[QuestionOption, ...] = ()
    multi_select: bool = False
    """The person may pick several options (only with options)."""
    session_id: str | None = None
    run_id: str | None = None


def _settle(future: asyncio.Future[Any], value: Any) -> None:
    """Resolve ``future`` from any thread (a no-op when it is already done)."""

    def settle() -> None:
        if not future.done():
            future.set_result(value)

    loop = future.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        settle()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(settle)


class HumanChannel:
    """Questions from runs to a person, and their answers back."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[HumanQuestion, asyncio.Future[_Outcome]]] = {}
        self._backlog: deque[HumanQuestion] = deque()
        self._waiters: list[asyncio.Future[None]] = []
        self._close_reason: str | None = None
        self._is_closed = False

    @property
    def pending(self) -> tuple[HumanQuestion, ...]:
        """Questions asked and not yet answered, cancelled or closed, oldest first."""
        return tuple(q for q, _ in self._pending.values())

    @property
    def closed(self) -> bool:
        return self._is_closed

    async def ask(self, question: HumanQuestion) -> str:
        """Publish ``question`` and wait for its answer; cancel and close raise ``ToolError``."""
        if self._is_closed:
            raise ToolError(
                f"no one is there to answer: {self._close_reason or 'the channel is closed'}"
            )
        future: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
        self._pending[question.id] = (question, future)
        if len(self._backlog) >= len(self._pending):
            # Questions resolved before any consumer took them (a UI that reads ``pending``
            # never drains the backlog): drop them, or the backlog grows for ever.
            self._backlog = deque(q for q in self._backlog if q.id in self._pending)
        self._backlog.append(question)
        self._wake()
        try:
            kind, text = await future
        finally:  # answered, or the run was cancelled while waiting: either way it is over
            self._pending.pop(question.id, None)
        if kind == "answer":
            return text or ""
        if kind == "cancel":
            raise ToolError(f"the question was cancelled{f': {text}' if text else ''}")
        raise _gone(text)

    async def questions(self) -> AsyncIterator[HumanQuestion]:
        """Every question as it is asked (earlier ones first); ends when the channel closes.

        Questions resolved while they waited in the backlog are skipped.
        """
        while True:
            while self._backlog:
                question = self._backlog.popleft()
                if question.id in self._pending:
                    yield question
            if self._is_closed:
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def answer(self, question_id: str, text: str) -> bool:
        """Answer a pending question; ``False`` when it is not pending (any more)."""
        return self._resolve(question_id, ("answer", text))

    def cancel(self, question_id: str, reason: str | None = None) -> bool:
        """Withdraw a pending question; the asking tool call fails with ``reason``."""
        return self._resolve(question_id, ("cancel", reason))

    def close(self, reason: str | None = None) -> None:
        """Fail every pending question, refuse new ones, and end ``questions()``."""
        self._is_closed = True
        self._close_reason = reason
        for question_id in list(self._pending):
            self._resolve(question_id, ("close", reason))
        self._wake()

    def _resolve(self, question_id: str, outcome: _Outcome) -> bool:
        entry = self._pending.pop(question_id, None)
        if entry is None:
            return False
        _settle(entry[1], outcome)
        return True

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _settle(waiter, None)


def _gone(reason: str | None) -> ToolError:
    return ToolError(f"no one is there to answer: {reason or 'the channel is closed'}")


def _options(raw: Any) -> tuple[QuestionOption, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not 2 <= len(raw) <= 4:
        raise InvalidToolArguments("options must be a list of 2 to 4 choices, or left out")
    found: list[QuestionOption] = []
    for item in raw:
        label = item.get("label") if isinstance(item, dict) else None
        if not isinstance(label, str) or not label.strip() or "\n" in label or "\r" in label:
            raise InvalidToolArguments("each option needs a non-empty, single-line label")
        description = item.get("description") or ""
        if not isinstance(description, str):
            raise InvalidToolArguments("an option's description must be a string")
        found.append(QuestionOption(label.strip(), description.strip()))
    if len({o.label for o in found}) != len(found):
        raise InvalidToolArguments("option labels must be unique")
    return tuple(found)


def ask_human(channel: HumanChannel, *, name: str = "ask_human") -> Tool:
    """The tool that asks a person through ``channel`` (a barrier)."""

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        text = text_arg(args, "question").strip()
        if not text:
            raise InvalidToolArguments("question is empty", hint="ask a question")
        options = _options(args.get("options"))
        question = HumanQuestion(
            id=f"q_{uuid.uuid4().hex[:12]}",
            question=text,
            options=options,
            multi_select=bool_arg(args, "multi_select") and bool(options),
            session_id=ctx.session_id,
            run_id=ctx.run_id,
        )
        answer = await channel.ask(question)
        return f"The human answered: {answer}"

    return Tool(
        name=name,
        description=(
            "Ask the user a question and wait for the answer. Offer 2-4 options when the "
            "choices are known (multi_select lets them pick several); leave options out for "
            "a free-text answer. Use it only when you cannot go on without them."
        ),
        parameters=object_schema(
            {
                "question": {"type": "string", "minLength": 1},
                "options": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 4,
                    "items": object_schema(
                        {
                            "label": {"type": "string", "minLength": 1, "pattern": "^[^\\r\\n]+$"},
                            "description": {"type": "string"},
                        },
                        ["label"],
                    ),
                },
                "multi_select": {"type": "boolean", "default": False},
            },
            ["question"],
        ),
        invoke=invoke,
        parallel=False,
    )
