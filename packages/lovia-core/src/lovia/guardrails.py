"""Input and output guardrails: checks that can refuse a run.

A guardrail returns a verdict. ``None``, ``False`` and ``""`` pass; any other truthy value
trips: a non-empty string becomes the reason, anything else gives a generic one. A guardrail
that raises also trips, with a reason naming the exception (it is chained as the cause).
Guardrails run in list order and the first violation wins; there is no retry.

Input guardrails see the chat view of the fully built initial transcript (system + history +
input) once, before the first model call; output guardrails see the validated final output.
Neither runs on a checkpoint replay. Plugin guardrails are merged after the agent's own.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Union

from .exceptions import GuardrailTripped, RunCancelled
from .messages import Message

if TYPE_CHECKING:
    from .run_context import RunContext

__all__ = [
    "GuardrailFn",
    "GuardrailVerdict",
    "InputGuardrail",
    "OutputGuardrail",
    "run_input_guardrails",
    "run_output_guardrails",
]

GuardrailVerdict = Union[bool, str, None]
"""What a guardrail returns: ``None``/``False``/``""`` pass, ``True`` or a reason trips."""

InputGuardrail = Callable[
    [list[Message], "RunContext[Any]"],
    Union[GuardrailVerdict, Awaitable[GuardrailVerdict]],
]
"""``fn(messages, ctx)``: judges the initial chat view (sync or async)."""

OutputGuardrail = Callable[
    [Any, "RunContext[Any]"],
    Union[GuardrailVerdict, Awaitable[GuardrailVerdict]],
]
"""``fn(output, ctx)``: judges the validated final output (sync or async)."""

GuardrailFn = Union[InputGuardrail, OutputGuardrail]
"""Either kind of guardrail."""

_Kind = Literal["input", "output"]


async def run_input_guardrails(
    guardrails: Sequence[InputGuardrail], messages: list[Message], ctx: RunContext[Any]
) -> None:
    """Run ``guardrails`` over ``messages`` in order; the first trip raises ``GuardrailTripped``."""
    for guardrail in guardrails:
        await _judge("input", guardrail, messages, ctx)


async def run_output_guardrails(
    guardrails: Sequence[OutputGuardrail], output: Any, ctx: RunContext[Any]
) -> None:
    """Run ``guardrails`` over ``output`` in order; the first trip raises ``GuardrailTripped``."""
    for guardrail in guardrails:
        await _judge("output", guardrail, output, ctx)


async def _judge(
    kind: _Kind,
    guardrail: Callable[[Any, RunContext[Any]], object],
    subject: Any,
    ctx: RunContext[Any],
) -> None:
    name = _name_of(guardrail)
    try:
        verdict = guardrail(subject, ctx)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except (GuardrailTripped, RunCancelled):
        raise  # already says what happened
    except Exception as exc:  # a raising guardrail refuses: fail closed
        reason = f"{kind} guardrail {name} raised {type(exc).__name__}: {exc}"
        raise GuardrailTripped(reason=reason, hint=_hint(kind)) from exc
    if not verdict:
        return
    if isinstance(verdict, str):
        reason = verdict
    else:
        reason = f"{kind} guardrail {name} tripped"
    raise GuardrailTripped(reason=reason, hint=_hint(kind))


def _hint(kind: _Kind) -> str:
    if kind == "input":
        return "the input was refused before any model call; change the input or the guardrail"
    return "the final output was refused; the run cannot be retried automatically"


def _name_of(fn: Callable[..., object]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
