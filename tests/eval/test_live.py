"""A small eval suite with a judge against the real endpoint in ``LOVIA_LIVE_MODEL``.

Skipped unless ``LOVIA_LIVE_TESTS=1``; run with
``LOVIA_LIVE_TESTS=1 LOVIA_LIVE_MODEL=openai:gpt-4o-mini pytest -m live_provider tests/eval``.
The judge uses the same model unless ``LOVIA_EVAL_JUDGE_MODEL`` names another.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.eval import (
    Case,
    RecordingProvider,
    Report,
    contains,
    evaluate,
    llm_judge,
    recorded_case,
    tool_called_with,
)
from lovia.providers import provider_from_string
from lovia.tools.base import tool

pytestmark = pytest.mark.live_provider

LIVE = os.environ.get("LOVIA_LIVE_TESTS") == "1"
MODEL = os.environ.get("LOVIA_LIVE_MODEL", "").strip()


@pytest.fixture(autouse=True)
def _no_internet() -> Iterator[None]:
    # Overrides the suite-wide guard for this module only: these tests exist to reach the
    # configured endpoint, and they are skipped unless LOVIA_LIVE_TESTS=1.
    yield


@pytest.fixture
def model() -> str:
    if not LIVE:
        pytest.skip("live eval tests run only with LOVIA_LIVE_TESTS=1")
    if not MODEL:
        pytest.fail("LOVIA_LIVE_TESTS=1 but LOVIA_LIVE_MODEL names no model")
    return MODEL


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


AGENT = Agent("calculator", instructions="Always use the add tool to add numbers.", tools=[add])


def _judge_model(model: str) -> str:
    return os.environ.get("LOVIA_EVAL_JUDGE_MODEL") or model


async def test_a_live_suite_with_a_judge_passes(model: str, tmp_path: Path) -> None:
    judge = llm_judge("The answer gives the correct sum, 42.", model=_judge_model(model))
    cases = [
        Case(
            "What is 17 + 25? Use the add tool.",
            [tool_called_with("add", {"a": 17, "b": 25}), contains("42"), judge],
            name="adds",
            model=model,
            timeout=120,
        )
    ]
    report = await evaluate(AGENT, cases)
    assert report.passed, str(report)
    (check_results,) = [s.checks for s in report.cases[0].samples]
    assert 0.7 <= check_results[2].score <= 1.0
    assert report.tokens > 0
    # The report survives its JSON round trip and diffs cleanly against itself as a baseline.
    report.save(tmp_path / "baseline.json")
    diff = report.compare(Report.load(tmp_path / "baseline.json"))
    assert diff.ok and not diff.regressions


async def test_a_live_run_replays_offline(model: str) -> None:
    recorder = RecordingProvider(provider_from_string(model))
    live = await AGENT.clone(model=recorder).run("What is 2 + 40? Use the add tool.")
    case = recorded_case(recorder.recording, [contains("42")], name="replayed")
    report = await evaluate(AGENT, [case])
    replayed: Any = report.cases[0].samples[0].output
    assert report.passed and replayed == live.output
