"""``Case``, ``Suite`` and ``evaluate()``: run cases against an agent and build a ``Report``.

How an evaluation runs:

* Cases run concurrently, at most ``concurrency`` at a time; the report keeps the order the
  cases were given. A case's samples run one after another and each sample's checks run
  concurrently, so at most ``concurrency`` agent runs are ever in flight.
* An agent *factory* is called once per sample (fresh state every run); a plain ``Agent``
  is reused. ``Case.model`` clones the agent onto that model for each sample.
* A run error, a timeout or a raising agent factory is sample data: the sample fails with
  the error, and the suite keeps going. Only asyncio task cancellation propagates (after
  every in-flight run has been cancelled and drained).
* ``fail_fast`` runs the cases one at a time and stops after the first failing case.
* ``cancel_token`` stops the evaluation cooperatively: in-flight runs end with
  ``RunCancelled`` and no new case starts; the report's status is ``"cancelled"``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from lovia.agent import Agent
from lovia.cancellation import CancelToken
from lovia.exceptions import UserError
from lovia.messages import Message, Usage
from lovia.parts import text_of
from lovia.runner import Runner
from lovia.transcript import InputEntry

from .checks import Check, CheckResult, _check_unit, run_check
from .report import CaseResult, Report, ReportStatus, SampleResult

if TYPE_CHECKING:
    from lovia.providers.base import Provider
    from lovia.runner import RunInput, RunOptions
    from lovia.runtime.result import RunResult

    from .progress import Progress

__all__ = ["AgentSource", "Case", "CaseModel", "PriceFn", "Suite", "evaluate"]

logger = logging.getLogger(__name__)

AgentSource = Union[Agent[Any], Callable[[], Union[Agent[Any], Awaitable[Agent[Any]]]]]
"""An ``Agent`` (reused by every sample) or a sync/async factory (called per sample)."""

CaseModel = Union["Provider", str, Callable[[], "Provider"]]
"""A case's model: a provider, a model string, or a zero-argument provider factory (called
per sample, so a single-use ``ScriptedProvider`` or replay can serve every sample)."""

PriceFn = Callable[[Usage], float]
"""``price(usage) -> cost`` of one run, in whatever currency the suite reports."""

_NAME_CHARS = 60


@dataclass(frozen=True, init=False)
class Case:
    """One evaluation case: an input, the checks its result must pass, and how to run it.

    ``name`` defaults to the input's text (the last user message for a list input), cut to
    60 characters. ``samples`` runs the case that many times; the case passes when its pass
    rate reaches ``pass_threshold``. ``context``, ``output_type`` and ``max_turns`` are
    forwarded to the run (``None`` leaves the agent's own). ``timeout`` (seconds, ``None``:
    none) bounds each run. ``metadata`` is carried to the ``CaseResult``. Invalid values
    raise ``UserError`` here.
    """

    input: RunInput
    checks: Sequence[Check] = ()
    name: str = ""
    samples: int = 1
    pass_threshold: float = 1.0
    context: Any = None
    output_type: Any = None
    model: CaseModel | None = None
    max_turns: int = 50
    timeout: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, input: RunInput, checks: Iterable[Check] = (), **fields: Any) -> None:
        # Hand-written so `Case("question", [contains("x")])` reads naturally while every
        # other field stays keyword-only.
        object.__setattr__(self, "input", input)
        object.__setattr__(self, "checks", tuple(checks))
        for name, default in _CASE_DEFAULTS.items():
            object.__setattr__(self, name, fields.pop(name, default))
        if fields:
            raise UserError(
                f"Case() got unknown field(s): {', '.join(sorted(fields))}",
                hint=f"Case fields are: input, checks, {', '.join(_CASE_DEFAULTS)}",
            )
        self._validate()

    def _validate(self) -> None:
        if not isinstance(self.samples, int) or isinstance(self.samples, bool) or self.samples < 1:
            raise UserError(f"Case.samples must be an int >= 1, got {self.samples!r}")
        _check_unit("Case.pass_threshold", self.pass_threshold)
        if self.timeout is not None and (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, (int, float))
            or not self.timeout > 0
        ):
            raise UserError(
                f"Case.timeout must be a number of seconds > 0 or None, got {self.timeout!r}"
            )
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise UserError(f"Case.max_turns must be an int >= 1, got {self.max_turns!r}")
        for check in self.checks:
            if not callable(check):
                raise UserError(
                    f"Case {self.name!r}: {check!r} is not a check",
                    hint="a check is a callable (RunResult) -> CheckResult | bool",
                )
        if not isinstance(self.metadata, Mapping):
            raise UserError(f"Case.metadata must be a mapping, got {type(self.metadata).__name__}")
        object.__setattr__(self, "metadata", dict(self.metadata))  # never shared between cases
        if not self.name:
            object.__setattr__(self, "name", _name_of(self.input))

    def replace(self, **changes: Any) -> Case:
        """A copy with ``changes`` applied (validated again)."""
        fields = {name: getattr(self, name) for name in _CASE_DEFAULTS}
        fields.update(changes)
        return Case(fields.pop("input", self.input), fields.pop("checks", self.checks), **fields)


_CASE_DEFAULTS: dict[str, Any] = {
    "name": "",
    "samples": 1,
    "pass_threshold": 1.0,
    "context": None,
    "output_type": None,
    "model": None,
    "max_turns": 50,
    "timeout": None,
    "metadata": {},
}


def _name_of(value: RunInput) -> str:
    if isinstance(value, str):
        text = value
    else:
        users = [
            item.content
            for item in value
            if isinstance(item, (Message, InputEntry)) and item.role == "user"
        ]
        text = text_of(users[-1]) if users else "case"
    text = " ".join(text.split()) or "case"
    return text if len(text) <= _NAME_CHARS else text[: _NAME_CHARS - 3] + "..."


@dataclass(frozen=True, kw_only=True)
class Suite:
    """What a suite file exposes to ``lovia eval``: an agent source and its cases.

    ``concurrency`` and ``price`` are the suite's defaults for ``evaluate()`` (the command's
    ``--concurrency`` wins).
    """

    agent: AgentSource
    cases: Sequence[Case]
    concurrency: int = 4
    price: PriceFn | None = None

    async def evaluate(self, **overrides: Any) -> Report:
        """``evaluate(self.agent, self.cases, ...)`` with the suite's defaults."""
        options: dict[str, Any] = {"concurrency": self.concurrency, "price": self.price}
        options.update(overrides)
        return await evaluate(self.agent, self.cases, **options)


