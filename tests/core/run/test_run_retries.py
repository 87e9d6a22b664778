"""Provider retries, partial-stream restart and reactive overflow recovery.

Catalogue section 12, items 12 and 14. Sleeps are injected, so nothing waits.
"""

from __future__ import annotations

from typing import Any

import pytest
from lovia import Agent, Runner, tool
from lovia.cancellation import CancelToken
from lovia.context_policy import CompactionRequest, ContextResult
from lovia.events import ContextCompacted, Event, OutputDiscarded, RunFailed, TextDelta
from lovia.exceptions import ContextOverflowError, ProviderError, RunCancelled
from lovia.retry import RetryPolicy
from lovia.testing import ScriptedProvider, call, fail_after, text
from lovia.transcript import AssistantTextEntry, InputEntry

slept: list[float] = []


async def _no_sleep(seconds: float) -> None:
    slept.append(seconds)


@pytest.fixture(autouse=True)
def _reset() -> None:
    slept.clear()


def _retry(**kw: Any) -> RetryPolicy:
    return RetryPolicy(sleep=_no_sleep, jitter=lambda: 0.5, **kw)


def _flaky() -> ProviderError:
    return ProviderError("503 upstream", status_code=503, retryable=True)


async def _events(agent: Agent[Any], **kw: Any) -> list[Event]:
    return [e async for e in Runner.stream(agent, "go", **kw)]


async def test_retryable_error_is_retried_without_adding_a_turn() -> None:
    provider = ScriptedProvider([_flaky(), _flaky(), text("ok")])
    result = await Runner.run(Agent("r", model=provider, retry=_retry()), "go")
    assert result.output == "ok"
    assert result.turns == 1
    assert slept == [1.0, 2.0]


async def test_non_retryable_error_is_not_retried() -> None:
    provider = ScriptedProvider([ProviderError("400 bad", status_code=400), text("never")])
    with pytest.raises(ProviderError, match="400 bad"):
        await Runner.run(Agent("r", model=provider, retry=_retry()), "go")
    assert len(provider.calls) == 1


async def test_max_attempts_bounds_the_calls() -> None:
    provider = ScriptedProvider([_flaky(), _flaky(), text("never")])
    with pytest.raises(ProviderError):
        await Runner.run(Agent("r", model=provider, retry=_retry(max_attempts=2)), "go")
    assert len(provider.calls) == 2


async def test_retry_none_disables_retrying() -> None:
    provider = ScriptedProvider([_flaky(), text("never")])
    with pytest.raises(ProviderError):
        await Runner.run(Agent("r", model=provider, retry=None), "go")
    assert len(provider.calls) == 1


async def test_run_level_retry_overrides_the_agents() -> None:
    provider = ScriptedProvider([_flaky(), text("ok")])
    result = await Runner.run(Agent("r", model=provider, retry=None), "go", retry=_retry())
    assert result.output == "ok"


async def test_mid_stream_failure_emits_output_discarded_and_restreams() -> None:
    provider = ScriptedProvider([fail_after(_flaky(), text("hello"), deltas=3), text("hello")])
    agent = Agent("r", model=provider, retry=_retry())
    handle = Runner.stream(agent, "go")
    events = [e async for e in handle]
    discarded = [i for i, e in enumerate(events) if isinstance(e, OutputDiscarded)]
    assert len(discarded) == 1
    deltas_after = [e.delta for e in events[discarded[0] :] if isinstance(e, TextDelta)]
    assert "".join(deltas_after) == "hello"
    result = await handle.result()
    assert result.entries == [InputEntry("user", "go"), AssistantTextEntry("hello")]


async def test_tool_only_partial_resets_without_a_discard_event() -> None:
    @tool
    async def noop() -> str:
        """Noop."""
        return "ok"

    partial = fail_after(_flaky(), call("noop", {}), deltas=1)
    provider = ScriptedProvider([partial, call("noop", {}), text("done")])
    events = await _events(Agent("r", model=provider, tools=[noop], retry=_retry()))
    assert not any(isinstance(e, OutputDiscarded) for e in events)
    assert events[-1].__class__.__name__ == "RunCompleted"


async def test_restart_on_partial_false_propagates_the_error() -> None:
    provider = ScriptedProvider([fail_after(_flaky(), text("hello"), deltas=2), text("hello")])
    agent = Agent("r", model=provider, retry=_retry(restart_on_partial=False))
    events = await _events(agent)
    assert isinstance(events[-1], RunFailed)
    assert not any(isinstance(e, OutputDiscarded) for e in events)


async def test_non_retryable_error_after_partial_output_raises_without_reset() -> None:
    fatal = ProviderError("401", status_code=401)
    provider = ScriptedProvider([fail_after(fatal, text("hello"), deltas=2)])
    events = await _events(Agent("r", model=provider, retry=_retry()))
    assert isinstance(events[-1], RunFailed) and events[-1].error is fatal
    assert not any(isinstance(e, OutputDiscarded) for e in events)


