"""Checks: what a sample's ``RunResult`` must satisfy, and how checks combine.

A check is any callable ``(RunResult) -> CheckResult | bool``, sync or async. ``run_check``
is the one place a check is called, and it never raises (except for task cancellation):

* a ``bool`` becomes a ``CheckResult`` with score 1.0 or 0.0;
* a returned ``CheckResult`` passes through unchanged;
* a raising check fails *itself*, with the exception as the reason, and the other checks of
  the sample still run (this is the fail-open boundary of lovia-eval).

The matchers here are deterministic. Text matchers stringify the output (a structured
output becomes its JSON). Data matchers (``matches``, ``tool_called_with``) use a recursive
subset match: every key of the spec must be present and match, extra keys are ignored, and
lists must have the same length and match item by item.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union

from lovia.exceptions import UserError
from lovia.transcript import ToolCallEntry, ToolResultEntry, to_json_safe

if TYPE_CHECKING:
    from lovia.runtime.result import RunResult

__all__ = [
    "Check",
    "CheckOutcome",
    "CheckResult",
    "Matcher",
    "all_of",
    "any_of",
    "check_name",
    "contains",
    "equals",
    "matches",
    "max_tokens",
    "max_turns",
    "no_error",
    "not_contains",
    "output_text",
    "regex",
    "run_check",
    "subset_mismatch",
    "tool_called",
    "tool_called_with",
    "tool_not_called",
    "tool_order",
    "weighted",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict of one check on one sample."""

    name: str
    """The check's name (a matcher's name, or a function's ``__name__``)."""
    passed: bool
    score: float = 1.0
    """In ``[0, 1]``; a bool check scores 1.0 or 0.0."""
    reason: str = ""
    """Why it failed (or what the judge said); empty for a plain pass."""


CheckOutcome = Union[CheckResult, bool]
"""What a check returns: a ``CheckResult`` or a plain ``bool``."""


class Check(Protocol):
    """The check seam: any callable ``(RunResult) -> CheckResult | bool``, sync or async.

    Structural, so a plain function (``def short(result) -> bool``) or an ``async def`` is
    a check as written; ``Matcher`` is the built-in, named implementation.
    """

    def __call__(self, result: RunResult[Any], /) -> CheckOutcome | Awaitable[CheckOutcome]: ...


@dataclass(frozen=True, eq=False)
class Matcher:
    """A named check: what every built-in matcher and combinator returns.

    Hashable by identity, so matchers can be the keys of ``weighted({...})``.
    """

    name: str
    fn: Callable[[RunResult[Any]], CheckOutcome | Awaitable[CheckOutcome]]

    def __call__(self, result: RunResult[Any]) -> CheckOutcome | Awaitable[CheckOutcome]:
        return self.fn(result)

    def __repr__(self) -> str:
        return self.name


def check_name(check: Check) -> str:
    """A check's display name: ``Matcher.name``, else the function's ``__name__``."""
    if isinstance(check, Matcher):
        return check.name
    return str(getattr(check, "__name__", None) or type(check).__name__)


async def run_check(check: Check, result: RunResult[Any]) -> CheckResult:
    """Run ``check`` on ``result``; never raises for a failing or buggy check."""
    name = check_name(check)
    try:
        outcome = check(result)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except Exception as exc:  # fail-open boundary: a buggy check fails only itself
        logger.info("eval check %r raised", name, exc_info=True)
        return CheckResult(name, False, 0.0, f"check raised {type(exc).__name__}: {exc}")
    if isinstance(outcome, CheckResult):
        return outcome
    if isinstance(outcome, bool):
        return CheckResult(name, outcome, 1.0 if outcome else 0.0)
    return CheckResult(
        name,
        False,
        0.0,
        f"check returned {type(outcome).__name__}, expected a CheckResult or a bool",
    )


def _verdict(name: str, passed: bool, reason: str) -> CheckResult:
    return CheckResult(name, passed, 1.0 if passed else 0.0, "" if passed else reason)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- text matchers -----------------------------------------------------------------------


