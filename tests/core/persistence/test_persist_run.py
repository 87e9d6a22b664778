"""Checkpointed runs through ``Runner`` (catalogue section 1 "Checkpointer protocol" ..
"Persistence order"; section 12 items 5-9): cadence, status, success order, replay, resume.

Stores are real (in-memory, SQLite in ``tmp_path``); ``Spy`` wraps one behind the public
``Checkpointer``/``Session`` seams to record the order of writes or fail one on demand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.budget import RunBudget
from lovia.checkpointer import CheckpointOptions, RunHead, RunSnapshot
from lovia.events import (
    Event,
    HandoffOccurred,
    RunCompleted,
)
from lovia.exceptions import BudgetExceeded, RunCancelled, StoreError, UserError
from lovia.hooks import AgentHooks
from lovia.messages import Message, Usage
from lovia.session import Segment
from lovia.stores import InMemoryCheckpointer, InMemorySession, SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)
from pydantic import BaseModel

Log = list[tuple[Any, ...]]


class SpyCheckpointer:
    """A real checkpointer that logs each append and can fail the ones ``fail`` picks."""

    def __init__(
        self,
        inner: Any,
        log: Log,
        fail: Callable[[Sequence[TranscriptEntry], RunHead], bool] | None = None,
    ) -> None:
        self.inner, self.log, self.fail = inner, log, fail

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        if self.fail is not None and self.fail(entries, head):
            self.log.append(("checkpoint-failed", len(entries), head.status))
            raise StoreError("injected checkpoint failure")
        self.log.append(("checkpoint", len(entries), head.status))
        await self.inner.append(run_id, entries, head)

    async def load(self, run_id: str) -> RunSnapshot | None:
        snapshot: RunSnapshot | None = await self.inner.load(run_id)
        return snapshot

    async def delete(self, run_id: str) -> None:
        self.log.append(("delete",))
        await self.inner.delete(run_id)


class SpySession:
    """A real session that logs each append."""

    def __init__(self, inner: Any, log: Log) -> None:
        self.inner, self.log = inner, log

    async def segments(self, session_id: str) -> list[Segment]:
        segments: list[Segment] = await self.inner.segments(session_id)
        return segments

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        entries: list[TranscriptEntry] = await self.inner.load(session_id)
        return entries

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        self.log.append(("session", len(entries), run_id))
        used: str = await self.inner.append(session_id, entries, run_id=run_id, meta=meta)
        return used

    async def clear(self, session_id: str) -> None:
        await self.inner.clear(session_id)

    def lease(
        self, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        lease: AbstractAsyncContextManager[None] = self.inner.lease(
            session_id, wait=wait, timeout=timeout
        )
        return lease


def _executions() -> tuple[list[tuple[str, int]], Any]:
    """A tool recording (call argument, ctx.turn) for every execution."""
    ran: list[tuple[str, int]] = []

    @tool
    async def work(item: str, ctx: RunContext[Any]) -> str:
        """Do one item."""
        ran.append((item, ctx.turn))
        return f"did {item}"

    return ran, work


def _calls(entries: Sequence[TranscriptEntry]) -> list[str]:
    return [e.call_id for e in entries if isinstance(e, ToolCallEntry)]


def _results(entries: Sequence[TranscriptEntry]) -> list[str]:
    return [e.call_id for e in entries if isinstance(e, ToolResultEntry)]


# -- cadence and order --------------------------------------------------------------------


async def test_saves_follow_each_model_output_and_each_tool_result() -> None:
    log: Log = []
    _, work = _executions()
    provider = ScriptedProvider(
        [batch(("work", {"item": "a"}, "a"), ("work", {"item": "b"}, "b")), text("done")]
    )
    store = SpyCheckpointer(InMemoryCheckpointer(), log)
    await Runner.run(
        Agent("w", model=provider, tools=[work]),
        "go",
        checkpoint=CheckpointOptions(store, "r1"),
    )
    assert log == [
        ("checkpoint", 3, "running"),  # input + both calls, after the model output
        ("checkpoint", 1, "running"),  # first result
        ("checkpoint", 1, "running"),  # second result
        ("checkpoint", 1, "running"),  # the final reply, after the model output
        ("checkpoint", 0, "completed"),  # finalised: head only
    ]


async def test_success_finalises_the_checkpoint_then_appends_the_session_then_deletes() -> None:
    log: Log = []
    provider = ScriptedProvider([text("hello")])
    session = SpySession(InMemorySession(), log)
    store = SpyCheckpointer(InMemoryCheckpointer(), log)
    await Runner.run(
        Agent("w", model=provider),
        "hi",
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(store, "r1", delete_on_success=True),
    )
    assert log == [
        ("checkpoint", 2, "running"),
        ("checkpoint", 0, "completed"),
        ("session", 2, "r1"),
        ("delete",),
    ]
    assert await store.load("r1") is None


async def test_the_completed_head_holds_output_usage_and_turns() -> None:
    store = InMemoryCheckpointer()
    provider = ScriptedProvider(
        [call("work", {"item": "a"}, usage=Usage(10, 2)), text("done", usage=Usage(20, 3))]
    )
    _, work = _executions()
    await Runner.run(
        Agent("w", model=provider, tools=[work]), "go", checkpoint=CheckpointOptions(store, "r")
    )
    snapshot = await store.load("r")
    assert snapshot is not None
    head = snapshot.head
    assert (head.status, head.output, head.turns, head.agent_name) == ("completed", "done", 2, "w")
    assert head.usage == Usage(30, 5, requests=2)
    assert head.last_input_tokens == 20
    assert snapshot.entries[0] == InputEntry("user", "go")  # own entries: no system head


async def test_a_failure_is_saved_as_failed_with_an_error_payload() -> None:
    store = InMemoryCheckpointer()
    provider = ScriptedProvider([call("work", {"item": "a"}), call("work", {"item": "b"})])
    _, work = _executions()
    with pytest.raises(Exception, match="max_turns"):
        await Runner.run(
            Agent("w", model=provider, tools=[work]),
            "go",
            max_turns=1,
            checkpoint=CheckpointOptions(store, "r"),
        )
    snapshot = await store.load("r")
    assert snapshot is not None
    assert snapshot.head.status == "failed"
    assert snapshot.head.error is not None
    assert snapshot.head.error["type"] == "MaxTurnsExceeded"
    with pytest.raises(UserError, match="cannot be resumed"):
        await Runner.run(
            Agent("w", model=provider), "again", checkpoint=CheckpointOptions(store, "r")
        )


async def test_a_backend_failure_on_the_terminal_save_is_swallowed() -> None:
    log: Log = []
    store = SpyCheckpointer(InMemoryCheckpointer(), log, fail=lambda _, h: h.status != "running")
    provider = ScriptedProvider([call("work", {"item": "a"})])
    _, work = _executions()
    with pytest.raises(Exception, match="max_turns") as info:
        await Runner.run(
            Agent("w", model=provider, tools=[work]),
            "go",
            max_turns=1,
            checkpoint=CheckpointOptions(store, "r"),
        )
    assert type(info.value).__name__ == "MaxTurnsExceeded"  # the run's error, not the store's
    assert log[-1] == ("checkpoint-failed", 0, "failed")


async def test_non_json_output_is_refused_and_the_run_fails() -> None:
    store = InMemoryCheckpointer()
    provider = ScriptedProvider([text('"abc"')])
    with pytest.raises(UserError, match="cannot be checkpointed") as info:
        await Runner.run(
            Agent("w", model=provider),
            "go",
            output_type=bytes,
            checkpoint=CheckpointOptions(store, "r"),
        )
    assert info.value.hint
    snapshot = await store.load("r")
    assert snapshot is not None and snapshot.head.status == "failed"


async def test_checkpoint_takes_checkpoint_options() -> None:
    with pytest.raises(UserError, match="CheckpointOptions") as info:
        bad: Any = object()  # wrong on purpose: the runtime check is what is under test
        await Runner.run(Agent("w", model=ScriptedProvider([])), "go", checkpoint=bad)
    assert info.value.hint


# -- replay -------------------------------------------------------------------------------


class Answer(BaseModel):
    city: str
    population: int


async def test_replay_returns_the_stored_result_without_calling_the_model() -> None:
    store = InMemoryCheckpointer()
    session = InMemorySession()
    first = await Runner.run(
        Agent("w", model=ScriptedProvider([text("forty-two", usage=Usage(7, 3))])),
        "question",
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(store, "r"),
    )
    fired: list[str] = []
    hooks = AgentHooks()

    @hooks.on_any
    def record(event: Event, ctx: RunContext[Any]) -> None:
        fired.append(type(event).__name__)

    def guard(output: Any, ctx: RunContext[Any]) -> None:
        fired.append("guardrail")

    empty = ScriptedProvider([])
    agent = Agent("w", model=empty, hooks=hooks, output_guardrails=[guard])
    handle = Runner.stream(
        agent,
        "a new input, ignored",
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(store, "r"),
    )
    events = [event async for event in handle]
    result = await handle.result()
    assert [type(e) for e in events] == [RunCompleted]
    assert fired == []
    assert len(empty.calls) == 0
    assert result.output == "forty-two"
    assert result.entries == first.entries
    assert result.usage == Usage(7, 3, requests=1)
    assert result.finish_reason is None and first.finish_reason == "stop"
    assert result.turns == 1 and result.run_id == "r"
    assert [s.run_id for s in await session.segments("s")] == ["r"]


async def test_replay_rehydrates_a_run_level_output_type() -> None:
    store = InMemoryCheckpointer()
    reply = text('{"city": "Lyon", "population": 520000}')
    options = CheckpointOptions(store, "r")
    await Runner.run(
        Agent("w", model=ScriptedProvider([reply])), "q", output_type=Answer, checkpoint=options
    )
    result = await Runner.run(
        Agent("w", model=ScriptedProvider([])), "q", output_type=Answer, checkpoint=options
    )
    assert result.output == Answer(city="Lyon", population=520000)


async def test_replay_heals_a_session_lost_in_the_crash_window() -> None:
    # A completed checkpoint whose session append never happened (the crash window).
    store = InMemoryCheckpointer()
    first = await Runner.run(
        Agent("w", model=ScriptedProvider([text("ok")])),
        "q",
        checkpoint=CheckpointOptions(store, "r"),
    )
    session = InMemorySession()
    await session.append("s", [InputEntry("user", "earlier")], run_id="r0")
    await Runner.run(
        Agent("w", model=ScriptedProvider([])),
        "q",
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(store, "r"),
    )
    segments = await session.segments("s")
    assert [s.run_id for s in segments] == ["r0", "r"]
    assert list(segments[1].entries) == first.entries


async def test_replay_of_an_unreachable_agent_falls_back_to_the_entry_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryCheckpointer()
    provider = ScriptedProvider([call("transfer_to_billing", {}), text("paid")])
    billing = Agent("billing", model=provider)
    await Runner.run(
        Agent("triage", model=provider, handoffs=[billing]),
        "q",
        checkpoint=CheckpointOptions(store, "r"),
    )
    renamed = Agent("triage", model=ScriptedProvider([]))
    with caplog.at_level(logging.WARNING, logger="lovia.runtime"):
        result = await Runner.run(renamed, "q", checkpoint=CheckpointOptions(store, "r"))
    assert result.final_agent is renamed and result.output == "paid"
    assert "no longer reachable" in caplog.text


# -- resume -------------------------------------------------------------------------------


async def _interrupt_mid_batch(
    store: Any, session: Any, ran: list[tuple[str, int]], work: Any
) -> None:
    """Turn 1: ``a`` then a cancelling ``stop``; ``b`` is never dispatched."""

    @tool(parallel=False)
    async def stop(ctx: RunContext[Any]) -> str:
        """Cancels the run."""
        ctx.cancel_token.cancel("operator")
        return "stopping"

    provider = ScriptedProvider(
        [
            call("work", {"item": "warmup"}, call_id="w"),
            batch(
                ("work", {"item": "a"}, "a"),
                ("stop", {}, "s"),
                ("work", {"item": "b"}, "b"),
            ),
        ]
    )
    agent = Agent("w", instructions="Be brief.", model=provider, tools=[work, stop])
    with pytest.raises(RunCancelled):
        await Runner.run(
            agent,
            "do it",
            session=session,
            session_id="s",
            checkpoint=CheckpointOptions(store, "r"),
        )


async def test_resume_drains_only_dangling_calls_at_the_same_turn(tmp_path: Path) -> None:
    ran, work = _executions()
    async with (
        SQLiteCheckpointer(tmp_path / "c.db") as store,
        SQLiteSession(tmp_path / "c.db") as session,
    ):
        await session.append("s", [InputEntry("user", "before"), AssistantTextEntry("ok")])
        await _interrupt_mid_batch(store, session, ran, work)
        stored = await store.load("r")
        assert stored is not None and stored.head.status == "interrupted"
        assert _results(stored.entries) == ["w", "a", "s"]
        assert ran == [("warmup", 1), ("a", 2)]

        turns = {"rendered": 0}

        def prompt(ctx: RunContext[Any]) -> str:
            turns["rendered"] += 1
            return "Resumed prompt."

        provider = ScriptedProvider([text("all done")])
        agent = Agent("w", instructions=prompt, model=provider, tools=[work])
        result = await Runner.run(
            agent,
            "ignored",
            session=session,
            session_id="s",
            checkpoint=CheckpointOptions(store, "r"),
        )
        assert ran[2:] == [("b", 2)]  # only the never-dispatched call, at the same turn
        assert result.output == "all done" and result.turns == 3
        sent = provider.calls[0]
        assert sent[0] == Message("system", "Resumed prompt.")
        assert sent[1:3] == [Message("user", "before"), Message("assistant", "ok")]
        assert "ignored" not in [m.content for m in sent]
        assert _results(result.entries) == ["w", "a", "s", "b"]
        segments = await session.segments("s")
        assert [s.run_id for s in segments][1:] == ["r"]
        assert list(segments[1].entries) == result.entries


async def test_resume_only_with_empty_input_resumes_a_system_less_agent() -> None:
    ran, work = _executions()
    store, session = InMemoryCheckpointer(), InMemorySession()
    await _interrupt_mid_batch(store, session, ran, work)
    stored = await store.load("r")
    assert stored is not None
    provider = ScriptedProvider([text("fine")])
    result = await Runner.run(
        Agent("w", model=provider, tools=[work]),  # no instructions: no system head
        [],
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(store, "r", if_run_exists="resume_only"),
    )
    assert result.output == "fine"
    assert ran[-1] == ("b", 2)
    final = await store.load("r")
    assert final is not None
    assert final.entries == (
        *stored.entries,
        ToolResultEntry("b", "did b", "did b"),
        AssistantTextEntry("fine"),
    )
    assert list(final.entries) == result.entries


async def test_the_run_span_says_whether_the_run_resumed() -> None:
    from lovia.tracing import InMemoryTracer

    ran, work = _executions()
    store, session = InMemoryCheckpointer(), InMemorySession()
    await _interrupt_mid_batch(store, session, ran, work)
    tracer = InMemoryTracer()
    await Runner.run(
        Agent("w", model=ScriptedProvider([text("fine")]), tools=[work]),
        [],
        tracer=tracer,
        checkpoint=CheckpointOptions(store, "r"),
    )
    run_span = next(span for span in tracer.spans if span.name == "run")
    assert run_span.attributes["resumed"] is True


async def test_resume_from_a_snapshot_without_a_store() -> None:
    ran, work = _executions()
    store, session = InMemoryCheckpointer(), InMemorySession()
    await _interrupt_mid_batch(store, session, ran, work)
    snapshot = await store.load("r")
    assert snapshot is not None
    result = await Runner.run(
        Agent("w", model=ScriptedProvider([text("fine")]), tools=[work]),
        [],
        checkpoint=CheckpointOptions(resume_from=snapshot),
    )
    assert result.output == "fine" and result.run_id == "r"
    assert ran[-1] == ("b", 2)


async def test_resumed_runs_stream_events() -> None:
    ran, work = _executions()
    store, session = InMemoryCheckpointer(), InMemorySession()
    await _interrupt_mid_batch(store, session, ran, work)
    handle = Runner.stream(
        Agent("w", model=ScriptedProvider([text("fine")]), tools=[work]),
        [],
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(store, "r"),
    )
    names = [type(e).__name__ for e in [e async for e in handle]]
    assert names[:3] == ["RunStarted", "ToolCallStarted", "ToolCallCompleted"]
    assert names[-1] == "RunCompleted"


async def test_restart_keeps_only_the_new_runs_entries() -> None:
    ran, work = _executions()
    store, session = InMemoryCheckpointer(), InMemorySession()
    await _interrupt_mid_batch(store, session, ran, work)
    await Runner.run(
        Agent("w", model=ScriptedProvider([text("fresh")])),
        "new question",
        checkpoint=CheckpointOptions(store, "r", if_run_exists="restart"),
    )
    snapshot = await store.load("r")
    assert snapshot is not None
    assert snapshot.entries == (InputEntry("user", "new question"), AssistantTextEntry("fresh"))


async def test_budget_trip_interrupts_and_the_resume_drains_the_rest() -> None:
    ran, work = _executions()
    store = InMemoryCheckpointer()
    provider = ScriptedProvider(
        [batch(*[("work", {"item": x}, x) for x in ("a", "b", "c")]), text("never")]
    )
    with pytest.raises(BudgetExceeded):
        await Runner.run(
            Agent("w", model=provider, tools=[work]),
            "go",
            budget=RunBudget(max_tool_calls=2),
            checkpoint=CheckpointOptions(store, "r"),
        )
    stored = await store.load("r")
    assert stored is not None and stored.head.status == "interrupted"
    assert sorted(_results(stored.entries)) == ["a", "b"]
    result = await Runner.run(
        Agent("w", model=ScriptedProvider([text("done")]), tools=[work]),
        [],
        checkpoint=CheckpointOptions(store, "r", if_run_exists="resume_only"),
    )
    assert sorted(x for x, _ in ran) == ["a", "b", "c"]
    assert ran[-1] == ("c", 1)
    assert sorted(_results(result.entries)) == ["a", "b", "c"]


async def test_a_store_failure_mid_batch_aborts_and_cancels_siblings() -> None:
    log: Log = []
    started = asyncio.Event()
    cancelled: list[str] = []

    @tool
    async def slow() -> str:
        """Runs until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        return "slow"

    @tool
    async def quick() -> str:
        """Finishes once slow runs."""
        await started.wait()
        return "quick"

    def fail_on_first_result(entries: Sequence[TranscriptEntry], head: RunHead) -> bool:
        return any(isinstance(e, ToolResultEntry) for e in entries)

    store = SpyCheckpointer(InMemoryCheckpointer(), log, fail=fail_on_first_result)
    provider = ScriptedProvider([batch(("slow", {}, "s"), ("quick", {}, "q")), text("never")])
    with pytest.raises(StoreError):
        await asyncio.wait_for(
            Runner.run(
                Agent("w", model=provider, tools=[slow, quick]),
                "go",
                checkpoint=CheckpointOptions(store, "r"),
            ),
            10,
        )
    assert cancelled == ["slow"]
    snapshot = await store.load("r")
    assert snapshot is not None
    assert _results(snapshot.entries) == []  # both calls stay dangling for a resume


