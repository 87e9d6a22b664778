"""lovia.context: view-only context compaction with recall (distribution lovia-context).

The transcript and the session keep everything; only the per-call view shrinks. See
``Compaction`` for the default policy and ``render_view`` for how a view is built from the
transcript and the sticky decisions.
"""

from __future__ import annotations

from lovia.tools.recall import make_recall_tool, result_digest

from .calibration import Calibration
from .compaction import Compaction
from .policy import (
    CompactionRequest,
    ContextPolicy,
    ContextResult,
    NoopContextPolicy,
    default_context_policy,
)
from .prompts import FOLD_TEMPLATE, REQUIRED_SECTIONS, SUMMARY_SYSTEM_PROMPT, SUMMARY_WRAPPER
from .render import (
    clear_marker,
    offload_marker,
    omission_marker,
    pair_safe_cuts,
    protected_tail_start,
    render_view,
    summary_entry,
)
from .stages import ClearToolResults, OffloadToolResults, Stage, StageContext, SummarizeHistory
from .state import CompactionState, OffloadRecord, OmissionState, SummaryState, fingerprint
from .stores import FileResultStore, InMemoryResultStore, ResultStore
from .summarizer import (
    LLMSummarizer,
    SummarizationError,
    Summarizer,
    transcript_to_text,
)
from .tokens import ContextConfigError, TokenBudget, TokenCounter
from .window import window_key

__all__ = [
    "Calibration",
    "ClearToolResults",
    "Compaction",
    "CompactionRequest",
    "CompactionState",
    "ContextConfigError",
    "ContextPolicy",
    "ContextResult",
    "FOLD_TEMPLATE",
    "FileResultStore",
    "InMemoryResultStore",
    "LLMSummarizer",
    "NoopContextPolicy",
    "OffloadRecord",
    "OffloadToolResults",
    "OmissionState",
    "REQUIRED_SECTIONS",
    "ResultStore",
    "SUMMARY_SYSTEM_PROMPT",
    "SUMMARY_WRAPPER",
    "Stage",
    "StageContext",
    "SummarizationError",
    "SummarizeHistory",
    "Summarizer",
    "SummaryState",
    "TokenBudget",
    "TokenCounter",
    "clear_marker",
    "default_context_policy",
    "fingerprint",
    "make_recall_tool",
    "offload_marker",
    "omission_marker",
    "pair_safe_cuts",
    "protected_tail_start",
    "render_view",
    "result_digest",
    "summary_entry",
    "transcript_to_text",
    "window_key",
]
