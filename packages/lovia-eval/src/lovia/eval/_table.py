"""The plain-text rendering of a ``Report``: a ✓/✗ table, a summary, then why cases failed.

Plain text on purpose (no colour, no terminal library), so ``str(report)`` reads the same in
a terminal, a CI log and a test assertion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .report import CaseResult, Report

_NAME_CHARS = 40
_ERROR_CHARS = 50


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rate(case: CaseResult) -> str:
    n = len(case.samples)
    if n <= 1:
        return f"{case.successes}/{n}"
    low, high = case.interval
    return f"{case.successes}/{n} {case.pass_rate:.0%} [{low:.0%}-{high:.0%}]"


def _cost(cost: float | None) -> str:
    return "-" if cost is None else f"${cost:.4f}"


def render_report(report: Report) -> str:
    header = ("", "case", "pass", "tokens", "time", "cost", "error")
    rows = [
        (
            "✓" if c.passed else "✗",
            _clip(c.name, _NAME_CHARS),
            _rate(c),
            f"{c.tokens:,}",
            f"{c.latency:.2f}s",
            _cost(c.cost),
            _clip(c.error or "", _ERROR_CHARS),
        )
        for c in report.cases
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()

    lines = [line(header), *(line(row) for row in rows)]
    passed = sum(1 for c in report.cases if c.passed)
    low, high = report.interval
    summary = (
        f"{'PASSED' if report.passed else 'FAILED'}: {passed}/{len(report.cases)} cases passed"
        f" · samples {report.sample_pass_rate:.0%} [{low:.0%}-{high:.0%}]"
        f" · {report.tokens:,} tokens · {report.duration:.2f}s · cost {_cost(report.cost)}"
    )
    if report.status != "complete":
        summary += f" · {report.status}"
    lines += ["", summary]
    for c in report.cases:
        if c.passed:
            continue
        for s in c.samples:
            if s.passed:
                continue
            failing = [f"{k.name}: {k.reason or 'failed'}" for k in s.checks if not k.passed]
            why = s.error or "; ".join(failing)
            lines.append(f"  ✗ {c.name} [sample {s.index}]: {_clip(why, 160)}")
            break
    return "\n".join(lines)