async def test_a_crash_after_the_final_reply_settles_it_without_the_model() -> None:
    # The finalise fails (as a crash there would), leaving the final reply stored.
    log: Log = []
    inner = InMemoryCheckpointer()
    store = SpyCheckpointer(inner, log, fail=lambda _, h: h.status == "completed")
    with pytest.raises(StoreError):
        await Runner.run(
            Agent("w", model=ScriptedProvider([text("the answer")])),
            "q",
            checkpoint=CheckpointOptions(store, "r"),
        )
    session = InMemorySession()
    result = await Runner.run(
        Agent("w", model=ScriptedProvider([])),
        [],
        session=session,
        session_id="s",
        checkpoint=CheckpointOptions(inner, "r"),
    )
    assert result.output == "the answer" and result.turns == 1
    assert await session.load("s") == [InputEntry("user", "q"), AssistantTextEntry("the answer")]


async def test_an_injected_message_is_checkpointed_before_the_model_call() -> None:
    from lovia.steering import Mailbox

    store = InMemoryCheckpointer()
    held: list[tuple[TranscriptEntry, ...]] = []

    class Probe(ScriptedProvider):
        """Notes what the store holds at the moment the model is called."""

        async def stream(self, entries: Any, **kwargs: Any) -> Any:
            snapshot = await store.load("r")
            held.append(snapshot.entries if snapshot is not None else ())
            async for delta in super().stream(entries, **kwargs):
                yield delta

    mailbox = Mailbox()
    mailbox.push("also this")
    await Runner.run(
        Agent("w", model=Probe([text("ok")])),
        "go",
        mailbox=mailbox,
        checkpoint=CheckpointOptions(store, "r"),
    )
    assert held == [(InputEntry("user", "go"), InputEntry("user", "also this"))]


