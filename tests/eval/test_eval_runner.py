"""evaluate(): sampling, concurrency, fail_fast, errors as sample data, progress, cancellation."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from lovia import Agent, RunResult
from lovia.cancellation import CancelToken
from lovia.eval import (
    Case,
    CaseResult,
    CheckResult,
    PlainProgress,
    RichProgress,
    SampleResult,
    auto_progress,
    contains,
    evaluate,
)
from lovia.events import TextDelta
from lovia.exceptions import UserError
from lovia.messages import Usage, user
from lovia.providers.base import FinishDelta, ModelDelta, ModelSettings, UsageDelta
from lovia.testing import ScriptedProvider, call, text
from lovia.tools.base import tool

from .eval_support import replying

AGENT = Agent("under-test", instructions="Answer briefly.")


class Gauge:
    """Counts model calls in flight and remembers the peak."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0


class GatedProvider:
    """Replies "ok", but the first calls wait at a gate that opens once ``bound`` are in flight.

    That makes the peak reach the bound deterministically, so a test can assert both that
    concurrency is used and that it never goes past the bound.
    """

    name = "gated"
    model = "gated-model"
    supports_json_schema = False

    def __init__(self, gauge: Gauge, gate: asyncio.Event, bound: int) -> None:
        self.gauge, self.gate, self.bound = gauge, gate, bound

    async def stream(
        self,
        entries: Sequence[Any],
        *,
        tools: Sequence[Any] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        self.gauge.now += 1
        self.gauge.peak = max(self.gauge.peak, self.gauge.now)
        try:
            if self.gauge.now >= self.bound:
                self.gate.set()
            await asyncio.wait_for(self.gate.wait(), 10)
            yield TextDelta("ok")
            yield UsageDelta(Usage(input_tokens=3, output_tokens=1))
            yield FinishDelta("stop")
        finally:
            self.gauge.now -= 1


async def test_100_cases_by_5_samples_never_exceed_a_concurrency_of_16() -> None:
    gauge, gate = Gauge(), asyncio.Event()
    cases = [
        Case(f"q{i}", [contains("ok")], model=lambda: GatedProvider(gauge, gate, 16))
        for i in range(100)
    ]
    report = await evaluate(AGENT, cases, concurrency=16, samples=5)
    assert gauge.peak == 16
    assert gauge.now == 0
    assert [c.name for c in report.cases] == [f"q{i}" for i in range(100)]
    assert len(report.samples) == 500 and report.passed
    assert report.tokens == 500 * 4


async def test_a_factory_is_called_per_sample_and_a_plain_agent_is_reused() -> None:
    made: list[Agent[Any]] = []

    def factory() -> Agent[Any]:
        made.append(AGENT.clone())
        return made[-1]

    seen: list[Agent[Any]] = []

    def remember(result: RunResult[Any]) -> bool:
        seen.append(result.final_agent)
        return True

    cases = [Case("a", [remember], samples=2, model=replying("x"))] * 2
    await evaluate(factory, cases)
    assert len(made) == 4
    await evaluate(AGENT, [Case("b", [remember], samples=2, model=replying("x"))])
    # model= clones the agent per sample: a clone of AGENT each time, never a factory call.
    assert len(made) == 4 and len(seen) == 6
    assert all(a is not AGENT and a.name == AGENT.name for a in seen[4:])


async def test_an_agent_without_case_model_is_reused_as_is() -> None:
    agent = Agent("fixed", model=ScriptedProvider([text("one"), text("two")]))
    seen: list[Agent[Any]] = []

    def remember(result: RunResult[Any]) -> bool:
        seen.append(result.final_agent)
        return True

    report = await evaluate(agent, [Case("q", [remember], samples=2)])
    assert report.passed and seen == [agent, agent]


async def test_async_factory_and_metadata_are_carried_to_the_result() -> None:
    async def factory() -> Agent[Any]:
        return AGENT

    case = Case("q", [contains("hi")], model=replying("hi"), metadata={"owner": "team-a"})
    report = await evaluate(factory, [case])
    assert report.cases[0].metadata == {"owner": "team-a"} and report.passed


def test_case_names_derive_from_the_input_and_an_explicit_name_wins() -> None:
    assert Case("What is   the\ncapital?").name == "What is the capital?"
    assert Case([user("first"), user("second question")]).name == "second question"
    assert Case("x" * 100).name == "x" * 57 + "..."
    assert Case("anything", name="explicit").name == "explicit"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"samples": 0}, "samples must be an int >= 1"),
        ({"samples": 1.5}, "samples must be an int >= 1"),
        ({"pass_threshold": 1.5}, r"pass_threshold must be a number in \[0, 1\]"),
        ({"timeout": 0}, "timeout must be a number of seconds > 0"),
        ({"timeout": -1.0}, "timeout must be a number of seconds > 0"),
        ({"max_turns": 0}, "max_turns must be an int >= 1"),
        ({"checks": ["not callable"]}, "is not a check"),
        ({"sample": 2}, r"unknown field\(s\): sample"),
    ],
    ids=[
        "samples-0",
        "samples-float",
        "threshold",
        "timeout-0",
        "timeout-neg",
        "turns",
        "check",
        "typo",
    ],
)
def test_case_fields_are_validated(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        Case("q", **fields)


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, True])
async def test_concurrency_is_validated(concurrency: Any) -> None:
    with pytest.raises(UserError, match="concurrency must be an int >= 1"):
        await evaluate(AGENT, [Case("q")], concurrency=concurrency)


