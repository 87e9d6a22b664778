"""The context-policy seam, re-exported from core (``lovia.context_policy``).

One method, ``async compact(req: CompactionRequest) -> ContextResult``, serves both
triggers: proactive (before every model call) and reactive (``req.overflow=True`` after a
``ContextOverflowError``; the loop retries once, only when the result says
``compacted=True``). The request carries the transcript (read-only), the provider, the
tools and their names, ``last_input_tokens``, ``reported_window`` and a JSON-safe
``scratch`` dict the loop round-trips through checkpoints and session meta. An optional
``tools()`` method contributes tools; ``make_recall_tool(store)`` from
``lovia.tools.recall`` is the factory ``Compaction`` uses to ship ``recall_tool_result``.
``NoopContextPolicy`` sends the transcript as is.
"""

from __future__ import annotations

from lovia.context_policy import (
    CompactionRequest,
    ContextPolicy,
    ContextResult,
    NoopContextPolicy,
    default_context_policy,
)

__all__ = [
    "CompactionRequest",
    "ContextPolicy",
    "ContextResult",
    "NoopContextPolicy",
    "default_context_policy",
]
