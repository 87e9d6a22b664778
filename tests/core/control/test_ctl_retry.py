"""RetryPolicy: what is retried, how long to wait, and cancel-interruptible backoff."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from lovia.cancellation import CancelToken
from lovia.exceptions import ContextOverflowError, ProviderError, RunCancelled, UserError
from lovia.retry import RetryPolicy


def retryable() -> ProviderError:
    return ProviderError("503", status_code=503, retryable=True)


class RecordingSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_defaults_match_the_catalogue() -> None:
    policy = RetryPolicy()
    assert (
        policy.max_attempts,
        policy.restart_on_partial,
        policy.backoff_base,
        policy.backoff_max,
        policy.retry_on,
    ) == (5, True, 1.0, 30.0, None)


def test_policy_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RetryPolicy().max_attempts = 2  # type: ignore[misc]  # the point of the test


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ProviderError("503", retryable=True), True),
        (ProviderError("400", status_code=400, retryable=False), False),
        (ContextOverflowError("too long"), False),
        (RunCancelled(reason="x"), False),
        (ValueError("not a provider error"), False),
    ],
    ids=["retryable", "not-retryable", "overflow", "cancelled", "other"],
)
def test_default_retry_on_is_a_retryable_provider_error(exc: BaseException, expected: bool) -> None:
    assert RetryPolicy().should_retry(exc, attempt=1) is expected


def test_attempts_count_total_calls() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.should_retry(retryable(), n) for n in (1, 2, 3, 4)] == [True, True, False, False]


def test_max_attempts_one_disables_retrying() -> None:
    assert RetryPolicy(max_attempts=1).should_retry(retryable(), 1) is False


def test_custom_retry_on_decides_but_never_retries_overflow() -> None:
    policy = RetryPolicy(retry_on=lambda exc: isinstance(exc, (ValueError, ProviderError)))
    assert policy.should_retry(ValueError("flaky"), 1) is True
    assert policy.should_retry(ContextOverflowError("too long"), 1) is False
    assert policy.should_retry(retryable(), 5) is False


def test_delay_is_exponential_with_jitter_bounds() -> None:
    low = RetryPolicy(backoff_base=1.0, backoff_max=100.0, jitter=lambda: 0.0)
    high = RetryPolicy(backoff_base=1.0, backoff_max=100.0, jitter=lambda: 0.999)
    assert [low.delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert [round(high.delay(n), 3) for n in (1, 2, 3)] == [1.499, 2.998, 5.996]


def test_delay_is_capped() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_max=30.0, jitter=lambda: 0.5)
    assert policy.delay(10) == 30.0
    assert policy.delay(10_000) == 30.0  # no float overflow on absurd attempts


def test_retry_after_replaces_the_computed_delay_and_is_capped() -> None:
    policy = RetryPolicy(backoff_max=10.0, jitter=lambda: 0.5)
    soon = ProviderError("429", status_code=429, retryable=True, retry_after=2.5)
    late = ProviderError("429", status_code=429, retryable=True, retry_after=120.0)
    assert (policy.delay(1, soon), policy.delay(1, late)) == (2.5, 10.0)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"backoff_base": -1.0}, {"backoff_max": -0.1}],
    ids=["attempts", "base", "max"],
)
def test_invalid_settings_are_user_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(UserError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]  # mixed int/float kwargs


async def test_backoff_sleeps_the_delay_via_the_injected_sleep() -> None:
    sleep = RecordingSleep()
    policy = RetryPolicy(sleep=sleep, jitter=lambda: 0.5, backoff_base=2.0)
    await policy.backoff(2, retryable(), CancelToken())
    await policy.backoff(1, retryable())
    assert sleep.calls == [4.0, 2.0]


async def test_backoff_on_a_cancelled_token_raises_without_sleeping() -> None:
    sleep = RecordingSleep()
    token = CancelToken()
    token.cancel("stop")
    with pytest.raises(RunCancelled) as info:
        await RetryPolicy(sleep=sleep).backoff(1, retryable(), token)
    assert (info.value.reason, sleep.calls) == ("stop", [])


async def test_cancel_interrupts_a_backoff_in_progress() -> None:
    token = CancelToken()
    sleeping = asyncio.Event()
    interrupted = asyncio.Event()

    async def endless_sleep(seconds: float) -> None:
        sleeping.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            interrupted.set()
            raise

    before = asyncio.all_tasks()
    backoff = asyncio.create_task(RetryPolicy(sleep=endless_sleep).backoff(1, retryable(), token))
    await sleeping.wait()
    token.cancel("user")
    with pytest.raises(RunCancelled):
        await backoff
    assert interrupted.is_set()
    assert asyncio.all_tasks() == before  # neither the sleep nor the watcher leaked
