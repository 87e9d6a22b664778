"""Follow-up suggestions: short next questions the user might ask, offered after a reply.

Off by default (``create_app(followups=False)``). ``followups=True`` asks a model
(``followup_model``, or the chat agent's own model) through ``generate_followups``; a
``FollowupFn`` (sync or async, ``FollowupRequest -> list[str]``) replaces the model call.

What the suggester sees is the chat's last answered exchange: the last user message that got
an assistant reply, and that reply (``last_exchange``). Tool calls and results are skipped,
and a trailing user message with no reply yet (a failed run) is skipped too, so suggestions
follow the last thing the assistant actually said.

Whatever comes back is normalised: model text is split into lines and stripped of bullets,
numbering and quotes (``parse_suggestions``); a list keeps only its non-blank strings; each
suggestion is cut to ``MAX_FOLLOWUP_CHARS`` and at most ``limit`` are kept. A suggester that
raises, times out or returns anything else (a bare string, a dict, ``None``) gives ``[]``:
suggestions are a nicety and never cost the client a 500.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from lovia.messages import Message, assistant, user
from lovia.parts import text_of
from lovia.transcript import AssistantTextEntry, InputEntry, TranscriptEntry

from .store.sql import well_formed

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.providers.base import Provider

__all__ = [
    "FOLLOWUP_INSTRUCTIONS",
    "FollowupFn",
    "FollowupRequest",
    "Followups",
    "MAX_FOLLOWUPS",
    "MAX_FOLLOWUP_CHARS",
    "generate_followups",
    "last_exchange",
    "normalize_suggestions",
    "parse_suggestions",
]

logger = logging.getLogger(__name__)

MAX_FOLLOWUPS = 3
"""Suggestions returned at most (``limit``)."""
MAX_FOLLOWUP_CHARS = 160
"""The longest suggestion; longer ones are cut with an ellipsis."""
_EXCHANGE_CHARS = 4000

FOLLOWUP_INSTRUCTIONS = (
    "You suggest what the user might ask next in a chat. Given the user's last message and "
    "the assistant's reply, write up to three short follow-up questions or requests, written "
    "as the user would type them, in the user's language. One per line, no numbering, no "
    "quotes, nothing else."
)


@dataclass(frozen=True, slots=True)
class FollowupRequest:
    """What a suggester gets: the chat, its agent's name and the last exchange
    (``[user message, assistant reply]``)."""

    session_id: str
    agent: str
    messages: tuple[Message, ...]


FollowupFn = Callable[[FollowupRequest], Union[Awaitable[Any], Any]]
"""A custom suggester: returns (or resolves to) a list of strings."""

_BULLET = re.compile(r"^\s*(?:[-*+•·>]+|\(?\d{1,2}[.)\]:]|[a-zA-Z][.)])\s*")
_QUOTES = "\"'`“”‘’«»„「」"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_FOLLOWUP_CHARS else text[: MAX_FOLLOWUP_CHARS - 1] + "…"


def last_exchange(entries: Sequence[TranscriptEntry]) -> list[Message]:
    """The last user message with an assistant reply, and that reply (``[]`` if none).

    The reply is every assistant text between that user message and the next one; tool
    traffic and reasoning are left out.
    """
    turns: list[tuple[str, list[str]]] = []
    for entry in entries:
        if isinstance(entry, InputEntry) and entry.role == "user":
            turns.append((text_of(entry.content).strip(), []))
        elif isinstance(entry, AssistantTextEntry) and turns and entry.content.strip():
            turns[-1][1].append(entry.content.strip())
    for message, reply in reversed(turns):
        if message and reply:
            answer = "\n\n".join(reply)
            return [user(message[-_EXCHANGE_CHARS:]), assistant(answer[-_EXCHANGE_CHARS:])]
    return []


def _one(line: str) -> str:
    text = " ".join(well_formed(line).split())
    previous = None
    while previous != text:
        previous = text
        text = _BULLET.sub("", text).strip().strip(_QUOTES).strip().strip("*_").strip()
    return text


def normalize_suggestions(values: Sequence[Any], *, limit: int = MAX_FOLLOWUPS) -> list[str]:
    """Keep the non-blank strings of ``values``, cleaned, deduplicated and cut."""
    out: list[str] = []
    for value in values:
        if len(out) >= limit:
            break
        if not isinstance(value, str):
            continue
        text = _one(value)
        if text and not text.endswith(":") and _cut(text) not in out:
            out.append(_cut(text))
    return out


def parse_suggestions(text: str, *, limit: int = MAX_FOLLOWUPS) -> list[str]:
    """A model's answer as suggestions: one per line; headers (``...:``) and blanks dropped."""
    return normalize_suggestions(text.splitlines(), limit=limit)


async def generate_followups(
    request: FollowupRequest,
    *,
    model: Provider | str,
    instructions: str = FOLLOWUP_INSTRUCTIONS,
    limit: int = MAX_FOLLOWUPS,
) -> list[str]:
    """Ask ``model`` for follow-ups to ``request``'s exchange; errors propagate."""
    from lovia.agent import Agent
    from lovia.runner import Runner

    if not request.messages:
        return []
    lines = [
        f"{'User' if m.role == 'user' else 'Assistant'}:\n{text_of(m.content)}"
        for m in request.messages
    ]
    agent: Agent[Any] = Agent(name="lovia-followups", model=model, instructions=instructions)
    result = await Runner.run(agent, "\n\n".join(lines), max_turns=1)
    output = result.output
    return parse_suggestions(output, limit=limit) if isinstance(output, str) else []


class Followups:
    """The server's suggester: ``followups=True`` (a model) or a ``FollowupFn``.

    ``suggest`` never raises: see the module docstring.
    """

    def __init__(
        self,
        suggester: bool | FollowupFn,
        *,
        agents: Mapping[str, Agent[Any]],
        model: Provider | str | None = None,
        limit: int = MAX_FOLLOWUPS,
        timeout: float = 30.0,
    ) -> None:
        self._fn: FollowupFn | None = None if isinstance(suggester, bool) else suggester
        self.agents = agents
        self.model = model
        self.limit = limit
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Followups(custom={self._fn is not None})"

    async def suggest(
        self, session_id: str, agent: str, entries: Sequence[TranscriptEntry]
    ) -> list[str]:
        """Suggestions for the chat's last answered exchange (``[]`` without one)."""
        messages = last_exchange(entries)
        if not messages:
            return []
        request = FollowupRequest(session_id, agent, tuple(messages))
        try:
            return await asyncio.wait_for(self._ask(request), self.timeout)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("follow-up suggestions failed for %s", session_id, exc_info=True)
            return []

    async def _ask(self, request: FollowupRequest) -> list[str]:
        if self._fn is None:
            found = self.agents.get(request.agent)
            model = self.model or (found.model if found is not None else None)
            if model is None:
                return []
            return await generate_followups(request, model=model, limit=self.limit)
        value = self._fn(request)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            return []
        return normalize_suggestions(value, limit=self.limit)