async def test_an_empty_suite_passes() -> None:
    report = await evaluate(AGENT, [])
    assert report.passed and report.pass_rate == 1.0 and report.cases == ()


async def test_a_run_error_is_sample_data_and_the_suite_keeps_going() -> None:
    cases = [
        Case(
            "boom", [contains("x")], model=lambda: ScriptedProvider([RuntimeError("endpoint down")])
        ),
        Case("ran out", [contains("x")], model=lambda: ScriptedProvider([])),
        Case("fine", [contains("x")], model=replying("x")),
    ]
    report = await evaluate(AGENT, cases)
    errors = [c.samples[0].error for c in report.cases]
    assert errors == [
        "RuntimeError: endpoint down",
        "AssertionError: ScriptedProvider ran out of canned responses",
        None,
    ]
    assert [c.passed for c in report.cases] == [False, False, True]
    assert report.cases[0].samples[0].checks == ()  # checks do not run on a failed run


async def test_a_raising_agent_factory_fails_its_samples_and_the_suite_keeps_going() -> None:
    calls = iter(range(10))

    def factory() -> Agent[Any]:
        if next(calls) == 0:
            raise KeyError("missing config")
        return AGENT

    cases = [Case("first", model=replying("a")), Case("second", model=replying("b"))]
    report = await evaluate(factory, cases, concurrency=1)
    assert report.cases[0].samples[0].error == "agent factory raised KeyError: 'missing config'"
    assert [c.passed for c in report.cases] == [False, True]


async def test_a_timeout_is_sample_data() -> None:
    never = asyncio.Event()

    @tool
    async def hang() -> str:
        """Waits forever."""
        await never.wait()
        return "never"

    agent = AGENT.clone(tools=[hang])
    cases = [
        Case("slow", model=lambda: ScriptedProvider([call("hang"), text("x")]), timeout=0.05),
        Case("fast", model=replying("x")),
    ]
    report = await evaluate(agent, cases)
    assert report.cases[0].samples[0].error == (
        "TimeoutError: the run exceeded the case timeout of 0.05s"
    )
    assert report.cases[1].passed


async def test_max_turns_is_forwarded_to_the_run() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    script = lambda: ScriptedProvider([call("ping"), text("done")])  # noqa: E731
    report = await evaluate(AGENT.clone(tools=[ping]), [Case("q", model=script, max_turns=1)])
    error = report.cases[0].samples[0].error
    assert error is not None and error.startswith("MaxTurnsExceeded")


