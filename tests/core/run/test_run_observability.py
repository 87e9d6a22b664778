"""Hooks, tracing, sessions and provider ownership in the run loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.context_policy import CompactionRequest, ContextResult, NoopContextPolicy
from lovia.events import (
    ContextCompacted,
    Event,
    RunCompleted,
    RunFailed,
    TextDelta,
    ToolCallCompleted,
)
from lovia.exceptions import SessionBusyError, UserError
from lovia.hooks import AgentHooks
from lovia.messages import Message, Usage
from lovia.providers.registry import register_provider
from lovia.stores.memory import InMemorySession
from lovia.testing import ScriptedProvider, call, text
from lovia.tracing import InMemoryTracer
from lovia.transcript import AssistantTextEntry, InputEntry


@tool
async def ping() -> str:
    """Ping."""
    return "pong"


async def test_hooks_see_every_event_in_stream_order() -> None:
    hooks = AgentHooks()
    dispatched: list[Event] = []
    hooks.on_any(lambda event, ctx: dispatched.append(event))
    provider = ScriptedProvider([call("ping", {}), text("ok")])
    streamed = [
        e async for e in Runner.stream(Agent("h", model=provider, tools=[ping], hooks=hooks), "go")
    ]
    assert dispatched == streamed


async def test_a_raising_hook_does_not_abort_the_run() -> None:
    hooks = AgentHooks()

    @hooks.on(ToolCallCompleted)
    def broken(event: ToolCallCompleted, ctx: RunContext[Any]) -> None:
        raise RuntimeError("hook broke")

    provider = ScriptedProvider([call("ping", {}), text("ok")])
    result = await Runner.run(Agent("h", model=provider, tools=[ping], hooks=hooks), "go")
    assert result.output == "ok"


async def test_terminal_event_reaches_hooks_on_failure() -> None:
    hooks = AgentHooks()
    seen: list[type[Event]] = []
    hooks.on(RunFailed)(lambda e, ctx: seen.append(type(e)))
    with pytest.raises(AssertionError):
        await Runner.run(Agent("h", model=ScriptedProvider([]), hooks=hooks), "go")
    assert seen == [RunFailed]


async def test_hooks_receive_the_live_context() -> None:
    hooks = AgentHooks()
    entries_seen: list[int] = []
    hooks.on(RunCompleted)(lambda e, ctx: entries_seen.append(len(ctx.entries)))
    provider = ScriptedProvider([text("ok")])
    await Runner.run(Agent("h", model=provider, hooks=hooks), "go")
    assert entries_seen == [2]


async def test_tracer_records_run_model_and_tool_spans() -> None:
    tracer = InMemoryTracer()
    provider = ScriptedProvider([call("ping", {}, call_id="p1"), text("ok")])
    await Runner.run(Agent("t", model=provider, tools=[ping]), "go", tracer=tracer)
    names = [s.name for s in tracer.spans]
    assert names.count("model_call") == 2
    assert names.count("tool_call") == 1
    assert names[-1] == "run"
    tool_span = next(s for s in tracer.spans if s.name == "tool_call")
    assert tool_span.attributes == {"name": "ping", "call_id": "p1"}
    run_span = tracer.spans[-1]
    assert run_span.attributes["turns"] == 2


async def test_tracer_records_handoff_spans() -> None:
    tracer = InMemoryTracer()
    provider = ScriptedProvider([call("transfer_to_b", {}), text("ok")])
    b = Agent("b", model=provider)
    await Runner.run(Agent("a", model=provider, handoffs=[b]), "go", tracer=tracer)
    handoff = next(s for s in tracer.spans if s.name == "handoff")
    assert handoff.attributes == {"from_agent": "a", "to_agent": "b"}


# -- sessions -------------------------------------------------------------------------


async def test_session_history_is_loaded_and_the_run_is_appended_once() -> None:
    session = InMemorySession()
    agent = Agent("s", instructions="Sys.", model=ScriptedProvider([text("first")]))
    await Runner.run(agent, "one", session=session, session_id="sid")
    provider = ScriptedProvider([text("second")])
    result = await Runner.run(agent.clone(model=provider), "two", session=session, session_id="sid")
    assert provider.calls[0] == [
        Message("system", "Sys."),
        Message("user", "one"),
        Message("assistant", "first"),
        Message("user", "two"),
    ]
    assert result.entries == [InputEntry("user", "two"), AssistantTextEntry("second")]
    segments = await session.segments("sid")
    assert [s.run_id for s in segments][-1] == result.run_id
    assert [list(s.entries) for s in segments] == [
        [InputEntry("user", "one"), AssistantTextEntry("first")],
        [InputEntry("user", "two"), AssistantTextEntry("second")],
    ]


async def test_failed_runs_are_not_appended_to_the_session() -> None:
    session = InMemorySession()
    with pytest.raises(AssertionError):
        await Runner.run(
            Agent("s", model=ScriptedProvider([])), "x", session=session, session_id="sid"
        )
    assert await session.segments("sid") == []


async def test_policy_scratch_is_stored_and_carried_to_the_next_run() -> None:
    seen: list[dict[str, Any]] = []

    class Counting:
        async def compact(self, req: CompactionRequest) -> ContextResult:
            seen.append(dict(req.scratch))
            req.scratch["calls"] = req.scratch.get("calls", 0) + 1
            return ContextResult(entries=req.entries)

    session = InMemorySession()
    agent = Agent("s", context_policy=Counting())
    await Runner.run(
        agent.clone(model=ScriptedProvider([text("a")])), "1", session=session, session_id="k"
    )
    await Runner.run(
        agent.clone(model=ScriptedProvider([text("b")])), "2", session=session, session_id="k"
    )
    assert seen == [{}, {"calls": 1}]
    segments = await session.segments("k")
    assert segments[-1].meta["context"] == {"calls": 2}


async def test_proactive_compaction_emits_context_compacted_and_shapes_the_view() -> None:
    class DropAllButLast:
        async def compact(self, req: CompactionRequest) -> ContextResult:
            return ContextResult(
                entries=list(req.entries)[-1:], changed=True, compacted=True, reason="test"
            )

    session = InMemorySession()
    provider = ScriptedProvider([text("ok")])
    agent = Agent("s", instructions="Sys.", model=provider, context_policy=DropAllButLast())
    events = [e async for e in Runner.stream(agent, "go", session=session, session_id="c")]
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert len(compacted) == 1 and compacted[0].notice.reason == "test"
    assert provider.calls[0] == [Message("user", "go")]
    assert (await session.segments("c"))[-1].meta["notices"][0]["reason"] == "test"


# -- provider ownership -----------------------------------------------------------------


async def test_a_provider_built_from_a_string_is_closed_after_the_run() -> None:
    closed: list[str] = []

    class Owned(ScriptedProvider):
        async def aclose(self) -> None:
            closed.append(self.model)

    register_provider("lovia-test-owned", lambda model, **kw: Owned([text("ok")], model=model))
    result = await Runner.run(Agent("p", model="lovia-test-owned:m1"), "go")
    assert result.output == "ok"
    assert closed == ["m1"]


async def test_text_deltas_reach_the_consumer_only_when_streamed() -> None:
    provider = ScriptedProvider([text("hey")])
    deltas = [
        e.delta
        async for e in Runner.stream(Agent("d", model=provider), "go")
        if isinstance(e, TextDelta)
    ]
    assert deltas == ["h", "e", "y"]


async def test_a_policy_cannot_mutate_the_transcript_through_its_request() -> None:
    class Mutating:
        async def compact(self, req: CompactionRequest) -> ContextResult:
            try:
                req.entries.append(InputEntry("user", "injected"))  # type: ignore[attr-defined]
            except AttributeError:
                pass
            return ContextResult(entries=req.entries)

    provider = ScriptedProvider([text("ok")])
    result = await Runner.run(Agent("m", model=provider, context_policy=Mutating()), "go")
    assert result.entries == [InputEntry("user", "go"), AssistantTextEntry("ok")]
    assert provider.calls[0] == [Message("user", "go")]


async def test_tool_call_span_records_the_tools_exception() -> None:
    @tool
    async def broken() -> str:
        """Broken."""
        raise ValueError("bad input")

    tracer = InMemoryTracer()
    provider = ScriptedProvider([call("broken", {}), text("ok")])
    await Runner.run(Agent("t", model=provider, tools=[broken]), "go", tracer=tracer)
    span = next(s for s in tracer.spans if s.name == "tool_call")
    assert isinstance(span.error, ValueError)


async def test_run_and_model_call_spans_carry_their_attributes() -> None:
    tracer = InMemoryTracer()
    provider = ScriptedProvider(
        [call("ping", {}, usage=Usage(10, 2)), text("ok", usage=Usage(20, 3))], model="m-1"
    )
    result = await Runner.run(Agent("t", model=provider, tools=[ping]), "go", tracer=tracer)
    run_span = tracer.spans[-1]
    assert run_span.name == "run"
    assert run_span.attributes == {
        "agent": "t",
        "run_id": result.run_id,
        "resumed": False,
        "turns": 2,
        "total_tokens": 35,
    }
    models = [s.attributes for s in tracer.spans if s.name == "model_call"]
    assert models == [
        {"model": "m-1", "provider": "scripted", "turn": 1, "input_tokens": 10, "output_tokens": 2},
        {"model": "m-1", "provider": "scripted", "turn": 2, "input_tokens": 20, "output_tokens": 3},
    ]


async def test_agent_as_tool_sub_runs_record_into_the_parents_tracer() -> None:
    tracer = InMemoryTracer()
    child = Agent("helper", model=ScriptedProvider([text("child answer")]))
    provider = ScriptedProvider([call("ask_helper", {"input": "q"}), text("done")])
    parent = Agent("boss", model=provider, tools=[child.as_tool()])
    await Runner.run(parent, "go", tracer=tracer)
    runs = [s for s in tracer.spans if s.name == "run"]
    assert [s.attributes["agent"] for s in runs] == ["helper", "boss"]
    assert runs[0].parent == "tool_call"


async def test_a_falsy_policy_instance_is_still_the_agents_policy() -> None:
    seen: list[int] = []

    class Sized:
        """A policy that happens to define ``__len__`` (so it is falsy when empty)."""

        def __len__(self) -> int:
            return 0

        async def compact(self, req: CompactionRequest) -> ContextResult:
            seen.append(len(req.entries))
            return ContextResult(entries=req.entries)

    provider = ScriptedProvider([text("ok")])
    await Runner.run(Agent("p", model=provider, context_policy=Sized()), "go")
    assert seen == [1]


async def test_the_run_narrates_its_steps_on_the_lovia_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider(
        [
            call("ping", {}, call_id="p1", usage=Usage(10, 2)),
            call("transfer_to_b", {}, call_id="h1", usage=Usage(20, 3)),
            text("ok", usage=Usage(30, 4)),
        ]
    )
    b = Agent("b", model=provider)
    a = Agent("a", model=provider, tools=[ping], handoffs=[b])
    with caplog.at_level("INFO", logger="lovia"):
        await Runner.run(a, "go", context_policy=NoopContextPolicy())
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("lovia")]
    assert [line.split(" ")[0].rstrip(":") for line in lines] == [
        "run.start",
        "model.done",
        "tool.start",
        "model.done",
        "tool.start",
        "run.handoff",
        "model.done",
        "run.done",
    ]
    assert lines[1] == "model.done: turn=1 tokens=12 calls=1"
    assert lines[5] == "run.handoff: a -> b"
    assert lines[-1] == "run.done: agent=b turns=3"


class _LeaseSpy(InMemorySession):
    """A real in-memory session that signals when a second run asks for the lease."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0
        self.second_request = asyncio.Event()

    def lease(self, session_id: str, *, wait: bool = True, timeout: float | None = None) -> Any:
        self.requests += 1
        if self.requests == 2:
            self.second_request.set()
        return super().lease(session_id, wait=wait, timeout=timeout)


