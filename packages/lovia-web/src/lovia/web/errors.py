"""The web layer's typed errors: each carries the HTTP status a route answers with.

Routes raise these (or let the supervisor raise them); one exception handler in ``app.py``
turns them into ``{"detail": ..., "hint": ...}`` bodies, so no route builds an error dict and
no stack trace or internal path reaches a client.
"""

from __future__ import annotations

from lovia.exceptions import LoviaError

__all__ = ["CapacityExceeded", "NotFound", "RunConflict", "WebError"]


class WebError(LoviaError):
    """Base of the web layer's errors; ``status`` is the HTTP status it maps to."""

    status = 400


class NotFound(WebError):
    """An unknown session, run, agent or pending approval."""

    status = 404


class RunConflict(WebError):
    """The action conflicts with the session's state (a run is live, or none is)."""

    status = 409


class CapacityExceeded(WebError):
    """Every background-run slot is taken; the client should retry later."""

    status = 429
