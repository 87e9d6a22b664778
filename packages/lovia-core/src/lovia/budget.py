"""``RunBudget``: hard limits on what one run may spend.

The run loop checks the budget between turns, after each model reply and at each tool
preflight. ``max_tool_calls`` counts *requested* calls, rejected ones included, and
``max_seconds`` runs from the first check (cooperatively: nothing is interrupted mid-call).

A trip raises ``BudgetExceeded``. The loop then stops dispatching new tool calls, lets the
ones in flight finish and persist, and leaves the run *interrupted*, so it can be resumed.
The instance is stateful (it counts calls and remembers when it started), so each run
needs its own: agent-as-tool sub-runs call ``fresh()`` per invocation.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .exceptions import BudgetExceeded, UserError
from .messages import Usage

__all__ = ["RunBudget"]

_HINT = "raise {limit} on the RunBudget, or resume the interrupted run with a fresh budget"


class RunBudget:
    """Token, tool-call and wall-clock limits for one run; every ``None`` means no limit.

    ``clock`` returns seconds (``time.monotonic`` by default); inject one in tests.
    Raises ``UserError`` for a negative limit.
    """

    __slots__ = (
        "_clock",
        "_started_at",
        "_tool_calls",
        "max_input_tokens",
        "max_output_tokens",
        "max_seconds",
        "max_tool_calls",
        "max_total_tokens",
    )

    def __init__(
        self,
        max_input_tokens: int | None = None,
        max_output_tokens: int | None = None,
        max_total_tokens: int | None = None,
        max_tool_calls: int | None = None,
        max_seconds: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (
            ("max_input_tokens", max_input_tokens),
            ("max_output_tokens", max_output_tokens),
            ("max_total_tokens", max_total_tokens),
            ("max_tool_calls", max_tool_calls),
            ("max_seconds", max_seconds),
        ):
            if value is not None and value < 0:
                raise UserError(
                    f"RunBudget({name}={value!r}) must not be negative",
                    hint="use None for no limit",
                )
        self.max_input_tokens = max_input_tokens
        """Limit on ``Usage.input_tokens`` summed over the run's model calls."""
        self.max_output_tokens = max_output_tokens
        """Limit on ``Usage.output_tokens``."""
        self.max_total_tokens = max_total_tokens
        """Limit on input plus output tokens."""
        self.max_tool_calls = max_tool_calls
        """Limit on tool calls the model requested (rejected calls count too)."""
        self.max_seconds = max_seconds
        """Wall-clock limit, measured from the first ``check()``."""
        self._clock = clock
        self._started_at: float | None = None
        self._tool_calls = 0

    def __repr__(self) -> str:
        limits = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in (
                "max_input_tokens",
                "max_output_tokens",
                "max_total_tokens",
                "max_tool_calls",
                "max_seconds",
            )
            if getattr(self, name) is not None
        )
        return f"RunBudget({limits})"

    @property
    def tool_calls(self) -> int:
        """How many tool calls ``count_tool_call()`` has counted so far."""
        return self._tool_calls

    @property
    def elapsed_seconds(self) -> float:
        """Seconds since the first ``check()`` (0.0 before it)."""
        if self._started_at is None:
            return 0.0
        return self._clock() - self._started_at

    def check(self, usage: Usage) -> None:
        """Raise ``BudgetExceeded`` if ``usage`` or the elapsed time is over a limit.

        Being exactly at a limit is allowed. The first call starts the ``max_seconds`` clock.
        """
        if self._started_at is None:
            self._started_at = self._clock()
        _check_limit("max_input_tokens", usage.input_tokens, self.max_input_tokens)
        _check_limit("max_output_tokens", usage.output_tokens, self.max_output_tokens)
        _check_limit("max_total_tokens", usage.total_tokens, self.max_total_tokens)
        if self.max_seconds is not None:
            elapsed = self._clock() - self._started_at
            if elapsed > self.max_seconds:
                raise BudgetExceeded(
                    f"run budget exceeded: {elapsed:.3f}s elapsed > max_seconds={self.max_seconds}",
                    limit="max_seconds",
                    hint=_HINT.format(limit="max_seconds"),
                )

    def count_tool_call(self) -> None:
        """Count one requested tool call, then raise ``BudgetExceeded`` if over the limit."""
        self._tool_calls += 1
        _check_limit("max_tool_calls", self._tool_calls, self.max_tool_calls)

    def fresh(self) -> RunBudget:
        """A budget with the same limits and clock and nothing spent yet."""
        return RunBudget(
            self.max_input_tokens,
            self.max_output_tokens,
            self.max_total_tokens,
            self.max_tool_calls,
            self.max_seconds,
            clock=self._clock,
        )


def _check_limit(limit: str, spent: int, allowed: int | None) -> None:
    if allowed is not None and spent > allowed:
        raise BudgetExceeded(
            f"run budget exceeded: {limit}={allowed} (spent {spent})",
            limit=limit,
            hint=_HINT.format(limit=limit),
        )
