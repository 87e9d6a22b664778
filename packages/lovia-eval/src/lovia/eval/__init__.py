"""lovia.eval (distribution lovia-eval): declarative evaluations of agents.

Cases and checks go in, ``evaluate()`` runs them (sampled, concurrently, cancellable) and a
``Report`` comes out, which round-trips through JSON and diffs against a baseline. An LLM
judge covers what a deterministic check cannot; record and replay turns real runs into
offline, deterministic cases. ``lovia eval SUITE.py`` runs a suite from the command line.
See docs/eval.md.
"""

from __future__ import annotations

from .checks import (
    Check,
    CheckResult,
    Matcher,
    all_of,
    any_of,
    contains,
    equals,
    matches,
    max_tokens,
    max_turns,
    no_error,
    not_contains,
    regex,
    run_check,
    tool_called,
    tool_called_with,
    tool_not_called,
    tool_order,
    weighted,
)
from .errors import (
    DuplicateCaseError,
    EvalError,
    RecordingError,
    RecordingMissError,
    ReportError,
    SuiteError,
)
from .judge import Verdict, llm_judge
from .progress import PlainProgress, Progress, RichProgress, auto_progress
from .record import (
    Recording,
    RecordingProvider,
    ReplayProvider,
    fork,
    recorded_case,
    request_key,
)
from .report import CaseChange, CaseResult, Diff, Report, SampleResult, pass_at_k, wilson_interval
from .runner import AgentSource, Case, Suite, evaluate

__all__ = [
    "AgentSource",
    "Case",
    "CaseChange",
    "CaseResult",
    "Check",
    "CheckResult",
    "Diff",
    "DuplicateCaseError",
    "EvalError",
    "Matcher",
    "PlainProgress",
    "Progress",
    "Recording",
    "RecordingError",
    "RecordingMissError",
    "RecordingProvider",
    "ReplayProvider",
    "Report",
    "ReportError",
    "RichProgress",
    "SampleResult",
    "Suite",
    "SuiteError",
    "Verdict",
    "all_of",
    "any_of",
    "auto_progress",
    "contains",
    "equals",
    "evaluate",
    "fork",
    "llm_judge",
    "matches",
    "max_tokens",
    "max_turns",
    "no_error",
    "not_contains",
    "pass_at_k",
    "recorded_case",
    "regex",
    "request_key",
    "run_check",
    "tool_called",
    "tool_called_with",
    "tool_not_called",
    "tool_order",
    "weighted",
    "wilson_interval",
]
