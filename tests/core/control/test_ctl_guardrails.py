"""Guardrails: verdict semantics, list order, first violation wins, raising trips."""

from __future__ import annotations

from typing import Any

import pytest
from lovia.agent import Agent
from lovia.cancellation import CancelToken
from lovia.exceptions import GuardrailTripped, RunCancelled
from lovia.guardrails import (
    GuardrailVerdict,
    InputGuardrail,
    OutputGuardrail,
    run_input_guardrails,
    run_output_guardrails,
)
from lovia.messages import Message, system, user
from lovia.run_context import RunContext
from lovia.steering import Mailbox

MESSAGES = [system("be nice"), user("hello")]


def make_ctx() -> RunContext[Any]:
    return RunContext(
        deps=None, agent=Agent(name="guarded"), cancel_token=CancelToken(), mailbox=Mailbox()
    )


@pytest.mark.parametrize("verdict", [None, False, ""], ids=["none", "false", "empty"])
async def test_falsy_verdicts_pass(verdict: GuardrailVerdict) -> None:
    def sync_guard(messages: list[Message], ctx: RunContext[Any]) -> GuardrailVerdict:
        return verdict

    async def async_guard(output: Any, ctx: RunContext[Any]) -> GuardrailVerdict:
        return verdict

    await run_input_guardrails([sync_guard], MESSAGES, make_ctx())
    await run_output_guardrails([async_guard], "fine", make_ctx())


async def test_a_string_verdict_is_the_reason() -> None:
    async def no_secrets(output: Any, ctx: RunContext[Any]) -> GuardrailVerdict:
        return "output leaks a secret" if "sk-" in output else None

    with pytest.raises(GuardrailTripped) as info:
        await run_output_guardrails([no_secrets], "key sk-123", make_ctx())
    assert info.value.reason == "output leaks a secret"
    assert (
        info.value.hint == "the final output was refused; the run cannot be retried automatically"
    )


async def test_true_gives_a_generic_reason_naming_the_guardrail() -> None:
    def block_all(messages: list[Message], ctx: RunContext[Any]) -> GuardrailVerdict:
        return True

    with pytest.raises(GuardrailTripped) as info:
        await run_input_guardrails([block_all], MESSAGES, make_ctx())
    assert info.value.reason == (
        "input guardrail test_true_gives_a_generic_reason_naming_the_guardrail.<locals>"
        ".block_all tripped"
    )


async def test_a_raising_guardrail_trips_with_the_exception_named_and_chained() -> None:
    def broken(output: Any, ctx: RunContext[Any]) -> GuardrailVerdict:
        raise KeyError("missing")

    with pytest.raises(GuardrailTripped) as info:
        await run_output_guardrails([broken], {"a": 1}, make_ctx())
    assert info.value.reason.endswith("broken raised KeyError: 'missing'")
    assert info.value.reason.startswith("output guardrail ")
    assert isinstance(info.value.__cause__, KeyError)


async def test_guardrails_run_in_order_and_the_first_violation_wins() -> None:
    calls: list[str] = []

    def passes(messages: list[Message], ctx: RunContext[Any]) -> GuardrailVerdict:
        calls.append("passes")
        return None

    async def trips(messages: list[Message], ctx: RunContext[Any]) -> GuardrailVerdict:
        calls.append("trips")
        return "first"

    def never_reached(messages: list[Message], ctx: RunContext[Any]) -> GuardrailVerdict:
        calls.append("never")
        return "second"

    guards: list[InputGuardrail] = [passes, trips, never_reached]
    with pytest.raises(GuardrailTripped) as info:
        await run_input_guardrails(guards, MESSAGES, make_ctx())
    assert (info.value.reason, calls) == ("first", ["passes", "trips"])


async def test_guardrails_receive_the_subject_and_context() -> None:
    seen: list[tuple[Any, RunContext[Any]]] = []

    def record(output: Any, ctx: RunContext[Any]) -> GuardrailVerdict:
        seen.append((output, ctx))
        return None

    ctx = make_ctx()
    guards: list[OutputGuardrail] = [record]
    await run_output_guardrails(guards, {"answer": 5}, ctx)
    assert seen == [({"answer": 5}, ctx)]


async def test_run_cancelled_from_a_guardrail_propagates_unchanged() -> None:
    def cancelled(messages: list[Message], ctx: RunContext[Any]) -> GuardrailVerdict:
        raise RunCancelled(reason="stop")

    with pytest.raises(RunCancelled):
        await run_input_guardrails([cancelled], MESSAGES, make_ctx())


async def test_no_guardrails_pass() -> None:
    await run_input_guardrails([], MESSAGES, make_ctx())
    await run_output_guardrails([], None, make_ctx())
