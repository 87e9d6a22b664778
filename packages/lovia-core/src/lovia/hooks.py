"""``AgentHooks``: subscribe handlers to run events by type.

Handlers are called ``handler(event, ctx)`` with the live ``RunContext``, sync or async.
Matching is by ``isinstance``, so subscribing to a category base (``ToolEvent``) catches the
whole family. For each event, catch-all handlers (``on_any``) run first, then the typed
handlers, each group in registration order.

Dispatch is fail-open: a handler that raises is logged with its traceback on the
``lovia.hooks`` logger and skipped; the run and the other handlers carry on. Only
``BaseException``s that are not ``Exception``s (task cancellation) propagate.

The run loop awaits ``dispatch`` inline at its single dispatch point, in stream order, and
skips it entirely when ``has_handlers`` is false, so an unused hook set costs nothing per
delta. The per-type handler lists are computed once per event class and cached.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, Union

from .events import Event
from .exceptions import UserError

if TYPE_CHECKING:
    from .run_context import RunContext

__all__ = ["AgentHooks", "HookHandler"]

_logger = logging.getLogger(__name__)

HookHandler = Callable[[Any, "RunContext[Any]"], Union[None, Awaitable[None]]]
"""``handler(event, ctx)``, sync or async. ``event`` is typed ``Any`` so a handler can
annotate the exact event class it subscribes to."""

_H = TypeVar("_H", bound=Callable[..., Any])

_EventTypes = Union[type[Event], tuple[type[Event], ...]]


class AgentHooks:
    """A set of event handlers for one agent (``Agent(hooks=...)``) or one plugin instance.

    Example::

        hooks = AgentHooks()

        @hooks.on(ToolCallCompleted)
        async def audit(event, ctx): ...
    """

    __slots__ = ("_by_type", "_catch_all", "_typed")

    def __init__(self) -> None:
        self._catch_all: list[HookHandler] = []
        self._typed: list[tuple[tuple[type[Event], ...], HookHandler]] = []
        self._by_type: dict[type[Event], tuple[HookHandler, ...]] = {}

    def __repr__(self) -> str:
        return f"AgentHooks(catch_all={len(self._catch_all)}, typed={len(self._typed)})"

    @property
    def has_handlers(self) -> bool:
        """Whether any handler is registered (the loop skips dispatch when not)."""
        return bool(self._catch_all or self._typed)

    def on(self, *event_types: _EventTypes) -> Callable[[_H], _H]:
        """Decorator subscribing a handler to events that are instances of ``event_types``.

        Accepts classes or tuples of classes: ``@hooks.on(A, B)`` or ``@hooks.on((A, B))``.
        Raises ``UserError`` when given no type or something that is not an event class.
        """
        types = _flatten(event_types)

        def register(handler: _H) -> _H:
            self._typed.append((types, handler))
            self._by_type.clear()
            return handler

        return register

    def on_any(self, handler: _H) -> _H:
        """Decorator subscribing a handler to every event (runs before typed handlers)."""
        self._catch_all.append(handler)
        self._by_type.clear()
        return handler

    def handlers_for(self, event_type: type[Event]) -> tuple[HookHandler, ...]:
        """The handlers an event of ``event_type`` reaches, in call order."""
        handlers = self._by_type.get(event_type)
        if handlers is None:
            typed = [h for types, h in self._typed if issubclass(event_type, types)]
            handlers = (*self._catch_all, *typed)
            self._by_type[event_type] = handlers
        return handlers

    async def dispatch(self, event: Event, ctx: RunContext[Any]) -> None:
        """Call every matching handler in order; a raising handler is logged and skipped."""
        for handler in self.handlers_for(type(event)):
            try:
                outcome = handler(event, ctx)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:  # fail-open boundary: a hook never aborts a run
                _logger.exception(
                    "hook %s raised on %s; skipped", _name_of(handler), type(event).__name__
                )

    @classmethod
    def merge(cls, *hooks: AgentHooks | None) -> AgentHooks:
        """One hook set holding the handlers of ``hooks`` in order (``None`` is skipped).

        Catch-alls of every set still run before any typed handler.
        """
        merged = cls()
        for one in hooks:
            if one is not None:
                merged._catch_all.extend(one._catch_all)
                merged._typed.extend(one._typed)
        return merged


def _flatten(event_types: tuple[_EventTypes, ...]) -> tuple[type[Event], ...]:
    flat: list[object] = []
    for item in event_types:
        if isinstance(item, tuple):
            flat.extend(item)
        else:
            flat.append(item)
    if not flat:
        raise UserError(
            "AgentHooks.on() needs at least one event type",
            hint="use @hooks.on_any to receive every event",
        )
    types: list[type[Event]] = []
    for candidate in flat:
        if not (isinstance(candidate, type) and issubclass(candidate, Event)):
            raise UserError(
                f"AgentHooks.on() takes event classes, got {candidate!r}",
                hint="pass classes from lovia.events, e.g. @hooks.on(ToolCallCompleted)",
            )
        types.append(candidate)
    return tuple(types)


def _name_of(handler: Callable[..., Any]) -> str:
    return getattr(handler, "__qualname__", None) or repr(handler)