async def test_sampled_pass_rate_is_compared_with_the_threshold() -> None:
    replies = iter(["good", "bad", "good", "bad"])
    case = Case(
        "q", [contains("good")], samples=4, pass_threshold=0.5,
        model=lambda: ScriptedProvider([text(next(replies))]),
    )  # fmt: skip
    (result,) = (await evaluate(AGENT, [case])).cases
    assert (result.successes, result.pass_rate, result.passed) == (2, 0.5, True)
    assert [s.index for s in result.samples] == [0, 1, 2, 3]
    assert result.pass_at_k(2) == pytest.approx(1 - 1 / 6)


async def test_checks_of_a_sample_run_concurrently() -> None:
    a, b = asyncio.Event(), asyncio.Event()

    async def first(result: RunResult[Any]) -> bool:
        a.set()
        await asyncio.wait_for(b.wait(), 5)  # a deadline only to fail, never to synchronise
        return True

    async def second(result: RunResult[Any]) -> bool:
        b.set()
        await asyncio.wait_for(a.wait(), 5)
        return True

    report = await evaluate(AGENT, [Case("q", [first, second], model=replying("x"))])
    assert report.passed


async def test_results_keep_the_case_order_when_cases_finish_out_of_order() -> None:
    release_first = asyncio.Event()

    async def wait_for_the_others(result: RunResult[Any]) -> bool:
        await asyncio.wait_for(release_first.wait(), 5)
        return True

    def last_done(result: RunResult[Any]) -> bool:
        release_first.set()
        return True

    cases = [
        Case("first", [wait_for_the_others], model=replying("x")),
        Case("second", [last_done], model=replying("x")),
    ]
    progress = RecordingProgress()
    report = await evaluate(AGENT, cases, concurrency=2, progress=progress)
    assert [c.name for c in report.cases] == ["first", "second"]
    assert [c.name for c in progress.cases] == ["second", "first"]


async def test_fail_fast_runs_sequentially_and_stops_after_the_first_failing_case() -> None:
    gauge, gate = Gauge(), asyncio.Event()
    gate.set()
    cases = [
        Case("ok", [contains("ok")], model=lambda: GatedProvider(gauge, gate, 1)),
        Case("fails", [contains("nope")], model=lambda: GatedProvider(gauge, gate, 1)),
        Case("never", [contains("ok")], model=lambda: GatedProvider(gauge, gate, 1)),
    ]
    report = await evaluate(AGENT, cases, concurrency=8, fail_fast=True)
    assert [c.name for c in report.cases] == ["ok", "fails"]
    assert report.status == "stopped" and not report.passed
    assert gauge.peak == 1


async def test_price_gives_cost_and_a_raising_price_leaves_it_empty() -> None:
    def price(usage: Usage) -> float:
        return usage.input_tokens * 0.01 + usage.output_tokens * 0.02

    gauge, gate = Gauge(), asyncio.Event()
    gate.set()
    case = Case("q", model=lambda: GatedProvider(gauge, gate, 1), samples=2)
    report = await evaluate(AGENT, [case], price=price)
    assert report.cases[0].cost == pytest.approx(2 * 0.05)

    def broken(usage: Usage) -> float:
        raise ValueError("no rate card")

    report = await evaluate(AGENT, [case], price=broken)
    assert report.cost is None and report.passed


class RecordingProgress:
    def __init__(self) -> None:
        self.started: tuple[int, int] | None = None
        self.samples: list[tuple[str, int]] = []
        self.cases: list[CaseResult] = []
        self.finished = False

    def start(self, cases: int, samples: int) -> None:
        self.started = (cases, samples)

    def sample_done(self, case_name: str, sample: SampleResult) -> None:
        self.samples.append((case_name, sample.index))

    def case_done(self, case: CaseResult) -> None:
        self.cases.append(case)

    def finish(self) -> None:
        self.finished = True