async def test_malformed_arguments_persisted_before_rejection_are_normalised() -> None:
    ran, work = _executions()

    @tool
    async def stop(ctx: RunContext[Any]) -> str:
        """Cancels the run."""
        ctx.cancel_token.cancel("x")
        return "stopping"

    store = InMemoryCheckpointer()
    provider = ScriptedProvider([batch(("work", '{"item": ', "bad"), ("stop", {}, "s"))])
    with pytest.raises(RunCancelled):
        await Runner.run(
            Agent("w", model=provider, tools=[work, stop]),
            "go",
            checkpoint=CheckpointOptions(store, "r"),
        )
    stored = await store.load("r")
    assert stored is not None and stored.entries[1] == ToolCallEntry("bad", "work", '{"item": ')
    resumed = ScriptedProvider([text("ok")])
    result = await Runner.run(
        Agent("w", model=resumed, tools=[work, stop]), [], checkpoint=CheckpointOptions(store, "r")
    )
    assert result.entries[1] == ToolCallEntry("bad", "work", "{}")
    assert resumed.calls[0][1].tool_calls[0].arguments == "{}"


# -- handoffs across a resume -------------------------------------------------------------


def _triage(provider: ScriptedProvider, *tools: Any) -> tuple[Agent[Any], Agent[Any]]:
    billing = Agent(
        "billing", instructions="You handle billing.", model=provider, tools=list(tools)
    )
    triage = Agent(
        "triage", instructions="Route.", model=provider, tools=list(tools), handoffs=[billing]
    )
    return triage, billing