async def evaluate(
    agent: AgentSource,
    cases: Iterable[Case],
    *,
    concurrency: int = 4,
    fail_fast: bool = False,
    price: PriceFn | None = None,
    samples: int | None = None,
    progress: Progress | None = None,
    cancel_token: CancelToken | None = None,
) -> Report:
    """Run every case against ``agent`` and return the ``Report`` (see the module docstring).

    ``samples`` overrides every case's own count. ``progress`` receives a call per sample and
    per case (``None``: silent; see ``lovia.eval.progress.auto_progress``). Raises
    ``UserError`` for a bad agent, case or concurrency before any run starts.
    """
    case_list = _validated(agent, cases, concurrency, samples)
    token = cancel_token if cancel_token is not None else CancelToken()
    results: list[CaseResult | None] = [None] * len(case_list)
    pending = iter(range(len(case_list)))
    failed = asyncio.Event()  # set by fail_fast once a case fails
    total = sum(c.samples for c in case_list)
    started = time.perf_counter()
    if progress is not None:
        progress.start(len(case_list), total)

    async def worker() -> None:
        # Workers share one iterator, so each case is taken exactly once.
        for i in pending:
            if token.is_cancelled or failed.is_set():
                return
            results[i] = done = await _run_case(agent, case_list[i], price, token, progress)
            if progress is not None:
                progress.case_done(done)
            if fail_fast and not done.passed:
                failed.set()

    workers = 1 if fail_fast else min(concurrency, len(case_list))
    try:
        await _run_all([worker() for _ in range(workers)])
    finally:
        if progress is not None:
            progress.finish()
    status: ReportStatus = "complete"
    if token.is_cancelled:
        status = "cancelled"
    elif None in results:
        status = "stopped"
    return Report(
        cases=tuple(r for r in results if r is not None),
        status=status,
        duration=time.perf_counter() - started,
    )