def output_text(output: Any) -> str:
    """The output as text: a string as is, structured data as JSON, anything else ``str()``."""
    if isinstance(output, str):
        return output
    try:
        return json.dumps(to_json_safe(output), ensure_ascii=False, sort_keys=True)
    except TypeError:
        return str(output)


def contains(value: str, *, ignore_case: bool = False) -> Matcher:
    """Passes when the stringified output contains ``value``."""
    name = f"contains({value!r})"

    def check(result: RunResult[Any]) -> CheckResult:
        text = output_text(result.output)
        found = value.lower() in text.lower() if ignore_case else value in text
        return _verdict(name, found, f"{value!r} not found in {_clip(text)!r}")

    return Matcher(name, check)


def not_contains(value: str, *, ignore_case: bool = False) -> Matcher:
    """Passes when the stringified output does not contain ``value``."""
    name = f"not_contains({value!r})"

    def check(result: RunResult[Any]) -> CheckResult:
        text = output_text(result.output)
        found = value.lower() in text.lower() if ignore_case else value in text
        return _verdict(name, not found, f"{value!r} found in {_clip(text)!r}")

    return Matcher(name, check)


def regex(pattern: str, flags: int = 0) -> Matcher:
    """Passes when ``pattern`` is found anywhere in the stringified output (``re.search``).

    The pattern is compiled here, so a bad pattern raises ``UserError`` when the suite is built.
    """
    try:
        compiled = re.compile(pattern, flags)
    except re.error as exc:
        raise UserError(f"regex({pattern!r}): {exc}", hint="fix the regular expression") from exc
    name = f"regex({pattern!r})"

    def check(result: RunResult[Any]) -> CheckResult:
        text = output_text(result.output)
        return _verdict(name, bool(compiled.search(text)), f"no match in {_clip(text)!r}")

    return Matcher(name, check)


def equals(expected: Any) -> Matcher:
    """Passes when the output equals ``expected`` (``==`` on the value itself)."""
    name = f"equals({_clip(repr(expected), 40)})"

    def check(result: RunResult[Any]) -> CheckResult:
        ok = bool(result.output == expected)
        return _verdict(name, ok, f"got {_clip(repr(result.output))}")

    return Matcher(name, check)


# -- data matchers -----------------------------------------------------------------------


def subset_mismatch(spec: Any, actual: Any, path: str = "$") -> str | None:
    """Where ``actual`` fails the recursive subset match against ``spec``; ``None`` if it matches.

    A mapping needs every key of ``spec`` (extras ignored), a list or tuple needs the same
    length, a callable leaf is a predicate, and any other leaf compares with ``==``.
    """
    if isinstance(spec, Mapping):
        if not isinstance(actual, Mapping):
            return f"{path}: expected a mapping, got {type(actual).__name__}"
        for key, sub in spec.items():
            if key not in actual:
                return f"{path}.{key}: missing"
            miss = subset_mismatch(sub, actual[key], f"{path}.{key}")
            if miss:
                return miss
        return None
    if isinstance(spec, (list, tuple)):
        if not isinstance(actual, (list, tuple)):
            return f"{path}: expected a list, got {type(actual).__name__}"
        if len(spec) != len(actual):
            return f"{path}: expected {len(spec)} items, got {len(actual)}"
        for i, (sub, item) in enumerate(zip(spec, actual, strict=True)):
            miss = subset_mismatch(sub, item, f"{path}[{i}]")
            if miss:
                return miss
        return None
    if callable(spec):
        return None if spec(actual) else f"{path}: predicate rejected {_clip(repr(actual), 40)}"
    if spec == actual:
        return None
    return f"{path}: expected {_clip(repr(spec), 40)}, got {_clip(repr(actual), 40)}"