async def test_a_handoff_accepted_before_the_crash_is_applied_on_resume() -> None:
    ran, work = _executions()

    @tool(parallel=False)
    async def stop(ctx: RunContext[Any]) -> str:
        """Cancels the run."""
        ctx.cancel_token.cancel("x")
        return "stopping"

    store = InMemoryCheckpointer()
    provider = ScriptedProvider(
        [
            batch(
                ("transfer_to_billing", {}, "h"),
                ("stop", {}, "s"),
                ("work", {"item": "a"}, "a"),
                ("transfer_to_billing", {}, "h2"),
            )
        ]
    )
    triage, _ = _triage(provider, work, stop)
    with pytest.raises(RunCancelled):
        await Runner.run(triage, "refund", checkpoint=CheckpointOptions(store, "r"))
    stored = await store.load("r")
    assert stored is not None and stored.head.agent_name == "triage"

    resumed = ScriptedProvider([text("refunded")])
    triage, billing = _triage(resumed, work, stop)
    handle = Runner.stream(triage, [], checkpoint=CheckpointOptions(store, "r"))
    events = [e async for e in handle]
    result = await handle.result()
    assert result.final_agent is billing and result.output == "refunded"
    assert [type(e) for e in events if isinstance(e, HandoffOccurred)] == [HandoffOccurred]
    assert resumed.calls[0][0] == Message("system", "You handle billing.")
    second = [e for e in result.entries if isinstance(e, ToolResultEntry) and e.call_id == "h2"]
    assert second[0].is_error  # the first handoff still wins after the resume
    assert ran == [("a", 1)]


