"""Chat titles: a provisional one at once, then a model-generated one in the background.

A new chat is titled with its first message (whitespace collapsed, cut to ``TITLE_CHARS``)
the moment it is created (``provisional_title``). Once its first run is over, the
``TitleGenerator`` asks a model for a short title (``generate_title``), cleans it of the
decorations models add (quotes, markdown, a ``Title:`` label, a trailing full stop, a
``<think>`` block) and applies it with ``ChatStore.set_title_if_unchanged``: only if the
title is still the provisional one it read. A manual rename at any moment wins, and a blank
or unusable answer leaves the provisional title in place.

Generation never blocks a chat stream and never fails a run: it runs in its own task, bounded
by ``timeout``, and every error is logged and dropped. ``aclose`` cancels what is pending.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lovia.parts import text_of
from lovia.transcript import AssistantTextEntry, InputEntry

if TYPE_CHECKING:
    from lovia.providers.base import Provider

    from .lifecycle import LifecycleBus
    from .store.base import ChatStore

__all__ = [
    "TITLE_CHARS",
    "TITLE_INSTRUCTIONS",
    "TitleGenerator",
    "clean_title",
    "generate_title",
    "provisional_title",
]

logger = logging.getLogger(__name__)

TITLE_CHARS = 60
"""The longest title, provisional or generated (longer ones are cut with an ellipsis)."""

_BLANK_TITLE = "New chat"
_PROMPT_CHARS = 2000

TITLE_INSTRUCTIONS = (
    "You name chat conversations. Reply with a title of at most six words that says what "
    "the conversation is about, in the language of the user's message. Reply with the title "
    "only: no quotes, no punctuation at the end, no markdown, no explanation."
)

_THINK = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.DOTALL | re.IGNORECASE)
_LABEL = re.compile(r"^(?:chat\s+|conversation\s+|suggested\s+)?title\s*[:：\-–—]\s*", re.I)
_MARKUP = re.compile(r"^[\s#>*_`~\-•]+|[\s*_`~]+$")
_QUOTES = "\"'`“”‘’«»„「」『』"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def provisional_title(message: str) -> str:
    """The first message as a title: one line, at most ``TITLE_CHARS`` characters."""
    printable = "".join(ch if ch.isprintable() else " " for ch in message)
    line = " ".join(printable.split())
    return _cut(line, TITLE_CHARS) if line else _BLANK_TITLE


def clean_title(raw: str, *, limit: int = TITLE_CHARS) -> str:
    """A model's answer as a title; ``""`` when nothing usable is left.

    Keeps the first non-blank line, then strips a ``<think>`` block, a ``Title:`` label,
    markdown emphasis and headings, surrounding quotes and a trailing full stop.
    """
    text = _THINK.sub("", raw)
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    previous = None
    while previous != line:  # decorations nest: **"Title: Foo"**
        previous = line
        line = _MARKUP.sub("", line)
        line = _LABEL.sub("", line)
        line = line.strip().strip(_QUOTES).strip()
        line = line.rstrip(".。!！").rstrip()
    line = " ".join("".join(ch for ch in line if ch.isprintable()).split())
    return _cut(line, limit) if line else ""


async def generate_title(
    model: Provider | str,
    message: str,
    reply: str | None = None,
    *,
    instructions: str = TITLE_INSTRUCTIONS,
) -> str:
    """Ask ``model`` for a title of a chat opened with ``message`` (answered with ``reply``);
    the cleaned title, ``""`` when the answer was blank. Errors propagate."""
    from lovia.agent import Agent
    from lovia.runner import Runner

    prompt = f"User message:\n{message[:_PROMPT_CHARS]}"
    if reply:
        prompt += f"\n\nAssistant reply:\n{reply[:_PROMPT_CHARS]}"
    agent: Agent[Any] = Agent(name="lovia-titles", model=model, instructions=instructions)
    result = await Runner.run(agent, prompt, max_turns=1)
    output = result.output
    return clean_title(output) if isinstance(output, str) else ""


def _first_exchange(entries: list[Any]) -> tuple[str, str]:
    """The first user message's text and the assistant text that answered it."""
    message, reply = "", []
    for entry in entries:
        if isinstance(entry, InputEntry) and entry.role == "user":
            if message:
                break
            message = text_of(entry.content).strip()
        elif isinstance(entry, AssistantTextEntry) and message:
            reply.append(entry.content)
    return message, "\n".join(reply).strip()


class TitleGenerator:
    """Titles chats in background tasks (see the module docstring).

    ``model_for(agent)`` names the model that titles a chat of that agent (``None`` skips
    it): the server's ``title_model``, or the chat agent's own model.
    """

    def __init__(
        self,
        store: ChatStore,
        *,
        model_for: Callable[[str], Provider | str | None],
        bus: LifecycleBus | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.store = store
        self.bus = bus
        self.timeout = timeout
        self._model_for = model_for
        self._tasks: set[asyncio.Task[bool]] = set()
        self._pending: set[str] = set()
        self._asked: set[str] = set()

    def __repr__(self) -> str:
        return f"TitleGenerator(pending={len(self._tasks)})"

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def wants(self, session_id: str) -> bool:
        """Whether titling the chat is worth a try: no task for it is pending and no model
        was asked for it yet (a chat whose first run left no message is tried again)."""
        return session_id not in self._pending and session_id not in self._asked

    def schedule(self, session_id: str, agent: str) -> asyncio.Task[bool]:
        """Start titling the chat in the background; the task's result says whether the
        generated title was applied."""
        task = asyncio.create_task(
            self.retitle(session_id, agent), name=f"lovia-title-{session_id}"
        )
        self._tasks.add(task)
        self._pending.add(session_id)

        def done(task: asyncio.Task[bool]) -> None:
            self._tasks.discard(task)
            self._pending.discard(session_id)

        task.add_done_callback(done)
        return task

    async def retitle(self, session_id: str, agent: str) -> bool:
        """Generate and apply the chat's title now; ``True`` if it was applied. Never raises
        (except on cancellation)."""
        try:
            return await asyncio.wait_for(self._retitle(session_id, agent), self.timeout)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("could not title session %s", session_id, exc_info=True)
            return False

    async def _retitle(self, session_id: str, agent: str) -> bool:
        meta = await self.store.get_session(session_id)
        model = self._model_for(agent)
        if meta is None or not meta.title_provisional or meta.parent_id or model is None:
            return False  # gone, renamed, a subagent's task session, or no model
        message, reply = _first_exchange(await self.store.session.load(session_id))
        if not message:
            return False
        self._asked.add(session_id)  # one model call per chat, whatever it answers
        title = await generate_title(model, message, reply or None)
        if not title or title == meta.title:
            return False
        if not await self.store.set_title_if_unchanged(
            session_id, expected=meta.title, title=title
        ):
            return False  # renamed meanwhile: the manual title wins
        if self.bus is not None:
            self.bus.publish("session_retitled", {"session_id": session_id, "title": title})
        return True

    async def join(self) -> None:
        """Wait until every title task started so far has ended."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel every pending title task and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
