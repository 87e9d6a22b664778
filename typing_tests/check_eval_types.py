"""Static typing of lovia.eval: plain and async functions are checks as written, matchers and
combinators compose, and ``evaluate()`` returns a ``Report``."""

from __future__ import annotations

from typing import Any

from lovia import Agent, RunResult
from lovia.eval import (
    Case,
    Check,
    CheckResult,
    Matcher,
    Report,
    all_of,
    contains,
    evaluate,
    weighted,
)
from typing_extensions import assert_type


def short(result: RunResult[Any]) -> bool:
    return len(str(result.output)) < 80


async def graded(result: RunResult[Any]) -> CheckResult:
    return CheckResult("graded", True, 0.9, "fine")


checks: list[Check] = [short, graded, contains("x"), lambda r: r.turns < 3]
combined = all_of(short, graded, weighted({contains("a"): 2, short: 1}))
assert_type(combined, Matcher)
case = Case("question", checks, samples=3)


def make_agent() -> Agent[Any]:
    return Agent("a")


async def run_both() -> None:
    assert_type(await evaluate(Agent("a"), [case]), Report)
    assert_type(await evaluate(make_agent, [case], concurrency=2), Report)