async def test_a_run_interrupted_after_a_handoff_resumes_in_the_target() -> None:
    ran, work = _executions()

    @tool
    async def stop(ctx: RunContext[Any]) -> str:
        """Cancels the run."""
        ctx.cancel_token.cancel("x")
        return "stopping"

    store = InMemoryCheckpointer()
    provider = ScriptedProvider([call("transfer_to_billing", {}), call("stop", {})])
    triage, _ = _triage(provider, work, stop)
    with pytest.raises(RunCancelled):
        await Runner.run(triage, "refund", checkpoint=CheckpointOptions(store, "r"))
    stored = await store.load("r")
    assert stored is not None and stored.head.agent_name == "billing"

    resumed = ScriptedProvider([text("refunded")])
    triage, billing = _triage(resumed, work, stop)
    result = await Runner.run(triage, [], checkpoint=CheckpointOptions(store, "r"))
    assert result.final_agent is billing
    assert resumed.calls[0][0] == Message("system", "You handle billing.")


async def test_resume_into_an_unreachable_agent_is_a_user_error() -> None:
    ran, work = _executions()
    store, session = InMemoryCheckpointer(), InMemorySession()
    await _interrupt_mid_batch(store, session, ran, work)
    with pytest.raises(UserError, match="not reachable") as info:
        await Runner.run(
            Agent("renamed", model=ScriptedProvider([])),
            [],
            session=session,
            session_id="s",
            checkpoint=CheckpointOptions(store, "r"),
        )
    assert info.value.hint
    stored = await store.load("r")
    assert stored is not None and stored.head.status == "interrupted"  # left untouched


