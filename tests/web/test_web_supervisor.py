"""RunSupervisor driven directly (no HTTP): capacity, shutdown, slow watchers, deletion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.exceptions import UserError
from lovia.providers.base import ModelDelta, ModelSettings
from lovia.testing import ScriptedProvider, call, text
from lovia.tools.base import Tool
from lovia.transcript import TranscriptEntry
from lovia.web import (
    ApprovalRegistry,
    CapacityExceeded,
    ChatStore,
    EventHub,
    NotFound,
    RunSupervisor,
)

from .conftest import deploy, gated_agent, scripted_agent


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ChatStore]:
    s = ChatStore.sqlite(str(tmp_path / "chat.db"))
    yield s
    await s.aclose()


async def test_capacity_is_bounded_and_a_slot_frees_when_a_run_ends(store: ChatStore) -> None:
    gate, agent = gated_agent(text("one"), text("two"))
    supervisor = RunSupervisor({"helper": agent}, store, max_background_runs=1)
    first = await supervisor.start("park")
    await gate.entered.wait()
    with pytest.raises(CapacityExceeded, match="all 1 background-run slots are busy"):
        await supervisor.start("no room")
    # Attaching to the live run needs no slot.
    attached = await supervisor.start("more", session_id=first.run.session_id)
    assert attached.attached and attached.run is first.run
    gate.open()
    assert [r.type async for r in supervisor.follow(first.run.run_id)][-1] == "done"
    second = await supervisor.start("room again")
    assert [r.data async for r in supervisor.follow(second.run.run_id)][-1]["output"] == "two"
    await supervisor.aclose()


async def test_unknown_agent_and_missing_run_are_not_found(store: ChatStore) -> None:
    supervisor = RunSupervisor({"helper": scripted_agent()}, store)
    with pytest.raises(NotFound, match="unknown agent 'nope'"):
        await supervisor.start("hi", agent="nope")
    with pytest.raises(NotFound, match="no live run"):
        supervisor.cancel("nobody")
    assert supervisor.live_runs() == []


async def test_shutdown_keeps_the_run_resumable_and_a_new_supervisor_resumes_it(
    store: ChatStore,
) -> None:
    gate, agent = gated_agent(text("resumed and done"))
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("long job")
    await gate.entered.wait()
    await supervisor.aclose()
    run = started.run
    meta = await store.get_session(run.session_id)
    assert meta is not None and meta.active_run_id == run.run_id  # still resumable
    assert await store.checkpointer.load(run.run_id) is not None
    before = await store.read_events(run.run_id)
    assert "done" not in [r.type for r in before]  # open-ended: the run is not over
    with pytest.raises(CapacityExceeded, match="shutting down"):
        await supervisor.start("after close")

    # "Restart": a new supervisor over the same store resumes the same run and seq.
    gate.open()  # the interrupted call is dangling, so the resume runs it again
    restarted = RunSupervisor({"helper": agent}, store)
    resumed = await restarted.resume(run.session_id)
    assert resumed is not None and resumed.run_id == run.run_id
    after = [r async for r in restarted.follow(run.run_id, after=before[-1].seq)]
    seqs = [r.seq for r in before + after]
    assert seqs == list(range(1, len(seqs) + 1))
    assert after[-1].data["status"] == "completed"
    assert after[-1].data["output"] == "resumed and done"
    assert await restarted.resume(run.session_id) is None  # nothing left to resume
    transcript = await store.session.load(run.session_id)
    assert [type(e).__name__ for e in transcript] == [
        "InputEntry",
        "ToolCallEntry",
        "ToolResultEntry",
        "AssistantTextEntry",
    ]
    await restarted.aclose()


async def test_a_slow_watcher_dropped_by_the_hub_catches_up_from_the_log(
    store: ChatStore,
) -> None:
    gate, agent = gated_agent(text("a long enough reply"))
    supervisor = RunSupervisor({"helper": agent}, store, hub=EventHub(max_queue=2))
    started = await supervisor.start("go")
    watcher = supervisor.follow(started.run.run_id)
    first = await anext(watcher)  # subscribed; now fall behind while the run streams
    await gate.entered.wait()
    gate.open()
    assert started.run.task is not None
    await started.run.task  # the whole run went by: far more than 2 records queued
    rest = [r async for r in watcher]
    seqs = [first.seq] + [r.seq for r in rest]
    assert seqs == list(range(1, len(seqs) + 1))  # dropped, yet no gap and no duplicate
    assert rest[-1].data["output"] == "a long enough reply"
    await supervisor.aclose()


async def test_stop_waits_for_the_run_so_a_delete_leaves_nothing_behind(
    store: ChatStore,
) -> None:
    gate, agent = gated_agent(text("never"))
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("go")
    await gate.entered.wait()
    await supervisor.stop(started.run.session_id)
    assert supervisor.live(started.run.session_id) is None
    assert await store.checkpointer.load(started.run.run_id) is None  # a cancel forgets it
    assert await store.delete_session(started.run.session_id)
    assert await store.read_events(started.run.run_id) == []
    await supervisor.aclose()


class _HeldProvider(ScriptedProvider):
    """Holds its first model call until released: the turn's mailbox drain is already over."""

    def __init__(self, *steps: Any) -> None:
        super().__init__(list(steps))
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        if not self.entered.is_set():
            self.entered.set()
            await self.release.wait()
        deltas = super().stream(
            entries, tools=tools, response_format=response_format, settings=settings
        )
        async for delta in deltas:
            yield delta


