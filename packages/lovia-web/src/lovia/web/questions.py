"""``QuestionRegistry``: ``ask_human`` questions waiting for an answer over HTTP, by session.

The agent's ``ask_human`` tool is built on a ``HumanChannel`` (``ask_human(channel)``, in
``lovia.tools.human``); the server is given the same channel (``create_app(question_channel=)``)
and this registry is its one consumer. It takes each question the channel publishes and
parks it under the question's session, so ``POST /api/chat/answer {session_id, answer}``
needs no question id: the client saw the question as the ``ask_human`` ``tool_call`` event.

Rules it keeps:

* One pending question per session. ``ask_human`` is a barrier and a session has one run,
  so a second question only appears if something else shares the channel; it is cancelled
  at once (the asking call reads a tool error) rather than hiding the first.
* A question nobody answers within ``timeout`` seconds is cancelled: the tool call fails
  with ``the question was cancelled: nobody answered within N s`` and the model goes on.
* ``sweep(session_id)`` (a cancelled or finished run) cancels what the session has parked.
* Questions without a session (a run outside the server sharing the channel) are left to
  whoever else reads the channel's ``pending``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import TYPE_CHECKING

from lovia.exceptions import UserError

if TYPE_CHECKING:
    from lovia.tools.human import HumanChannel, HumanQuestion

__all__ = ["QuestionRegistry"]

logger = logging.getLogger(__name__)


class QuestionRegistry:
    """Pending ``ask_human`` questions of ``channel``, one per session (see the module)."""

    def __init__(self, channel: HumanChannel, *, timeout: float | None = 600.0) -> None:
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise UserError(
                f"question_timeout must be a positive number of seconds or None, got {timeout!r}",
                hint="None waits for an answer without limit",
            )
        self.channel = channel
        self.timeout = timeout
        self._pending: dict[str, HumanQuestion] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"QuestionRegistry(pending={len(self._pending)}, timeout={self.timeout})"

    def ensure_started(self) -> None:
        """Start consuming the channel (idempotent; needs a running event loop)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._consume(), name="lovia-questions"
            )

    async def _consume(self) -> None:
        async for question in self.channel.questions():
            self._park(question)

    def _park(self, question: HumanQuestion) -> None:
        session_id = question.session_id
        if session_id is None:
            return
        if self.pending(session_id) is not None:
            self.channel.cancel(question.id, "another question is pending in this chat")
            return
        self._pending[session_id] = question
        if self.timeout is not None:
            self._timers[question.id] = asyncio.get_running_loop().call_later(
                self.timeout, self._expire, session_id, question.id
            )

    def _expire(self, session_id: str, question_id: str) -> None:
        self._timers.pop(question_id, None)
        question = self._pending.get(session_id)
        if question is not None and question.id == question_id:
            del self._pending[session_id]
            self.channel.cancel(question_id, f"nobody answered within {self.timeout:g} s")

    def _forget(self, session_id: str) -> HumanQuestion | None:
        question = self._pending.pop(session_id, None)
        if question is not None:
            timer = self._timers.pop(question.id, None)
            if timer is not None:
                timer.cancel()
        return question

    def pending(self, session_id: str) -> HumanQuestion | None:
        """The question ``session_id`` waits on; ``None`` when there is none (any more)."""
        question = self._pending.get(session_id)
        if question is None:
            return None
        if question.id not in {q.id for q in self.channel.pending}:  # ended elsewhere
            self._forget(session_id)
            return None
        return question

    def answer(self, session_id: str, text: str) -> HumanQuestion | None:
        """Answer the session's pending question; returns it, or ``None`` if none is pending."""
        question = self._forget(session_id)
        if question is None or not self.channel.answer(question.id, text):
            return None
        return question

    def sweep(self, session_id: str, *, reason: str = "the run was cancelled") -> int:
        """Cancel the session's parked question; returns how many were cancelled (0 or 1)."""
        question = self._forget(session_id)
        return int(question is not None and self.channel.cancel(question.id, reason))

    async def aclose(self) -> None:
        """Stop consuming the channel and its timers (the channel itself stays open)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