async def test_progress_hears_about_every_sample_and_case() -> None:
    progress = RecordingProgress()
    cases = [Case("a", model=replying("x"), samples=2), Case("b", model=replying("x"))]
    await evaluate(AGENT, cases, progress=progress, concurrency=1)
    assert progress.started == (2, 3)
    assert progress.samples == [("a", 0), ("a", 1), ("b", 0)]
    assert [c.name for c in progress.cases] == ["a", "b"] and progress.finished


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_auto_progress_draws_a_bar_on_a_terminal_and_lines_on_a_pipe() -> None:
    pipe, terminal = io.StringIO(), FakeTerminal()
    assert isinstance(auto_progress(pipe), PlainProgress)
    bar = auto_progress(terminal)
    assert isinstance(bar, RichProgress)
    cases = [
        Case("alpha", [contains("x")], model=replying("x")),
        Case("beta", [contains("y")], model=replying("x")),
    ]
    await evaluate(AGENT, cases, progress=auto_progress(pipe), concurrency=1)
    assert (
        pipe.getvalue()
        == "running 2 case(s), 2 sample(s)\n[1/2] ✓ alpha (1/1)\n[2/2] ✗ beta (0/1)\n"
    )
    await evaluate(AGENT, cases, progress=bar, concurrency=1)
    assert "eval (1 failed)" in terminal.getvalue()


async def test_a_cancel_token_stops_the_evaluation_and_marks_the_report_cancelled() -> None:
    token = CancelToken()

    def cancel_now(result: RunResult[Any]) -> bool:
        token.cancel("operator stop")
        return True

    cases = [Case("first", [cancel_now], model=replying("x"), samples=3)]
    cases += [Case(f"later {i}", model=replying("x")) for i in range(3)]
    report = await evaluate(AGENT, cases, concurrency=1, cancel_token=token)
    assert report.status == "cancelled" and not report.passed
    assert [c.name for c in report.cases] == ["first"]
    assert len(report.cases[0].samples) == 1  # the other samples never started


async def test_a_cancel_token_ends_in_flight_runs_with_run_cancelled() -> None:
    token = CancelToken()
    started = asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits until cancelled."""
        started.set()
        await token.wait()
        return "after cancel"

    script = lambda: ScriptedProvider([call("wait"), text("x")])  # noqa: E731
    task = asyncio.ensure_future(
        evaluate(AGENT.clone(tools=[wait]), [Case("q", model=script)], cancel_token=token)
    )
    await started.wait()
    token.cancel("stop")
    report = await task
    error = report.cases[0].samples[0].error
    assert report.status == "cancelled" and error is not None and error.startswith("RunCancelled")


async def test_cancelling_the_task_cancels_every_in_flight_run() -> None:
    gauge, gate = Gauge(), asyncio.Event()  # never opened: every run blocks in the provider
    cases = [Case(f"q{i}", model=lambda: GatedProvider(gauge, gate, 99)) for i in range(10)]
    task = asyncio.ensure_future(evaluate(AGENT, cases, concurrency=4))
    while gauge.now < 4:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gauge.now == 0 and gauge.peak == 4


async def test_a_check_result_keeps_its_custom_score() -> None:
    case = Case("q", [lambda r: CheckResult("half", True, 0.5, "partial")], model=replying("x"))
    report = await evaluate(AGENT, [case])
    assert report.cases[0].samples[0].checks == (CheckResult("half", True, 0.5, "partial"),)


def test_case_metadata_is_copied_and_validated() -> None:
    shared = {"owner": "a"}
    first, second = Case("q", metadata=shared), Case("r")
    shared["owner"] = "changed"
    assert first.metadata == {"owner": "a"} and second.metadata == {}
    with pytest.raises(UserError, match="metadata must be a mapping"):
        Case("q", metadata=["not", "a", "mapping"])
