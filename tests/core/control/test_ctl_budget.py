"""RunBudget: token, tool-call and wall-clock limits with an injected clock."""

from __future__ import annotations

import pytest
from lovia.budget import RunBudget
from lovia.exceptions import BudgetExceeded, UserError
from lovia.messages import Usage


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("limits", "usage", "limit"),
    [
        ({"max_input_tokens": 10}, Usage(input_tokens=11), "max_input_tokens"),
        ({"max_output_tokens": 10}, Usage(output_tokens=11), "max_output_tokens"),
        ({"max_total_tokens": 10}, Usage(input_tokens=6, output_tokens=5), "max_total_tokens"),
    ],
    ids=["input", "output", "total"],
)
def test_check_trips_the_named_token_limit(
    limits: dict[str, int], usage: Usage, limit: str
) -> None:
    budget = RunBudget(**limits)  # type: ignore[arg-type]  # mypy can't tie keys to params
    with pytest.raises(BudgetExceeded) as info:
        budget.check(usage)
    assert info.value.limit == limit
    assert info.value.hint == (
        f"raise {limit} on the RunBudget, or resume the interrupted run with a fresh budget"
    )


def test_usage_exactly_at_a_limit_passes() -> None:
    RunBudget(max_input_tokens=5, max_output_tokens=5, max_total_tokens=10).check(
        Usage(input_tokens=5, output_tokens=5)
    )


def test_no_limits_never_trip() -> None:
    budget = RunBudget()
    budget.check(Usage(input_tokens=10**9, output_tokens=10**9))
    for _ in range(1000):
        budget.count_tool_call()


def test_max_tool_calls_counts_each_requested_call_then_trips() -> None:
    budget = RunBudget(max_tool_calls=2)
    budget.count_tool_call()
    budget.count_tool_call()
    with pytest.raises(BudgetExceeded) as info:
        budget.count_tool_call()
    assert (info.value.limit, budget.tool_calls) == ("max_tool_calls", 3)


def test_max_seconds_runs_from_the_first_check() -> None:
    clock = FakeClock()
    budget = RunBudget(max_seconds=5, clock=clock)
    clock.now += 1000  # time before the first check does not count
    budget.check(Usage())
    clock.now += 5
    budget.check(Usage())
    assert budget.elapsed_seconds == 5
    clock.now += 0.5
    with pytest.raises(BudgetExceeded) as info:
        budget.check(Usage())
    assert info.value.limit == "max_seconds"


def test_elapsed_is_zero_before_the_first_check() -> None:
    clock = FakeClock()
    budget = RunBudget(max_seconds=1, clock=clock)
    clock.now += 50
    assert budget.elapsed_seconds == 0.0


def test_fresh_copies_limits_and_clock_but_not_state() -> None:
    clock = FakeClock()
    budget = RunBudget(max_tool_calls=1, max_seconds=3, max_total_tokens=7, clock=clock)
    budget.check(Usage())
    budget.count_tool_call()
    copy = budget.fresh()
    assert (
        repr(copy)
        == repr(budget)
        == ("RunBudget(max_total_tokens=7, max_tool_calls=1, max_seconds=3)")
    )
    assert (copy.tool_calls, copy.elapsed_seconds) == (0, 0.0)
    copy.count_tool_call()  # the copy has its own count
    clock.now += 10
    copy.check(Usage())  # ... and its own start time
    with pytest.raises(BudgetExceeded):
        budget.check(Usage())


def test_negative_limit_is_a_user_error() -> None:
    with pytest.raises(UserError) as info:
        RunBudget(max_tool_calls=-1)
    assert info.value.hint == "use None for no limit"
