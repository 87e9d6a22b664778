"""The context-policy seam: how the run turns its transcript into each call's view.

A policy is one method, ``compact(req) -> ContextResult``, serving both triggers:

* proactive: before every model call, with ``req.overflow = False``;
* reactive: after a ``ContextOverflowError`` with nothing yet streamed, with
  ``req.overflow = True`` and ``req.reported_window`` set. The loop retries the call once,
  only when the result says ``compacted=True``.

Contract with the run loop:

* The policy must not mutate ``req.entries``. It cannot corrupt the record anyway: a
  proactive request gets a read-only live view of the transcript (no copy per turn), and a
  reactive one a tuple copy.
* ``req.scratch`` is a JSON-safe dict the policy owns. The loop stores it in the run's
  checkpoint head and, when the run succeeds, in its session segment's ``meta`` under
  ``"context"``; a new run on the same session starts with the latest segment's value.
* An optional ``tools()`` method contributes tools (``recall_tool_result``); an explicit
  tool of the same name shadows them silently.
* An optional ``release(run_id)`` method is called when a run ends, so an instance shared
  by many runs can drop that run's in-process state.

The default policy is resolved through the ``lovia.context_policies`` entry-point group
(``Compaction`` from lovia-context registers there); with nothing registered the run uses
``NoopContextPolicy``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .transcript import TranscriptEntry

__all__ = [
    "CompactionRequest",
    "ContextPolicy",
    "ContextResult",
    "NoopContextPolicy",
    "default_context_policy",
]

_log = logging.getLogger("lovia.context_policy")


@dataclass(slots=True, kw_only=True)
class CompactionRequest:
    """What a policy needs to build one view."""

    entries: Sequence[TranscriptEntry]
    """The full transcript (system head, history, this run). Do not mutate."""
    provider: Any = None
    """The provider the view is for (window discovery, token estimation)."""
    model: str | None = None
    tools: Sequence[Any] = ()
    """The tools the request will carry (their schemas cost tokens too)."""
    tool_names: frozenset[str] = frozenset()
    """Names of the tools the agent has (markers mention ``recall_tool_result`` only if present)."""
    last_input_tokens: int | None = None
    """The provider's real input tokens for the previous call (calibration)."""
    overflow: bool = False
    reported_window: int | None = None
    scratch: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    run_id: str | None = None


@dataclass(slots=True, kw_only=True)
class ContextResult:
    """A view and what happened building it.

    ``changed``: the view differs from the transcript. ``compacted``: the policy made new
    decisions this call (the reactive retry requires it).
    """

    entries: Sequence[TranscriptEntry]
    changed: bool = False
    compacted: bool = False
    reason: str | None = None
    summary: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    detail: tuple[str, ...] = ()


class ContextPolicy(Protocol):
    """Builds the per-call view from the transcript (see the module docstring)."""

    async def compact(self, req: CompactionRequest) -> ContextResult: ...


class NoopContextPolicy:
    """Sends the transcript as is (returns the same sequence object)."""

    async def compact(self, req: CompactionRequest) -> ContextResult:
        return ContextResult(entries=req.entries)

    def __repr__(self) -> str:
        return "NoopContextPolicy()"


def default_context_policy() -> ContextPolicy:
    """A fresh instance of the registered default policy, or ``NoopContextPolicy``."""
    from .registry import CONTEXT_POLICIES, entry_points_of

    eps = entry_points_of(CONTEXT_POLICIES)
    if not eps:
        _log.debug("no lovia.context_policies entry point is installed; using NoopContextPolicy")
        return NoopContextPolicy()
    name = "compaction" if "compaction" in eps else sorted(eps)[0]
    factory = eps[name].load()
    policy: ContextPolicy = factory()
    return policy
