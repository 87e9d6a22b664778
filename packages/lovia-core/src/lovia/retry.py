"""``RetryPolicy``: when and how long to wait before calling a provider again.

The policy only decides; the run loop retries. ``max_attempts`` counts *total* calls, so 1
disables retrying. By default only a ``ProviderError`` marked ``retryable`` (408, 429, 5xx,
timeouts, disconnects, truncated streams) is retried. ``ContextOverflowError`` is never
retried here, whatever ``retry_on`` says: it goes to the context policy, which gets one
reactive attempt at a smaller view. Retries are transparent: they add no turns.

Backoff is exponential, jittered by ±50% and capped, honours a server's ``retry_after``,
and is interruptible: a cancel during the wait raises ``RunCancelled`` at once.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .cancellation import CancelToken
from .exceptions import ContextOverflowError, ProviderError, RunCancelled, UserError

__all__ = ["RetryPolicy"]

_MAX_EXPONENT = 64  # 2**64 seconds is past any cap; stops float overflow on absurd attempts


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Provider-call retry posture for a run (``Agent.retry`` or ``Runner.run(retry=)``).

    Raises ``UserError`` for ``max_attempts < 1`` or a negative backoff.
    """

    max_attempts: int = 5
    """Total provider calls per turn, the first included; 1 disables retrying."""
    restart_on_partial: bool = True
    """Re-stream a turn that failed mid-stream (emitting ``OutputDiscarded`` if text was
    forwarded); ``False`` lets such an error propagate."""
    backoff_base: float = 1.0
    """Seconds before the first retry (before jitter); doubles on each further attempt."""
    backoff_max: float = 30.0
    """Cap on any single wait, ``retry_after`` included."""
    retry_on: Callable[[BaseException], bool] | None = None
    """Predicate deciding which errors are retried; ``None`` means a retryable
    ``ProviderError``. ``ContextOverflowError`` and ``RunCancelled`` are never retried."""
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep
    """How to wait (inject a fake in tests)."""
    jitter: Callable[[], float] = random.random
    """A number in [0, 1) that spreads each wait over 50%..150% of the nominal delay."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise UserError(
                f"RetryPolicy(max_attempts={self.max_attempts!r}) must be at least 1",
                hint="max_attempts counts total calls; use 1 (or Agent(retry=None)) for no retries",
            )
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise UserError(
                f"RetryPolicy backoff must not be negative "
                f"(backoff_base={self.backoff_base!r}, backoff_max={self.backoff_max!r})",
                hint="use 0 for no wait",
            )

    def should_retry(self, exc: BaseException, attempt: int) -> bool:
        """Whether to call again after ``exc``; ``attempt`` is the number of calls made so far."""
        if attempt >= self.max_attempts:
            return False
        if isinstance(exc, (ContextOverflowError, RunCancelled)):
            return False
        if self.retry_on is None:
            return isinstance(exc, ProviderError) and exc.retryable
        return self.retry_on(exc)

    def delay(self, attempt: int, exc: BaseException | None = None) -> float:
        """Seconds to wait after call number ``attempt`` failed with ``exc``.

        A server's ``retry_after`` replaces the computed delay; either way the result is
        capped at ``backoff_max``.
        """
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.backoff_max)
        exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
        nominal = self.backoff_base * 2.0**exponent
        return min(nominal * (0.5 + self.jitter()), self.backoff_max)

    async def backoff(
        self, attempt: int, exc: BaseException | None, token: CancelToken | None = None
    ) -> None:
        """Wait ``delay(attempt, exc)`` via ``sleep``; raise ``RunCancelled`` if ``token`` fires."""
        seconds = self.delay(attempt, exc)
        if token is None:
            await self.sleep(seconds)
            return
        await token.race(self.sleep(seconds))
        # A cancel that landed together with the end of the wait still stops the retry.
        token.check()