def matches(spec: Any, *, name: str | None = None) -> Matcher:
    """Passes when the output matches ``spec``: a recursive subset spec or a predicate.

    A predicate ``spec(output) -> bool`` sees the output itself. A spec is matched against
    the output as JSON-safe data (a pydantic model or dataclass becomes its fields); a
    mapping spec against plain text fails.
    """
    label = name or f"matches({_clip(repr(spec), 40)})"

    def check(result: RunResult[Any]) -> CheckResult:
        if callable(spec) and not isinstance(spec, (Mapping, list, tuple)):
            return _verdict(label, bool(spec(result.output)), "predicate returned false")
        try:
            actual = to_json_safe(result.output)
        except TypeError:
            actual = result.output
        miss = subset_mismatch(spec, actual)
        return _verdict(label, miss is None, miss or "")

    return Matcher(label, check)


# -- tool matchers -----------------------------------------------------------------------


def _calls(result: RunResult[Any]) -> list[ToolCallEntry]:
    return [e for e in result.entries if isinstance(e, ToolCallEntry)]


def tool_called(name: str) -> Matcher:
    """Passes when the run called the tool ``name`` at least once."""
    label = f"tool_called({name!r})"

    def check(result: RunResult[Any]) -> CheckResult:
        called = [c.name for c in _calls(result)]
        return _verdict(label, name in called, f"{name!r} was not called (called: {called})")

    return Matcher(label, check)


def tool_not_called(name: str) -> Matcher:
    """Passes when the run never called the tool ``name``."""
    label = f"tool_not_called({name!r})"

    def check(result: RunResult[Any]) -> CheckResult:
        n = sum(1 for c in _calls(result) if c.name == name)
        return _verdict(label, n == 0, f"{name!r} was called {n} time(s)")

    return Matcher(label, check)


def tool_called_with(name: str, arguments: Mapping[str, Any]) -> Matcher:
    """Passes when some call of ``name`` has arguments matching ``arguments`` (subset match).

    The call's JSON arguments are parsed first; a call whose arguments are not valid JSON
    never matches.
    """
    label = f"tool_called_with({name!r}, {_clip(repr(dict(arguments)), 40)})"

    def check(result: RunResult[Any]) -> CheckResult:
        misses = []
        for c in _calls(result):
            if c.name != name:
                continue
            try:
                parsed = json.loads(c.arguments)
            except ValueError:
                misses.append(f"{c.call_id}: arguments are not JSON")
                continue
            miss = subset_mismatch(arguments, parsed)
            if miss is None:
                return _verdict(label, True, "")
            misses.append(f"{c.call_id}: {miss}")
        if not misses:
            return _verdict(label, False, f"{name!r} was not called")
        return _verdict(label, False, "no call matched: " + "; ".join(misses))

    return Matcher(label, check)


def tool_order(*names: str, exact: bool = False) -> Matcher:
    """Passes when the tools in ``names`` were called in that order.

    By default other calls may come before, between or after them (a subsequence); with
    ``exact=True`` the run's calls must be exactly ``names``.
    """
    label = f"tool_order({', '.join(repr(n) for n in names)}{', exact=True' if exact else ''})"

    def check(result: RunResult[Any]) -> CheckResult:
        called = [c.name for c in _calls(result)]
        if exact:
            ok = called == list(names)
        else:
            remaining = iter(called)
            ok = all(any(n == c for c in remaining) for n in names)
        return _verdict(label, ok, f"calls were {called}")

    return Matcher(label, check)


# -- run-shape matchers ------------------------------------------------------------------


def max_turns(n: int) -> Matcher:
    """Passes when the run took at most ``n`` model calls (inclusive)."""
    label = f"max_turns({n})"
    return Matcher(
        label, lambda r: _verdict(label, r.turns <= n, f"took {r.turns} turns, limit {n}")
    )


def max_tokens(n: int) -> Matcher:
    """Passes when the run used at most ``n`` tokens in total, input plus output (inclusive)."""
    label = f"max_tokens({n})"

    def check(result: RunResult[Any]) -> CheckResult:
        used = result.usage.total_tokens
        return _verdict(label, used <= n, f"used {used} tokens, limit {n}")

    return Matcher(label, check)