async def test_cancel_during_backoff_stops_the_retry() -> None:
    token = CancelToken()

    async def sleep_then_cancel(seconds: float) -> None:
        token.cancel("during backoff")
        import asyncio

        await asyncio.Event().wait()

    provider = ScriptedProvider([_flaky(), text("never")])
    agent = Agent("r", model=provider, retry=RetryPolicy(sleep=sleep_then_cancel))
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go", cancel_token=token)
    assert len(provider.calls) == 1


# -- reactive overflow ----------------------------------------------------------------


class _ShrinkOnOverflow:
    """Drops everything but the last entry on overflow; reports whether it compacted."""

    def __init__(self, compacted: bool) -> None:
        self.compacted = compacted
        self.requests: list[CompactionRequest] = []

    async def compact(self, req: CompactionRequest) -> ContextResult:
        self.requests.append(req)
        if not req.overflow:
            return ContextResult(entries=req.entries)
        return ContextResult(
            entries=list(req.entries)[-1:],
            changed=True,
            compacted=self.compacted,
            reason="overflow",
        )


def _overflow() -> ContextOverflowError:
    return ContextOverflowError("too long", reported_window=1000)


async def test_overflow_gets_one_reactive_compaction_and_a_retry() -> None:
    policy = _ShrinkOnOverflow(compacted=True)
    provider = ScriptedProvider([_overflow(), text("fits now")])
    agent = Agent("o", instructions="sys", model=provider, context_policy=policy, retry=None)
    events = await _events(agent)
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert len(compacted) == 1 and compacted[0].notice.reactive
    assert policy.requests[-1].overflow and policy.requests[-1].reported_window == 1000
    assert len(provider.views[1]) == 1


async def test_overflow_is_not_retried_when_the_policy_made_no_new_decision() -> None:
    provider = ScriptedProvider([_overflow(), text("never")])
    agent = Agent("o", model=provider, context_policy=_ShrinkOnOverflow(compacted=False))
    with pytest.raises(ContextOverflowError):
        await Runner.run(agent, "go")
    assert len(provider.calls) == 1


async def test_overflow_is_retried_only_once() -> None:
    provider = ScriptedProvider([_overflow(), _overflow(), text("never")])
    agent = Agent("o", model=provider, context_policy=_ShrinkOnOverflow(compacted=True))
    with pytest.raises(ContextOverflowError):
        await Runner.run(agent, "go")
    assert len(provider.calls) == 2


async def test_overflow_after_forwarded_output_is_not_retried() -> None:
    provider = ScriptedProvider([fail_after(_overflow(), text("abc"), deltas=2), text("never")])
    agent = Agent("o", model=provider, context_policy=_ShrinkOnOverflow(compacted=True))
    with pytest.raises(ContextOverflowError):
        await Runner.run(agent, "go")
    assert len(provider.calls) == 1


async def test_overflow_is_never_handed_to_the_retry_policy() -> None:
    provider = ScriptedProvider([_overflow(), text("never")])
    agent = Agent("o", model=provider, retry=_retry(retry_on=lambda exc: True))
    with pytest.raises(ContextOverflowError):
        await Runner.run(agent, "go")
    assert slept == []


async def test_reactive_policy_request_is_a_copy_of_the_transcript() -> None:
    class Mutating:
        async def compact(self, req: CompactionRequest) -> ContextResult:
            if req.overflow:
                assert isinstance(req.entries, tuple)
                return ContextResult(entries=req.entries, compacted=True)
            return ContextResult(entries=req.entries)

    provider = ScriptedProvider([_overflow(), text("ok")])
    result = await Runner.run(Agent("o", model=provider, context_policy=Mutating()), "go")
    assert result.output == "ok"


async def test_the_reactive_overflow_retry_does_not_use_up_a_retry_attempt() -> None:
    provider = ScriptedProvider([_overflow(), _flaky(), text("ok")])
    agent = Agent(
        "o",
        model=provider,
        context_policy=_ShrinkOnOverflow(compacted=True),
        retry=_retry(max_attempts=2),
    )
    result = await Runner.run(agent, "go")
    assert result.output == "ok"
    assert len(provider.calls) == 3 and slept == [1.0]


async def test_a_cancel_during_the_reactive_compaction_starts_no_second_call() -> None:
    token = CancelToken()

    class _CancelWhileCompacting(_ShrinkOnOverflow):
        async def compact(self, req: CompactionRequest) -> ContextResult:
            if req.overflow:
                token.cancel("user stop")  # the user stops the run while it compacts
            return await super().compact(req)

    provider = ScriptedProvider([_overflow(), text("never")])
    agent = Agent(
        "o",
        instructions="sys",
        model=provider,
        context_policy=_CancelWhileCompacting(compacted=True),
        retry=None,
    )
    events = await _events(agent, cancel_token=token)
    last = events[-1]
    assert isinstance(last, RunFailed) and isinstance(last.error, RunCancelled)
    assert len(provider.views) == 1  # the cancelled run sent no request after the cancel