async def test_a_message_that_arrives_after_the_last_turn_chains_into_the_next_run(
    store: ChatStore,
) -> None:
    model = _HeldProvider(text("first answer"), text("answer to the late one"))
    supervisor = RunSupervisor({"helper": Agent(name="helper", model=model)}, store)
    started = await supervisor.start("hello")
    sid = started.run.session_id
    await asyncio.wait_for(model.entered.wait(), 10)  # the last turn's model call has begun
    late = await supervisor.start("one more thing", session_id=sid)
    assert late.attached
    model.release.set()
    records = [r async for r in supervisor.follow(started.run.run_id)]
    last = records[-1]
    assert last.type == "done" and last.data["status"] == "completed"
    next_run_id = last.data["next_run_id"]
    chained = [r async for r in supervisor.follow(next_run_id)]
    assert chained[-1].data["output"] == "answer to the late one"
    transcript = await store.session.load(sid)
    assert [getattr(e, "content", None) for e in transcript] == [
        "hello",
        "first answer",
        "one more thing",
        "answer to the late one",
    ]
    await supervisor.aclose()


async def test_a_cancelled_run_chains_nothing(store: ChatStore) -> None:
    gate, agent = gated_agent(text("never"))
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("go")
    await gate.entered.wait()
    supervisor.inject(started.run.session_id, "queued")
    await supervisor.stop(started.run.session_id)
    done = (await store.read_events(started.run.run_id))[-1]
    assert done.data == {"status": "cancelled"}
    assert supervisor.live(started.run.session_id) is None
    await supervisor.aclose()


async def test_an_approval_pending_at_shutdown_is_asked_again_after_the_resume(
    store: ChatStore,
) -> None:
    agent = scripted_agent(call("deploy", {"env": "prod"}), text("deployed"), tools=[deploy])
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("ship it")
    async for record in supervisor.follow(started.run.run_id):
        if record.type == "approval_required":
            break
    await supervisor.aclose()  # nobody answered: undecided, not denied
    logged = await store.last_seq(started.run.run_id)
    restarted = RunSupervisor({"helper": agent}, store)
    resumed = await restarted.resume(started.run.session_id)
    assert resumed is not None
    results = []
    async for record in restarted.follow(resumed.run_id, after=logged):
        if record.type == "approval_required":
            assert restarted.approvals.decide(resumed.session_id, record.data["call_id"], True)
        results.append(record)
    tool_results = [r.data for r in results if r.type == "tool_result"]
    assert [(r["output"], r["is_error"]) for r in tool_results] == [("deployed to prod", False)]
    assert results[-1].data["output"] == "deployed"
    await restarted.aclose()


async def test_a_new_message_to_an_interrupted_chat_resumes_its_run_and_joins_it(
    store: ChatStore,
) -> None:
    gate, agent = gated_agent(text("resumed with the news"))
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("long job")
    await gate.entered.wait()
    await supervisor.aclose()
    gate.open()
    restarted = RunSupervisor({"helper": agent}, store)
    again = await restarted.start("any news?", session_id=started.run.session_id)
    assert again.attached and again.run.run_id == started.run.run_id
    records = [r async for r in restarted.follow(again.run.run_id)]
    assert {"content": "any news?", "turn": 2} in [r.data for r in records]
    assert records[-1].data["output"] == "resumed with the news"
    await restarted.aclose()


def test_bad_settings_are_usage_errors(tmp_path: Path) -> None:

    with pytest.raises(UserError, match="approval_timeout"):
        ApprovalRegistry(timeout=0)
    with pytest.raises(UserError, match="max_background_runs"):
        RunSupervisor(
            {"helper": scripted_agent()}, ChatStore.sqlite(":memory:"), max_background_runs=0
        )