def no_error() -> Matcher:
    """Passes when no tool call returned an error result (looks only at tool errors)."""
    label = "no_error()"

    def check(result: RunResult[Any]) -> CheckResult:
        errors = [e for e in result.entries if isinstance(e, ToolResultEntry) and e.is_error]
        first = errors[0].output if errors else ""
        return _verdict(label, not errors, f"{len(errors)} tool error(s), first: {_clip(first)}")

    return Matcher(label, check)


# -- composition -------------------------------------------------------------------------


async def _run_all(checks: Sequence[Check], result: RunResult[Any]) -> list[CheckResult]:
    # Sequential on purpose: children are usually cheap, and a judge child inside a
    # combinator should not multiply the suite's concurrency behind the caller's back.
    return [await run_check(c, result) for c in checks]


def _failures(results: Sequence[CheckResult]) -> str:
    return "; ".join(f"{r.name}: {r.reason or 'failed'}" for r in results if not r.passed)


def all_of(*checks: Check, name: str | None = None) -> Matcher:
    """Passes when every child passes (vacuously true with none); the score is the mean."""
    label = name or f"all_of({', '.join(check_name(c) for c in checks)})"

    async def check(result: RunResult[Any]) -> CheckResult:
        results = await _run_all(checks, result)
        if not results:
            return CheckResult(label, True, 1.0)
        score = sum(r.score for r in results) / len(results)
        passed = all(r.passed for r in results)
        return CheckResult(label, passed, score, "" if passed else _failures(results))

    return Matcher(label, check)


def any_of(*checks: Check, name: str | None = None) -> Matcher:
    """Passes when at least one child passes; the score is the best child's.

    With no children it fails, with a reason saying so.
    """
    label = name or f"any_of({', '.join(check_name(c) for c in checks)})"

    async def check(result: RunResult[Any]) -> CheckResult:
        if not checks:
            return CheckResult(label, False, 0.0, "any_of() was given no checks")
        results = await _run_all(checks, result)
        passed = any(r.passed for r in results)
        score = max(r.score for r in results)
        return CheckResult(label, passed, score, "" if passed else _failures(results))

    return Matcher(label, check)


def weighted(
    weights: Mapping[Check, float], *, threshold: float = 0.7, name: str | None = None
) -> Matcher:
    """The weighted mean of the children's scores; passes when it reaches ``threshold``.

    A child that raises scores 0. Weights must be finite and non-negative with a positive
    sum, and ``threshold`` must lie in ``[0, 1]``; otherwise ``UserError`` is raised here.
    """
    items = list(weights.items())
    if not items:
        raise UserError("weighted() needs at least one check", hint="pass {check: weight, ...}")
    for child, w in items:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise UserError(
                f"weighted(): the weight of {check_name(child)} must be a finite number >= 0, "
                f"got {w!r}",
                hint="use non-negative numbers such as 1, 2 or 0.5",
            )
    total = float(sum(w for _, w in items))
    if total <= 0:
        raise UserError("weighted(): the weights sum to 0", hint="give some check a weight > 0")
    _check_unit("weighted(): threshold", threshold)
    label = name or f"weighted({', '.join(f'{check_name(c)}={w:g}' for c, w in items)})"

    async def check(result: RunResult[Any]) -> CheckResult:
        results = await _run_all([c for c, _ in items], result)
        score = sum(r.score * w for r, (_, w) in zip(results, items, strict=True)) / total
        passed = score >= threshold
        reason = f"score {score:.2f} vs threshold {threshold:.2f}"
        if not passed:
            reason += f"; {_failures(results)}"
        return CheckResult(label, passed, score, reason)

    return Matcher(label, check)


def _check_unit(what: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise UserError(f"{what} must be a number in [0, 1], got {value!r}", hint="e.g. 0.7")