def _validated(
    agent: AgentSource, cases: Iterable[Case], concurrency: int, samples: int | None
) -> list[Case]:
    if not isinstance(agent, Agent) and not callable(agent):
        raise UserError(
            f"evaluate() needs an Agent or an agent factory, got {type(agent).__name__}",
            hint="pass the agent itself, or a function returning a fresh Agent per sample",
        )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f"evaluate(): concurrency must be an int >= 1, got {concurrency!r}")
    case_list = list(cases)
    for case in case_list:
        if not isinstance(case, Case):
            raise UserError(f"evaluate() takes Case values, got {type(case).__name__}")
    if samples is not None:
        case_list = [c.replace(samples=samples) for c in case_list]
    return case_list


async def _run_all(coros: list[Coroutine[Any, Any, None]]) -> None:
    """Await every coroutine; if one fails or we are cancelled, cancel and drain the rest."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _run_case(
    agent: AgentSource,
    case: Case,
    price: PriceFn | None,
    token: CancelToken,
    progress: Progress | None,
) -> CaseResult:
    samples = []
    for index in range(case.samples):
        if token.is_cancelled:
            break
        sample = await _run_sample(agent, case, index, price, token)
        samples.append(sample)
        if progress is not None:
            progress.sample_done(case.name, sample)
    return CaseResult(
        name=case.name,
        samples=tuple(samples),
        pass_threshold=case.pass_threshold,
        metadata=case.metadata,
    )


async def _agent_for(source: AgentSource, case: Case) -> Agent[Any]:
    if isinstance(source, Agent):
        agent = source
    else:
        made = source()
        agent = await made if inspect.isawaitable(made) else made
        if not isinstance(agent, Agent):
            raise TypeError(f"the agent factory returned {type(agent).__name__}, not an Agent")
    if case.model is None:
        return agent
    model = case.model
    if callable(model) and not isinstance(model, str):
        model = model()
    return agent.clone(model=model)


async def _run_sample(
    source: AgentSource, case: Case, index: int, price: PriceFn | None, token: CancelToken
) -> SampleResult:
    try:
        agent = await _agent_for(source, case)
    except Exception as exc:  # fail-open: a broken factory is this sample's error
        logger.info("eval agent factory raised for case %r", case.name, exc_info=True)
        return SampleResult(
            index=index, passed=False, error=f"agent factory raised {type(exc).__name__}: {exc}"
        )
    options: RunOptions = {"max_turns": case.max_turns, "cancel_token": token}
    if case.context is not None:
        options["context"] = case.context
    if case.output_type is not None:
        options["output_type"] = case.output_type
    started = time.perf_counter()
    try:
        run = Runner.run(agent, case.input, **options)
        result = await (run if case.timeout is None else asyncio.wait_for(run, case.timeout))
    except asyncio.TimeoutError:
        latency = time.perf_counter() - started
        error = f"TimeoutError: the run exceeded the case timeout of {case.timeout:g}s"
        return SampleResult(index=index, passed=False, error=error, latency=latency)
    except Exception as exc:  # fail-open: a failed run is sample data, never a suite abort
        logger.info("eval run failed for case %r", case.name, exc_info=True)
        latency = time.perf_counter() - started
        error = f"{type(exc).__name__}: {exc}"
        return SampleResult(index=index, passed=False, error=error, latency=latency)
    latency = time.perf_counter() - started
    checks = await _run_checks(case.checks, result)
    return SampleResult(
        index=index,
        passed=all(c.passed for c in checks),
        output=result.output,
        checks=tuple(checks),
        usage=result.usage.copy(),
        latency=latency,
        cost=_cost(price, result.usage),
        turns=result.turns,
    )


async def _run_checks(checks: Sequence[Check], result: RunResult[Any]) -> list[CheckResult]:
    if len(checks) <= 1:  # no task to spawn: saves an event-loop round trip per sample
        return [await run_check(c, result) for c in checks]
    return list(await asyncio.gather(*(run_check(c, result) for c in checks)))


def _cost(price: PriceFn | None, usage: Usage) -> float | None:
    if price is None:
        return None
    try:
        return float(price(usage))
    except Exception:  # fail-open: a buggy price function costs the report a column only
        logger.warning("eval price function raised; cost left empty", exc_info=True)
        return None
