"""Report: pass rates, intervals, pass@k, the JSON round trip, the table and baselines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.eval import (
    Case,
    CaseChange,
    CaseResult,
    CheckResult,
    Diff,
    DuplicateCaseError,
    Report,
    ReportError,
    SampleResult,
    contains,
    evaluate,
    pass_at_k,
    wilson_interval,
)
from lovia.exceptions import UserError
from lovia.messages import Usage

from .eval_support import replying


def sample(passed: bool, index: int = 0, **fields: Any) -> SampleResult:
    return SampleResult(index=index, passed=passed, **fields)


def case(name: str, *verdicts: bool, threshold: float = 1.0) -> CaseResult:
    samples = tuple(sample(v, i) for i, v in enumerate(verdicts))
    return CaseResult(name=name, samples=samples, pass_threshold=threshold)


def test_wilson_interval_matches_the_textbook_values() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    low, high = wilson_interval(5, 5)
    assert high == 1.0 and round(low, 4) == 0.5655


@pytest.mark.parametrize(
    ("c", "n", "k", "expected"),
    [(0, 5, 1, 0.0), (5, 5, 3, 1.0), (1, 5, 1, 0.2), (2, 5, 2, 0.7), (4, 5, 2, 1.0)],
)
def test_pass_at_k_is_the_unbiased_estimator(c: int, n: int, k: int, expected: float) -> None:
    assert pass_at_k(c, n, k) == pytest.approx(expected)


@pytest.mark.parametrize("k", [0, 6])
def test_pass_at_k_rejects_k_outside_1_to_n(k: int) -> None:
    with pytest.raises(UserError, match="1 <= k <= n"):
        case("c", True, False, True, False, True).pass_at_k(k)


def test_case_and_report_rates() -> None:
    report = Report(cases=(case("a", True, True), case("b", True, False), case("c", False)))
    assert [c.passed for c in report.cases] == [True, False, False]
    assert report.pass_rate == pytest.approx(1 / 3)
    assert report.sample_pass_rate == pytest.approx(3 / 5)
    assert report.interval == wilson_interval(3, 5)
    assert not report.passed
    assert Report(cases=(case("a", True),), status="stopped").passed is False


async def test_a_report_round_trips_through_json(tmp_path: Path) -> None:
    cases = [
        Case("q1", [contains("Paris")], model=replying("Paris"), metadata={"tier": 1}, samples=2),
        Case("q2", [contains("Rome")], model=replying("Paris")),
    ]
    report = await evaluate(Agent("a"), cases, price=lambda u: 0.5)
    path = tmp_path / "report.json"
    report.save(path)
    loaded = Report.load(path)
    assert loaded == report  # every field, samples and checks included
    assert loaded.to_dict() == report.to_dict()
    assert json.loads(path.read_text())["version"] == 1


def test_an_output_json_cannot_hold_is_written_as_its_repr() -> None:
    class Odd:
        def __repr__(self) -> str:
            return "<Odd>"

    report = Report(cases=(CaseResult(name="c", samples=(sample(True, output=Odd()),)),))
    data = report.to_dict()
    assert data["cases"][0]["samples"][0]["output"] == "<Odd>"
    assert Report.from_dict(json.loads(json.dumps(data))).cases[0].samples[0].output == "<Odd>"


def _good() -> dict[str, Any]:
    report = Report(
        cases=(
            CaseResult(
                name="c",
                samples=(
                    sample(
                        True,
                        output="x",
                        checks=(CheckResult("k", True, 1.0, ""),),
                        usage=Usage(input_tokens=1),
                        cost=0.1,
                    ),
                ),
            ),
        )
    )
    return report.to_dict()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(version=99), "unsupported report version 99"),
        (lambda d: d.pop("schema"), "not a lovia eval report"),
        (lambda d: d.update(cases={}), "report.cases: expected list, got dict"),
        (lambda d: d["cases"][0].pop("name"), r"report.cases\[0\].name: missing"),
        (
            lambda d: d["cases"][0]["samples"][0].update(passed="yes"),
            r"report.cases\[0\].samples\[0\].passed: expected bool, got str",
        ),
        (
            lambda d: d["cases"][0]["samples"][0].update(latency=True),
            r"samples\[0\].latency: expected a number",
        ),
        (lambda d: d.update(status="weird"), "unknown status 'weird'"),
    ],
    ids=[
        "version",
        "schema",
        "cases-type",
        "missing-name",
        "passed-type",
        "latency-bool",
        "status",
    ],
)
def test_a_malformed_report_is_a_report_error_naming_the_field(mutate: Any, message: str) -> None:
    data = _good()
    mutate(data)
    with pytest.raises(ReportError, match=message):
        Report.from_dict(data)


def test_a_corrupt_report_file_is_a_report_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text('{"schema": "lovia.eval.report", "version": 1, "cases": [', encoding="utf-8")
    with pytest.raises(ReportError, match="baseline.json' is not valid JSON") as info:
        Report.load(path)
    assert info.value.hint == "the file is corrupt; re-run the suite with --save"
    with pytest.raises(ReportError, match="cannot read report"):
        Report.load(tmp_path / "missing.json")


def test_compare_flags_regressions_improvements_added_and_removed() -> None:
    baseline = Report(
        cases=(case("kept", True), case("fixed", False), case("broke", True), case("gone", True))
    )
    current = Report(
        cases=(case("kept", True), case("fixed", True), case("broke", False), case("new", False))
    )
    diff = current.compare(baseline)
    assert diff == Diff(
        regressions=(CaseChange("broke", 1.0, 0.0),),
        improvements=(CaseChange("fixed", 0.0, 1.0),),
        added=("new",),
        removed=("gone",),
    )
    assert not diff.ok
    assert str(diff) == (
        "compared with baseline: REGRESSED\n"
        "  regressed: broke (100% -> 0%)\n"
        "  improved: fixed (0% -> 100%)\n"
        "  added: new\n"
        "  removed: gone"
    )
    assert baseline.compare(baseline).ok


def test_a_sampled_case_regresses_when_its_rate_falls_below_the_threshold() -> None:
    baseline = Report(cases=(case("c", True, True, True, False, threshold=0.7),))
    current = Report(cases=(case("c", True, True, False, False, threshold=0.7),))
    assert current.compare(baseline).regressions == (CaseChange("c", 0.75, 0.5),)


def test_a_baseline_with_duplicate_case_names_is_a_typed_error() -> None:
    baseline = Report(cases=(case("same", True), case("same", False), case("other", True)))
    with pytest.raises(
        DuplicateCaseError, match="the baseline has duplicate case names: 'same'"
    ) as info:
        Report(cases=(case("same", True),)).compare(baseline)
    assert info.value.names == ["same"]
    assert info.value.hint == "give every Case a unique name= so reports can be joined"


def test_str_shows_a_table_with_marks_tokens_time_cost_and_errors() -> None:
    report = Report(
        cases=(
            CaseResult(
                name="greets",
                samples=tuple(
                    sample(
                        True,
                        i,
                        usage=Usage(input_tokens=600, output_tokens=100),
                        latency=0.5,
                        cost=0.001,
                    )
                    for i in range(5)
                ),  # fmt: skip
            ),
            CaseResult(
                name="divides",
                samples=(
                    sample(
                        False, checks=(CheckResult("contains('4')", False, 0.0, "'4' not found"),)
                    ),
                ),
            ),
            CaseResult(name="crashes", samples=(sample(False, error="ProviderError: 503"),)),
        ),
        duration=1.25,
    )
    assert str(report) == "\n".join(
        [
            "   case     pass                 tokens  time   cost     error",
            "✓  greets   5/5 100% [57%-100%]  3,500   0.50s  $0.0050",
            "✗  divides  0/1                  0       0.00s  -",
            "✗  crashes  0/1                  0       0.00s  -        ProviderError: 503",
            "",
            "FAILED: 1/3 cases passed · samples 71% [36%-92%] · 3,500 tokens · 1.25s"
            " · cost $0.0050",
            "  ✗ divides [sample 0]: contains('4'): '4' not found",
            "  ✗ crashes [sample 0]: ProviderError: 503",
        ]
    )
