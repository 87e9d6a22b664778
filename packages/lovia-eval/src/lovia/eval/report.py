"""Results of an evaluation: ``SampleResult`` per run, ``CaseResult`` per case, ``Report``.

A report is plain data: it round-trips through JSON (``to_dict``/``from_dict``,
``save``/``load``) under a schema version, and unknown versions are rejected rather than
guessed at. An output that JSON cannot hold is written as its ``repr``. ``compare`` joins
two reports by case name (so names must be unique) and calls a case that passed in the
baseline and fails now a regression; ``Diff.ok`` is true iff there are none.

Pass rates of sampled cases carry a 95% Wilson score interval, which stays inside ``[0, 1]``
and is honest for the small sample counts evals use (the normal approximation is not).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lovia.exceptions import UserError
from lovia.messages import Usage
from lovia.transcript import to_json_safe

from .checks import CheckResult
from .errors import DuplicateCaseError, ReportError

__all__ = [
    "CaseChange",
    "CaseResult",
    "Diff",
    "Report",
    "ReportStatus",
    "SCHEMA_VERSION",
    "SampleResult",
    "pass_at_k",
    "wilson_interval",
]

SCHEMA_VERSION = 1
"""The version written in every report; ``from_dict`` accepts only this one."""

_SCHEMA = "lovia.eval.report"
_Z95 = 1.959963984540054

ReportStatus = Literal["complete", "stopped", "cancelled"]
"""``complete``: every case ran; ``stopped``: ``fail_fast`` stopped after a failing case;
``cancelled``: the evaluation's cancel token fired."""