async def test_a_second_run_on_a_busy_session_waits_and_then_sees_the_first_run() -> None:
    session = _LeaseSpy()
    holding = asyncio.Event()

    @tool
    async def hold() -> str:
        """Returns once the second run asked for the session."""
        holding.set()
        await session.second_request.wait()
        return "held"

    first = Agent("a", model=ScriptedProvider([call("hold", {}), text("first done")]), tools=[hold])
    second_provider = ScriptedProvider([text("second done")])
    first_run = asyncio.create_task(Runner.run(first, "one", session=session, session_id="s"))
    await holding.wait()  # the first run holds the lease
    second = await Runner.run(
        Agent("b", model=second_provider), "two", session=session, session_id="s"
    )
    await first_run
    sent = [m.content for m in second_provider.calls[0]]
    assert sent[0] == "one" and sent[-2:] == ["first done", "two"]
    assert second.output == "second done"


async def test_lease_timeout_zero_fails_at_once_on_a_busy_session() -> None:
    session = InMemorySession()
    holding, release = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Holds the session until released."""
        holding.set()
        await release.wait()
        return "held"

    first = Agent("a", model=ScriptedProvider([call("hold", {}), text("done")]), tools=[hold])
    first_run = asyncio.create_task(Runner.run(first, "one", session=session, session_id="s"))
    await holding.wait()
    provider = ScriptedProvider([text("never")])
    with pytest.raises(SessionBusyError) as info:
        await Runner.run(
            Agent("b", model=provider), "two", session=session, session_id="s", lease_timeout=0
        )
    assert info.value.hint
    assert len(provider.calls) == 0
    release.set()
    assert (await first_run).output == "done"


def test_lease_timeout_needs_a_session() -> None:
    with pytest.raises(UserError, match="lease_timeout") as info:
        Runner.stream(Agent("a", model=ScriptedProvider([])), "hi", lease_timeout=0)
    assert info.value.hint
