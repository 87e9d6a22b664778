"""Time tools: ``now`` (the current time), ``sleep`` (a capped pause) and the
``current_date`` instruction fragment.

``current_date`` states only the date and weekday, so the rendered system prompt stays
the same all day and prompt caches keep hitting.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exceptions import ToolError, UserError
from ._args import number_arg, object_schema, optional_text_arg
from .base import Tool

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = ["current_date", "now", "sleep"]

MAX_SLEEP_SECONDS = 60.0
_pause = asyncio.sleep  # module-level so tests can replace the wait itself


def _zone(name: str) -> datetime.tzinfo:
    """The IANA time zone ``name``; ``LookupError`` (``ZoneInfoNotFoundError``) if unknown."""
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(name)
    except ValueError as exc:  # a malformed key such as "../etc"
        raise LookupError(str(exc)) from exc


def _now(tz: str | None) -> datetime.datetime:
    if tz is None:
        return datetime.datetime.now().astimezone()
    return datetime.datetime.now(_zone(tz))


async def _now_invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    tz = optional_text_arg(args, "tz")
    try:
        return _now(tz).isoformat(timespec="seconds")
    except LookupError:
        raise ToolError(
            f"unknown time zone {tz!r}", hint="use an IANA name such as 'Europe/Paris' or 'UTC'"
        ) from None


async def _sleep_invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    asked = number_arg(args, "seconds", 0.0, float("-inf"), float("inf"))
    seconds = min(max(asked, 0.0), MAX_SLEEP_SECONDS)
    await ctx.cancel_token.race(_pause(seconds))
    capped = f" (capped at {MAX_SLEEP_SECONDS:g})" if asked > MAX_SLEEP_SECONDS else ""
    return f"Slept {seconds:g} seconds{capped}."


now = Tool(
    name="now",
    description="The current date and time as ISO-8601, in a time zone if given.",
    parameters=object_schema(
        {"tz": {"type": "string", "description": "IANA time zone, e.g. 'Asia/Tokyo'."}}, []
    ),
    invoke=_now_invoke,
)
"""The ``now(tz=None)`` tool: local time with its offset, or the time in ``tz``."""

sleep = Tool(
    name="sleep",
    description=f"Wait for a number of seconds (at most {MAX_SLEEP_SECONDS:g}) before going on.",
    parameters=object_schema(
        {"seconds": {"type": "number", "minimum": 0, "maximum": MAX_SLEEP_SECONDS}}, ["seconds"]
    ),
    invoke=_sleep_invoke,
)
"""The ``sleep(seconds)`` tool: capped at 60 seconds, negatives wait 0, cancellable."""


def current_date(tz: str | None = None) -> Callable[[RunContext[Any]], str]:
    """An instruction fragment stating today's date and weekday (in ``tz`` if given).

    Raises ``UserError`` for an unknown time zone, when the agent is assembled.
    """
    if tz is not None:
        try:
            _zone(tz)
        except LookupError:
            raise UserError(
                f"unknown time zone {tz!r}", hint="use an IANA name such as 'Europe/Paris'"
            ) from None

    def fragment(ctx: RunContext[Any]) -> str:
        today = _now(tz).date()
        return f"Today is {today:%A}, {today.isoformat()}."

    return fragment
