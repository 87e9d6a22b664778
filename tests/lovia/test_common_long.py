"""Scenario: a long conversation outgrows a small window; Compaction clears old tool
results, the model recalls one byte for byte, and a resumed run keeps the decisions."""

from __future__ import annotations

from pathlib import Path

import pytest
from lovia import Agent, BudgetExceeded, Runner, tool
from lovia.budget import RunBudget
from lovia.checkpointer import CheckpointOptions
from lovia.context import ClearToolResults, Compaction
from lovia.events import (
    ContextCompacted,
    Event,
    MessageCompleted,
    RunFailed,
    ToolCallCompleted,
)
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry, TranscriptEntry


def log_of(day: int) -> str:
    if day > 6:
        return f"log of day {day}: quiet"
    return f"log of day {day}: " + "".join(f"line {i} ok; " for i in range(700))


@tool
def read_log(day: int) -> str:
    """Read one day's log."""
    return log_of(day)


def policy() -> Compaction:
    return Compaction(
        context_window=12_000, reserve_output_tokens=2_000, stages=[ClearToolResults(keep_last=1)]
    )


def cleared_ids(view: list[TranscriptEntry]) -> list[str]:
    return [
        e.call_id
        for e in view
        if isinstance(e, ToolResultEntry) and e.output.startswith("[Earlier tool result cleared")
    ]


