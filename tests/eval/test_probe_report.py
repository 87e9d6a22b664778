"""A hand-edited baseline whose case threshold is outside [0, 1] is refused, not compared.

``Case`` refuses such a threshold when built, but ``Report.load`` took one from a file: a
baseline edited to ``pass_threshold: 5`` turned its passing case into a failing one, and
``lovia eval --baseline`` then reported the unchanged case as "improved (100% -> 100%)".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lovia.eval import CaseResult, CheckResult, Report, ReportError, SampleResult
from lovia.eval.cli import main
from lovia.messages import Usage

SUITE = """
from lovia import Agent
from lovia.eval import Case, Suite, contains
from lovia.testing import ScriptedProvider, text

suite = Suite(
    agent=Agent("a"),
    cases=[Case("hi", [contains("hi")], name="greets",
                model=lambda: ScriptedProvider([text("hi")]))],
)
"""


def _report_dict(threshold: object) -> dict[str, object]:
    sample = SampleResult(
        index=0,
        passed=True,
        output="hi",
        checks=(CheckResult("k", True),),
        error=None,
        usage=Usage(),
        latency=0.1,
        cost=None,
        turns=1,
    )
    data = Report(cases=(CaseResult(name="greets", samples=(sample,)),)).to_dict()
    data["cases"][0]["pass_threshold"] = threshold
    return data


@pytest.mark.parametrize("threshold", [5, -0.5, float("nan"), float("inf")])
def test_a_threshold_outside_0_1_is_a_report_error(threshold: float) -> None:
    with pytest.raises(ReportError, match=r"report.cases\[0\].pass_threshold"):
        Report.from_dict(_report_dict(threshold))


def test_the_command_refuses_such_a_baseline_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(_report_dict(5)), encoding="utf-8")
    assert main([str(suite), "--baseline", str(baseline), "--no-progress"]) == 2
    out, err = capsys.readouterr()
    assert "pass_threshold" in err and "improved" not in out