def wilson_interval(successes: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``n`` (95% by default).

    With ``n == 0`` nothing is known, so the interval is ``(0.0, 1.0)``.
    """
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(successes: int, n: int, k: int) -> float:
    """The unbiased pass@k estimator: the chance that k of the n samples include a pass.

    ``1 - C(n - c, k) / C(n, k)``; raises ``UserError`` unless ``1 <= k <= n``.
    """
    if not 1 <= k <= n:
        raise UserError(f"pass_at_k needs 1 <= k <= n, got k={k}, n={n}", hint="take k <= samples")
    if n - successes < k:
        return 1.0
    return 1.0 - math.comb(n - successes, k) / math.comb(n, k)


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleResult:
    """One run of one case: its checks, or the error that stopped it."""

    index: int
    """The sample's position within its case (0-based)."""
    passed: bool
    """The run succeeded and every check passed."""
    output: Any = None
    """The final output (JSON data after a round trip); ``None`` when the run failed."""
    checks: tuple[CheckResult, ...] = ()
    error: str | None = None
    """``"ErrorType: message"`` when the run (or the agent factory) failed; checks did not run."""
    usage: Usage = field(default_factory=Usage)
    latency: float = 0.0
    """Wall-clock seconds of the run (the checks excluded)."""
    cost: float | None = None
    """``price(usage)``; ``None`` without a price function or when it raised."""
    turns: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """Every sample of one case; passes when its pass rate reaches ``pass_threshold``."""

    name: str
    samples: tuple[SampleResult, ...]
    pass_threshold: float = 1.0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The case's ``metadata``, carried through unchanged."""

    @property
    def successes(self) -> int:
        return sum(1 for s in self.samples if s.passed)

    @property
    def pass_rate(self) -> float:
        """Passed samples over samples (0.0 with no samples)."""
        return self.successes / len(self.samples) if self.samples else 0.0

    @property
    def passed(self) -> bool:
        return bool(self.samples) and self.pass_rate >= self.pass_threshold

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% Wilson interval of ``pass_rate``."""
        return wilson_interval(self.successes, len(self.samples))

    def pass_at_k(self, k: int) -> float:
        """The unbiased pass@k over this case's samples."""
        return pass_at_k(self.successes, len(self.samples), k)

    @property
    def tokens(self) -> int:
        return sum(s.usage.total_tokens for s in self.samples)

    @property
    def latency(self) -> float:
        """Mean seconds per sample."""
        return sum(s.latency for s in self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def cost(self) -> float | None:
        costs = [s.cost for s in self.samples if s.cost is not None]
        return sum(costs) if costs else None

    @property
    def error(self) -> str | None:
        """The first sample error, if any."""
        return next((s.error for s in self.samples if s.error), None)


@dataclass(frozen=True, slots=True)
class CaseChange:
    """A case whose verdict changed between the baseline and this report."""

    name: str
    before: float
    """The baseline's pass rate."""
    after: float


@dataclass(frozen=True, slots=True)
class Diff:
    """What ``Report.compare(baseline)`` found, joined by case name."""

    regressions: tuple[CaseChange, ...] = ()
    """Cases that passed in the baseline and fail now."""
    improvements: tuple[CaseChange, ...] = ()
    """Cases that failed in the baseline and pass now."""
    added: tuple[str, ...] = ()
    """Cases new in this report."""
    removed: tuple[str, ...] = ()
    """Cases only the baseline has."""

    @property
    def ok(self) -> bool:
        """True iff there is no regression (added and removed cases do not count)."""
        return not self.regressions

    def __str__(self) -> str:
        lines = [f"compared with baseline: {'ok' if self.ok else 'REGRESSED'}"]
        for label, changes in (("regressed", self.regressions), ("improved", self.improvements)):
            for c in changes:
                lines.append(f"  {label}: {c.name} ({c.before:.0%} -> {c.after:.0%})")
        lines += [f"  added: {n}" for n in self.added]
        lines += [f"  removed: {n}" for n in self.removed]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """The outcome of ``evaluate()``: every case, in the order the cases were given."""

    cases: tuple[CaseResult, ...]
    status: ReportStatus = "complete"
    duration: float = 0.0
    """Wall-clock seconds of the whole evaluation."""

    @property
    def passed(self) -> bool:
        """Every case passed and the evaluation ran to the end (an empty suite passes)."""
        return self.status == "complete" and all(c.passed for c in self.cases)

    @property
    def pass_rate(self) -> float:
        """Passed cases over cases (1.0 for an empty suite)."""
        return sum(1 for c in self.cases if c.passed) / len(self.cases) if self.cases else 1.0

    @property
    def samples(self) -> list[SampleResult]:
        return [s for c in self.cases for s in c.samples]

    @property
    def sample_pass_rate(self) -> float:
        samples = self.samples
        return sum(1 for s in samples if s.passed) / len(samples) if samples else 1.0

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% Wilson interval of ``sample_pass_rate``."""
        samples = self.samples
        return wilson_interval(sum(1 for s in samples if s.passed), len(samples))

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.cases)

    @property
    def cost(self) -> float | None:
        costs = [c.cost for c in self.cases if c.cost is not None]
        return sum(costs) if costs else None

    def case(self, name: str) -> CaseResult:
        """The case named ``name``; raises ``KeyError`` when there is none."""
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(name)

    # -- baselines --------------------------------------------------------------------

    def by_name(self, *, label: str = "the report") -> dict[str, CaseResult]:
        """The cases keyed by name; raises ``DuplicateCaseError`` when two share a name."""
        counts = Counter(c.name for c in self.cases)
        dupes = sorted(n for n, k in counts.items() if k > 1)
        if dupes:
            raise DuplicateCaseError(
                f"{label} has duplicate case names: {', '.join(repr(n) for n in dupes)}",
                names=dupes,
                hint="give every Case a unique name= so reports can be joined",
            )
        return {c.name: c for c in self.cases}

    def compare(self, baseline: Report) -> Diff:
        """Join with ``baseline`` by case name; raises ``DuplicateCaseError`` on a shared name."""
        before = baseline.by_name(label="the baseline")
        after = self.by_name(label="this report")
        regressions: list[CaseChange] = []
        improvements: list[CaseChange] = []
        for name, now in after.items():
            then = before.get(name)
            if then is None or then.passed == now.passed:
                continue
            change = CaseChange(name, then.pass_rate, now.pass_rate)
            (improvements if now.passed else regressions).append(change)
        return Diff(
            regressions=tuple(regressions),
            improvements=tuple(improvements),
            added=tuple(n for n in after if n not in before),
            removed=tuple(n for n in before if n not in after),
        )

    # -- JSON -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data under the schema version; outputs JSON cannot hold become ``repr``."""
        return {
            "schema": _SCHEMA,
            "version": SCHEMA_VERSION,
            "status": self.status,
            "duration": self.duration,
            "summary": {
                "passed": self.passed,
                "pass_rate": self.pass_rate,
                "sample_pass_rate": self.sample_pass_rate,
                "tokens": self.tokens,
                "cost": self.cost,
            },
            "cases": [_case_to_dict(c) for c in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        """Rebuild a report; raises ``ReportError`` naming the first bad field."""
        r = _Reader(data, "report")
        if r.data.get("schema") != _SCHEMA:
            raise ReportError("this is not a lovia eval report (no 'schema' marker)")
        version = r.get("version", int)
        if version != SCHEMA_VERSION:
            raise ReportError(
                f"unsupported report version {version!r} (this lovia-eval reads {SCHEMA_VERSION})",
                hint="re-run the suite with this lovia-eval and --save a new baseline",
            )
        status = r.get("status", str)
        if status not in ("complete", "stopped", "cancelled"):
            raise ReportError(f"report.status: unknown status {status!r}")
        return cls(
            cases=tuple(_case_from(c) for c in r.items("cases")),
            status=status,
            duration=r.number("duration"),
        )

    def save(self, path: str | Path) -> None:
        """Write the report as JSON (UTF-8, indented)."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False)
        Path(path).write_text(text + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Read a report written by ``save``; raises ``ReportError`` naming the file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ReportError(f"cannot read report {str(path)!r}: {exc.strerror}") from exc
        except ValueError as exc:
            raise ReportError(
                f"report {str(path)!r} is not valid JSON: {exc}",
                hint="the file is corrupt; re-run the suite with --save",
            ) from exc
        try:
            return cls.from_dict(data)
        except ReportError as exc:
            raise ReportError(f"report {str(path)!r}: {exc.message}", hint=exc.hint) from exc

    # -- display ----------------------------------------------------------------------

    def __str__(self) -> str:
        from ._table import render_report

        return render_report(self)


def _json_or_repr(value: Any) -> Any:
    try:
        return to_json_safe(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _case_to_dict(case: CaseResult) -> dict[str, Any]:
    return {
        "name": case.name,
        "pass_threshold": case.pass_threshold,
        "metadata": {str(k): _json_or_repr(v) for k, v in case.metadata.items()},
        "passed": case.passed,
        "pass_rate": case.pass_rate,
        "samples": [
            {
                "index": s.index,
                "passed": s.passed,
                "output": _json_or_repr(s.output),
                "checks": [
                    {"name": c.name, "passed": c.passed, "score": c.score, "reason": c.reason}
                    for c in s.checks
                ],
                "error": s.error,
                "usage": s.usage.to_dict(),
                "latency": s.latency,
                "cost": s.cost,
                "turns": s.turns,
            }
            for s in case.samples
        ],
    }


def _case_from(r: _Reader) -> CaseResult:
    return CaseResult(
        name=r.get("name", str),
        pass_threshold=r.fraction("pass_threshold"),
        metadata=r.get("metadata", dict),
        samples=tuple(_sample_from(s) for s in r.items("samples")),
    )


def _sample_from(r: _Reader) -> SampleResult:
    usage = r.get("usage", dict)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in usage.values()):
        raise ReportError(f"{r.path}.usage: token counts must be integers")
    return SampleResult(
        index=r.get("index", int),
        passed=r.get("passed", bool),
        output=r.data.get("output"),
        checks=tuple(
            CheckResult(
                c.get("name", str), c.get("passed", bool), c.number("score"), c.get("reason", str)
            )
            for c in r.items("checks")
        ),  # fmt: skip
        error=r.optional("error", str),
        usage=Usage.from_dict(usage),
        latency=r.number("latency"),
        cost=r.data.get("cost") if r.data.get("cost") is None else r.number("cost"),
        turns=r.get("turns", int),
    )


class _Reader:
    """Typed access to one JSON object; every miss raises ``ReportError`` with its path."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise ReportError(f"{path}: expected an object, got {type(data).__name__}")
        self.data: dict[str, Any] = data
        self.path = path

    def get(self, key: str, kind: type[Any]) -> Any:
        if key not in self.data:
            raise ReportError(f"{self.path}.{key}: missing")
        value = self.data[key]
        wrong_bool = isinstance(value, bool) and kind is not bool
        if not isinstance(value, kind) or wrong_bool:
            raise ReportError(
                f"{self.path}.{key}: expected {kind.__name__}, got {type(value).__name__}"
            )
        return value

    def optional(self, key: str, kind: type[Any]) -> Any:
        return None if self.data.get(key) is None else self.get(key, kind)

    def number(self, key: str) -> float:
        value = self.data.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ReportError(f"{self.path}.{key}: expected a number, got {value!r}")
        return float(value)

    def fraction(self, key: str) -> float:
        # A hand-edited threshold outside [0, 1] would silently flip the case's verdict.
        value = self.number(key)
        if not 0.0 <= value <= 1.0:  # NaN fails the comparison too
            raise ReportError(f"{self.path}.{key}: expected a number in [0, 1], got {value!r}")
        return value

    def items(self, key: str) -> Sequence[_Reader]:
        values = self.get(key, list)
        return [_Reader(v, f"{self.path}.{key}[{i}]") for i, v in enumerate(values)]
