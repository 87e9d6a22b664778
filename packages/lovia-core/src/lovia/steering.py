"""``Mailbox``: steer a run by pushing user messages into it while it runs.

The run loop drains the mailbox at the start of every turn (after the ``TurnStarted`` hooks,
so a push from such a hook lands in the same turn) and turns each item into a user entry,
emitting ``UserMessageInjected``. A push never interrupts the phase in progress.

Drains are destructive and a message is addressed to one conversation, so every run has its
own mailbox: ``ctx.mailbox`` is always present, and agent-as-tool sub-runs get a fresh one.
``remove(token)`` withdraws an item that has not been drained yet, which lets a producer
deliver a message through another route instead without delivering it twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

from .exceptions import UserError
from .parts import ContentPart, FilePart, ImagePart, TextPart

__all__ = ["MailContent", "Mailbox"]

MailContent = Union[str, tuple[ContentPart, ...]]
"""One steering message: text, or typed parts (stored as a tuple)."""

_PART_TYPES = (TextPart, ImagePart, FilePart)


class Mailbox:
    """A FIFO of user messages waiting to be injected at the next turn start.

    Pass one as ``Runner.run(..., mailbox=box)`` to keep what the run did not drain; without
    one the runner creates a default mailbox whose leftovers are dropped with the run.
    Not thread-safe: push from the event loop that runs the agent.
    """

    __slots__ = ("_items", "_next_token")

    def __init__(self) -> None:
        self._items: dict[int, MailContent] = {}  # insertion order is the FIFO order
        self._next_token = 1

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Mailbox(pending={len(self._items)})"

    def push(self, content: str | Sequence[ContentPart]) -> int:
        """Queue ``content`` (text or a list of parts) and return a token for ``remove``.

        Raises ``UserError`` for anything else (``None``, a dict, a non-part element) and
        for an empty message (blank text, no parts): providers refuse those.
        """
        item = _normalise(content)
        token = self._next_token
        self._next_token += 1
        self._items[token] = item
        return token

    def remove(self, token: int) -> bool:
        """Withdraw a queued item; ``False`` if it was already drained or never existed."""
        return self._items.pop(token, None) is not None

    def drain(self) -> list[MailContent]:
        """Take every queued item, oldest first, leaving the mailbox empty."""
        items = list(self._items.values())
        self._items.clear()
        return items


def _normalise(content: object) -> MailContent:
    if isinstance(content, str):
        if not content.strip():
            raise _empty()
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        parts = tuple(content)
        if all(isinstance(part, _PART_TYPES) for part in parts):
            if not parts:
                raise _empty()
            return parts
    raise UserError(
        f"Mailbox.push() takes text or a list of content parts, got {type(content).__name__!r}",
        hint="push a str, or a list of TextPart/ImagePart/FilePart",
    )


def _empty() -> UserError:
    # Providers reject blank user messages, which would fail the run at its next model call.
    return UserError(
        "Mailbox.push() got an empty message",
        hint="push some text or at least one content part",
    )
