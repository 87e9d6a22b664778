"""Checks and matchers against hand-built RunResults (no run needed)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from lovia import RunResult
from lovia.eval import (
    CheckResult,
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
from lovia.exceptions import UserError

from .eval_support import result_of


async def test_a_bool_function_is_a_check_named_after_itself() -> None:
    def is_short(result: RunResult[Any]) -> bool:
        return len(result.output) < 5

    assert await run_check(is_short, result_of("hi")) == CheckResult("is_short", True, 1.0, "")
    assert await run_check(is_short, result_of("too long")) == CheckResult(
        "is_short", False, 0.0, ""
    )


async def test_an_async_check_returning_a_check_result_passes_it_through() -> None:
    verdict = CheckResult("mine", False, 0.25, "custom reason")

    async def custom(result: RunResult[Any]) -> CheckResult:
        return verdict

    assert await run_check(custom, result_of("x")) is verdict


async def test_a_raising_check_fails_itself_with_the_exception_as_reason() -> None:
    def broken(result: RunResult[Any]) -> bool:
        raise ZeroDivisionError("division by zero")

    got = await run_check(broken, result_of("x"))
    assert got == CheckResult(
        "broken", False, 0.0, "check raised ZeroDivisionError: division by zero"
    )


async def test_a_check_returning_something_else_fails_with_a_clear_reason() -> None:
    got = await run_check(lambda r: "yes", result_of("x"))  # type: ignore[arg-type]  # deliberately not a check outcome
    assert not got.passed
    assert got.reason == "check returned str, expected a CheckResult or a bool"


@pytest.mark.parametrize(
    ("check", "output", "passed"),
    [
        (contains("Paris"), "It is Paris.", True),
        (contains("paris"), "It is Paris.", False),
        (contains("paris", ignore_case=True), "It is Paris.", True),
        (not_contains("London"), "It is Paris.", True),
        (not_contains("LONDON", ignore_case=True), "london", False),
        (regex(r"\b\d{4}\b"), "in 1999 it was", True),
        (regex(r"^done$", re.M), "step\ndone\n", True),
        (regex(r"^\d+$"), "12a", False),
        (equals("42"), "42", True),
        (equals(42), "42", False),
        (contains('"city": "Paris"'), {"city": "Paris"}, True),  # structured output as JSON
    ],
    ids=lambda v: repr(v)[:30],
)
async def test_text_matchers(check: Any, output: Any, passed: bool) -> None:
    assert (await run_check(check, result_of(output))).passed is passed


async def test_a_failing_text_matcher_says_what_it_saw() -> None:
    got = await run_check(contains("Rome"), result_of("It is Paris."))
    assert got == CheckResult("contains('Rome')", False, 0.0, "'Rome' not found in 'It is Paris.'")


def test_a_bad_regex_is_a_user_error_when_the_suite_is_built() -> None:
    with pytest.raises(UserError, match=r"regex\('\('\)"):
        regex("(")


@dataclass
class City:
    name: str
    tags: list[str]
    population: int


@pytest.mark.parametrize(
    ("spec", "output", "reason"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, None),  # extra fields ignored
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2], "c": 0}}, None),
        ({"a": [1]}, {"a": [1, 2]}, "$.a: expected 1 items, got 2"),  # list lengths exact
        ({"a": 1}, {"b": 1}, "$.a: missing"),
        ({"a": 1}, "a: 1", "$: expected a mapping, got str"),  # a mapping against text fails
        ({"name": "Oslo", "tags": ["cold"]}, City("Oslo", ["cold"], 700_000), None),
        ({"population": lambda n: n > 1_000_000}, City("Oslo", [], 700_000), "$.population"),
    ],
    ids=["extra", "nested", "list-length", "missing", "text", "dataclass", "predicate-leaf"],
)
async def test_matches_is_a_recursive_subset_match(
    spec: Any, output: Any, reason: str | None
) -> None:
    got = await run_check(matches(spec), result_of(output))
    assert got.passed is (reason is None)
    if reason is not None:
        assert got.reason.startswith(reason)


async def test_matches_takes_a_predicate_over_the_output_itself() -> None:
    check = matches(lambda out: isinstance(out, City) and out.population > 100, name="big")
    assert (await run_check(check, result_of(City("Oslo", [], 700_000)))).passed
    assert not (await run_check(check, result_of("Oslo"))).passed


WEATHER = ("weather", '{"city": "Paris", "units": {"temp": "C"}, "days": 3}')
SEARCH = ("search", '{"q": "paris"}')


@pytest.mark.parametrize(
    ("check", "passed"),
    [
        (tool_called("weather"), True),
        (tool_called("stocks"), False),
        (tool_not_called("stocks"), True),
        (tool_not_called("search"), False),
        (tool_called_with("weather", {"city": "Paris"}), True),
        (tool_called_with("weather", {"units": {"temp": "C"}}), True),
        (tool_called_with("weather", {"city": "Rome"}), False),
        (tool_called_with("search", {"city": "Paris"}), False),
        (tool_order("search", "weather"), True),
        (tool_order("weather", "search"), True),  # the second search comes after weather
        (tool_order("weather", "weather"), False),
        (tool_order("weather", "search", "weather"), False),
        (tool_order("search", "weather", exact=True), False),  # a third call was made
        (tool_order("search", "weather", "search", exact=True), True),
        (tool_order(), True),
    ],
    ids=lambda v: repr(v)[:50],
)
async def test_tool_matchers(check: Any, passed: bool) -> None:
    result = result_of("done", calls=[SEARCH, WEATHER, SEARCH])
    assert (await run_check(check, result)).passed is passed


async def test_tool_called_with_explains_each_call_that_did_not_match() -> None:
    result = result_of("x", calls=[("weather", '{"city": "Rome"}'), ("weather", "{not json")])
    got = await run_check(tool_called_with("weather", {"city": "Paris"}), result)
    assert got.reason == (
        "no call matched: c0: $.city: expected 'Paris', got 'Rome'; c1: arguments are not JSON"
    )


@pytest.mark.parametrize(
    ("check", "passed"),
    [
        (max_turns(3), True),  # boundaries are inclusive
        (max_turns(2), False),
        (max_tokens(150), True),
        (max_tokens(149), False),
    ],
    ids=["turns-at-limit", "turns-over", "tokens-at-limit", "tokens-over"],
)
async def test_run_shape_matchers_are_inclusive(check: Any, passed: bool) -> None:
    assert (await run_check(check, result_of("x", turns=3, tokens=(100, 50)))).passed is passed


async def test_no_error_looks_only_at_tool_errors() -> None:
    clean = result_of("error: the word is in the output", calls=[SEARCH])
    assert (await run_check(no_error(), clean)).passed
    failed = await run_check(no_error(), result_of("fine", calls=[SEARCH, WEATHER], errors=1))
    assert failed == CheckResult("no_error()", False, 0.0, "1 tool error(s), first: boom")


# -- composition ---------------------------------------------------------------------------


def _boom(result: RunResult[Any]) -> bool:
    raise RuntimeError("bug")


async def test_all_of_with_nothing_is_vacuously_true_and_any_of_with_nothing_fails() -> None:
    assert await run_check(all_of(), result_of("x")) == CheckResult("all_of()", True, 1.0, "")
    got = await run_check(any_of(), result_of("x"))
    assert (got.passed, got.reason) == (False, "any_of() was given no checks")


async def test_all_of_and_any_of_combine_children_and_report_the_failures() -> None:
    result = result_of("Paris")
    both = await run_check(all_of(contains("Paris"), contains("Rome"), name="both"), result)
    assert (both.name, both.passed, both.score) == ("both", False, 0.5)
    assert both.reason == "contains('Rome'): 'Rome' not found in 'Paris'"
    either = await run_check(any_of(contains("Rome"), contains("Paris")), result)
    assert (either.passed, either.score) == (True, 1.0)


async def test_weighted_scores_the_weighted_mean_and_a_buggy_child_contributes_zero() -> None:
    check = weighted({contains("Paris"): 3, _boom: 1}, threshold=0.7)
    got = await run_check(check, result_of("Paris"))
    assert (got.passed, got.score) == (True, 0.75)
    strict = await run_check(weighted({contains("Paris"): 1, _boom: 1}), result_of("Paris"))
    assert (strict.passed, strict.score) == (False, 0.5)
    assert "_boom: check raised RuntimeError: bug" in strict.reason


@pytest.mark.parametrize(
    ("weights", "threshold", "message"),
    [
        ({}, 0.7, "at least one check"),
        ({contains("a"): -1}, 0.7, "finite number >= 0"),
        ({contains("a"): float("nan")}, 0.7, "finite number >= 0"),
        ({contains("a"): 0}, 0.7, "sum to 0"),
        ({contains("a"): 1}, 1.5, r"threshold must be a number in \[0, 1\]"),
    ],
    ids=["empty", "negative", "nan", "zero-sum", "threshold"],
)
def test_weighted_validates_weights_and_threshold(
    weights: dict[Any, float], threshold: float, message: str
) -> None:
    with pytest.raises(UserError, match=message):
        weighted(weights, threshold=threshold)