async def test_a_reissued_run_id_that_reached_the_session_is_refused() -> None:
    store, session = InMemoryCheckpointer(), InMemorySession()
    options = CheckpointOptions(store, "r", delete_on_success=True)
    await Runner.run(
        Agent("w", model=ScriptedProvider([text("a")])),
        "q",
        session=session,
        session_id="s",
        checkpoint=options,
    )
    empty = ScriptedProvider([])
    with pytest.raises(UserError, match="already completed") as info:
        await Runner.run(
            Agent("w", model=empty), "q", session=session, session_id="s", checkpoint=options
        )
    assert info.value.hint and len(empty.calls) == 0


async def test_the_context_carries_the_checkpoints_run_id_and_the_session_id() -> None:
    seen: list[tuple[str | None, str | None]] = []

    @tool
    async def where(ctx: RunContext[Any]) -> str:
        """Reports the run's ids."""
        seen.append((ctx.run_id, ctx.session_id))
        return "here"

    provider = ScriptedProvider([call("where", {}), text("done")])
    result = await Runner.run(
        Agent("w", model=provider, tools=[where]),
        "go",
        session=InMemorySession(),
        session_id="s-1",
        checkpoint=CheckpointOptions(InMemoryCheckpointer(), "run-7"),
    )
    assert seen == [("run-7", "s-1")]
    assert (result.run_id, result.session_id) == ("run-7", "s-1")