async def test_cleared_results_are_recallable_and_survive_a_resume(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    checkpointer = SQLiteCheckpointer(db, wal=True)
    session = SQLiteSession(db, wal=True)
    first_script = [call("read_log", {"day": d}, call_id=f"day{d}") for d in range(1, 7)]
    first_script += [
        call("recall_tool_result", {"ref": "day1"}, call_id="recall1"),
        call("read_log", {"day": 7}, call_id="day7"),  # trips the budget: left pending
    ]
    first = ScriptedProvider(first_script)
    agent = Agent(name="ops", model=first, tools=[read_log], context_policy=policy())
    options = CheckpointOptions(checkpointer, "long-1")
    try:
        events: list[Event] = []
        handle = Runner.stream(
            agent,
            "Check the logs",
            budget=RunBudget(max_tool_calls=7),
            checkpoint=options,
            session=session,
            session_id="ops-chat",
        )
        events = [e async for e in handle]
        assert isinstance(events[-1], RunFailed)
        with pytest.raises(BudgetExceeded):
            await handle
        compactions = [e for e in events if isinstance(e, ContextCompacted)]
        assert compactions and all(not c.notice.reactive for c in compactions)
        outputs = {e.call.id: e.output for e in events if isinstance(e, ToolCallCompleted)}
        assert outputs["recall1"] == log_of(1)  # byte-exact, from the transcript
        last_view = first.views[-1]
        cleared = cleared_ids(last_view)
        assert "day1" in cleared
        snapshot = await checkpointer.load("long-1")
        assert snapshot is not None and snapshot.head.status == "interrupted"
        assert snapshot.head.context_state  # the decisions ride in the checkpoint head
        # The transcript itself was never rewritten.
        stored = {e.call_id: e.output for e in snapshot.entries if isinstance(e, ToolResultEntry)}
        assert stored["day1"] == log_of(1) and "day7" not in stored
        assert await session.segments("ops-chat") == []  # nothing appended until success

        # A new Runner call resumes the interrupted run (if_run_exists="resume").
        second = ScriptedProvider([text("All quiet.")])
        resumed_agent = agent.clone(model=second, context_policy=policy())
        handle = Runner.stream(
            resumed_agent, [], checkpoint=options, session=session, session_id="ops-chat"
        )
        resumed_events = [e async for e in handle]
        result = await handle
        assert result.output == "All quiet."
        assert not [e for e in resumed_events if isinstance(e, ContextCompacted)]
        resumed_outputs = [e.output for e in resumed_events if isinstance(e, ToolCallCompleted)]
        assert resumed_outputs == [log_of(7)]  # only the pending call ran again
        (view,) = second.views
        assert cleared_ids(view) == cleared  # the same decisions, no re-compaction
        assert view[: len(last_view)] == last_view  # the prompt prefix is byte-stable

        done = await checkpointer.load("long-1")
        assert done is not None and done.head.status == "completed"
        (segment,) = await session.segments("ops-chat")
        assert segment.run_id == "long-1" and segment.meta["context"]
        full = {e.call_id: e.output for e in segment.entries if isinstance(e, ToolResultEntry)}
        assert full["day1"] == log_of(1) and full["day7"] == log_of(7)
    finally:
        await checkpointer.aclose()
        await session.aclose()


async def test_the_next_run_on_a_session_keeps_the_compaction_decisions(tmp_path: Path) -> None:
    session = SQLiteSession(tmp_path / "chat.db", wal=True)
    first = ScriptedProvider(
        [call("read_log", {"day": d}, call_id=f"day{d}") for d in range(1, 7)] + [text("Read.")]
    )
    agent = Agent(name="ops", model=first, tools=[read_log], context_policy=policy())
    try:
        handle = Runner.stream(agent, "Read the logs", session=session, session_id="s")
        notices = [e.notice for e in [e async for e in handle] if isinstance(e, ContextCompacted)]
        await handle
        assert notices
        cleared = cleared_ids(first.views[-1])
        assert "day1" in cleared

        second = ScriptedProvider(
            [call("recall_tool_result", {"ref": "day1"}, call_id="again"), text("Same as before.")]
        )
        handle = Runner.stream(
            agent.clone(model=second), "Show day 1 again", session=session, session_id="s"
        )
        events = [e async for e in handle]
        result = await handle
        first_call = next(i for i, e in enumerate(events) if isinstance(e, MessageCompleted))
        assert not [e for e in events[:first_call] if isinstance(e, ContextCompacted)]
        # A result cleared in an earlier run of the session is still recallable, exactly.
        (recalled,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
        assert recalled.output == log_of(1)
        view = second.views[0]
        assert cleared_ids(view) == cleared
        # The prefix the provider cached stays byte-stable across runs on the session.
        assert view[: len(first.views[-1])] == first.views[-1]
        segments = await session.segments("s")
        assert segments[0].meta["notices"] == [n.to_dict() for n in notices]
        assert len(segments) == 2 and segments[1].run_id == result.run_id
    finally:
        await session.aclose()


async def test_compaction_notices_before_an_interruption_reach_the_session(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    checkpointer = SQLiteCheckpointer(db, wal=True)
    session = SQLiteSession(db, wal=True)
    script = [call("read_log", {"day": d}, call_id=f"day{d}") for d in range(1, 8)]
    agent = Agent(
        name="ops", model=ScriptedProvider(script), tools=[read_log], context_policy=policy()
    )
    options = CheckpointOptions(checkpointer, "long-2")
    try:
        handle = Runner.stream(
            agent,
            "Check the logs",
            budget=RunBudget(max_tool_calls=6),
            checkpoint=options,
            session=session,
            session_id="ops",
        )
        notices = [e.notice for e in [e async for e in handle] if isinstance(e, ContextCompacted)]
        with pytest.raises(BudgetExceeded):
            await handle
        assert notices
        resumed = agent.clone(model=ScriptedProvider([text("Done.")]))
        await Runner.run(resumed, [], checkpoint=options, session=session, session_id="ops")
        (segment,) = await session.segments("ops")
        assert segment.meta.get("notices") == [n.to_dict() for n in notices]
    finally:
        await checkpointer.aclose()
        await session.aclose()


async def test_a_replay_that_heals_the_session_keeps_the_notices(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    checkpointer = SQLiteCheckpointer(db, wal=True)
    session = SQLiteSession(db, wal=True)
    script = [call("read_log", {"day": d}, call_id=f"day{d}") for d in range(1, 7)]
    model = ScriptedProvider([*script, text("Read.")])
    agent = Agent(name="ops", model=model, tools=[read_log], context_policy=policy())
    options = CheckpointOptions(checkpointer, "heal-1")
    try:
        # The run completed, but its session append never happened (as after a crash
        # between the two writes): a replay with the session heals it.
        handle = Runner.stream(agent, "Check the logs", checkpoint=options)
        notices = [e.notice for e in [e async for e in handle] if isinstance(e, ContextCompacted)]
        await handle
        assert notices
        replay = await Runner.run(
            agent, "ignored", checkpoint=options, session=session, session_id="ops"
        )
        assert replay.output == "Read." and len(model.calls) == 7  # no new model call
        (segment,) = await session.segments("ops")
        assert segment.run_id == "heal-1" and segment.meta["context"]
        assert segment.meta["notices"] == [n.to_dict() for n in notices]
    finally:
        await checkpointer.aclose()
        await session.aclose()