async def test_an_approval_is_asked_again_for_a_call_resumed_without_a_result() -> None:
    asked: list[str] = []
    attempts: list[int] = []

    @tool(needs_approval=True)
    async def deploy(ctx: RunContext[Any]) -> str:
        """Deploys; the first attempt is cut off by a cancel."""
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            ctx.cancel_token.cancel("operator stopped the run")
            await asyncio.Event().wait()
        return "deployed"

    def handler(call: Any, ctx: RunContext[Any]) -> bool:
        asked.append(call.id)
        return True

    store = InMemoryCheckpointer()
    first = Agent("d", model=ScriptedProvider([call("deploy", {}, call_id="d1")]), tools=[deploy])
    with pytest.raises(RunCancelled):
        await Runner.run(
            first.clone(approval_handler=handler), "go", checkpoint=CheckpointOptions(store, "r")
        )
    stored = await store.load("r")
    assert stored is not None and stored.head.status == "interrupted"
    provider = ScriptedProvider([text("done")])
    result = await Runner.run(
        first.clone(model=provider, approval_handler=handler),
        "go",
        checkpoint=CheckpointOptions(store, "r"),
    )
    assert asked == ["d1", "d1"]  # the decision was not persisted: asked again on resume
    assert attempts == [1, 2] and result.output == "done"
