"""Todo: todo_write, the one-in-progress rule, the per-turn reminder and rebuilding state."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lovia import (
    Agent,
    CancelToken,
    CheckpointOptions,
    InMemoryCheckpointer,
    InMemorySession,
    Runner,
)
from lovia.events import ToolCallCompleted
from lovia.exceptions import RunCancelled
from lovia.plugins import Todo, TodoItem, TodoList, render_todos, todos_from_entries
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

PLAN = [
    {"content": "Read the code", "status": "completed"},
    {"content": "Write the fix", "status": "in_progress", "active_form": "Writing the fix"},
    {"content": "Run the tests", "status": "pending"},
]


def _reminders(view: list[Any]) -> list[str]:
    return [m.content for m in view if "<system-reminder>" in str(m.content)]


async def test_todo_write_replaces_the_list_and_the_reminder_shows_it_every_turn() -> None:
    model = ScriptedProvider(
        [
            call("todo_write", {"todos": PLAN}, call_id="t1"),
            call("todo_write", {"todos": PLAN[:1]}, call_id="t2"),
            text("done"),
        ]
    )
    agent = Agent("a", model=model, plugins=[Todo()])
    result = await Runner.run(agent, "fix the bug")

    assert _reminders(model.calls[0]) == []  # nothing to show before the first write
    first = _reminders(model.calls[1])
    assert len(first) == 1
    assert "[x] Read the code\n[>] Writing the fix\n[ ] Run the tests" in first[0]
    assert model.calls[1][-1].content == first[0]  # at the tail of the view
    second = _reminders(model.calls[2])
    assert len(second) == 1 and "Write the fix" not in second[0]  # replaced, not merged
    # The reminder never enters the transcript.
    assert not any("<system-reminder>" in str(getattr(e, "content", "")) for e in result.entries)
    assert "todo_write" in model.calls[0][0].content  # the guidance is in the system prompt


async def test_the_result_is_the_structured_list_with_extra_in_progress_items_demoted() -> None:
    todos = [
        {"content": "a", "status": "in_progress"},
        {"content": "b", "status": "in_progress"},
        {"content": "c", "status": "in_progress"},
    ]
    model = ScriptedProvider([call("todo_write", {"todos": todos}), text("ok")])
    seen: list[ToolCallCompleted] = []
    handle = Runner.stream(Agent("a", model=model, plugins=[Todo()]), "go")
    async for event in handle:
        if isinstance(event, ToolCallCompleted):
            seen.append(event)
    await handle.result()
    assert [e.result for e in seen] == [
        [TodoItem("a", "in_progress"), TodoItem("b", "pending"), TodoItem("c", "pending")]
    ]
    assert not seen[0].is_error
    assert "[>] a\n[ ] b\n[ ] c" in seen[0].output


async def test_invalid_items_are_a_tool_error_and_leave_the_list_alone() -> None:
    bad = {"todos": [{"content": "x", "status": "started"}]}
    model = ScriptedProvider(
        [
            call("todo_write", {"todos": PLAN}, call_id="ok"),
            call("todo_write", bad, call_id="bad"),
            text("ok"),
        ]
    )
    result = await Runner.run(Agent("a", model=model, plugins=[Todo()]), "go")
    errors = [e for e in result.entries if isinstance(e, ToolResultEntry) and e.is_error]
    assert len(errors) == 1 and "status must be one of" in errors[0].output
    assert "Writing the fix" in _reminders(model.calls[2])[0]


async def test_state_is_rebuilt_from_the_session_on_the_next_run() -> None:
    session = InMemorySession()
    agent = Agent("a", plugins=[Todo()])
    first = ScriptedProvider([call("todo_write", {"todos": PLAN}), text("planned")])
    await Runner.run(agent.clone(model=first), "plan", session=session, session_id="s")

    second = ScriptedProvider([text("continuing")])
    await Runner.run(agent.clone(model=second), "go on", session=session, session_id="s")
    assert "[>] Writing the fix" in _reminders(second.calls[0])[0]


async def test_each_run_starts_fresh_without_history() -> None:
    agent = Agent("a", plugins=[Todo()])
    await Runner.run(
        agent.clone(model=ScriptedProvider([call("todo_write", {"todos": PLAN}), text("x")])), "a"
    )
    fresh = ScriptedProvider([text("y")])
    await Runner.run(agent.clone(model=fresh), "b")
    assert _reminders(fresh.calls[0]) == []


async def test_inject_false_and_instructions_none_turn_each_part_off() -> None:
    model = ScriptedProvider([call("todo_write", {"todos": PLAN}), text("ok")])
    agent = Agent(
        "a", instructions="base", model=model, plugins=[Todo(inject=False, instructions=None)]
    )
    await Runner.run(agent, "go")
    assert _reminders(model.calls[1]) == []
    assert model.calls[0][0].content == "base"


async def test_the_handoff_target_sees_the_list_written_before_the_handoff() -> None:
    target_model = ScriptedProvider([text("on it")])
    target = Agent("worker", model=target_model, plugins=[Todo()])
    lead_model = ScriptedProvider(
        [call("todo_write", {"todos": PLAN}), call("transfer_to_worker", {})]
    )
    lead = Agent("lead", model=lead_model, plugins=[Todo()], handoffs=[target])
    await Runner.run(lead, "go")
    assert "[>] Writing the fix" in _reminders(target_model.calls[0])[0]


def test_todos_from_entries_takes_the_newest_valid_call_and_tolerates_garbage() -> None:
    good = json.dumps({"todos": [{"content": "old", "status": "pending"}]})
    newer = json.dumps(
        {
            "todos": [
                {"content": "new", "status": "in_progress"},
                {"content": "n2", "status": "in_progress"},
            ]
        }
    )
    entries: list[TranscriptEntry] = [
        InputEntry("user", "hi"),
        ToolCallEntry("c1", "todo_write", good),
        ToolResultEntry("c1", "ok"),
        ToolCallEntry("c2", "todo_write", newer),
        ToolResultEntry("c2", "ok"),
        ToolCallEntry("c3", "todo_write", "{not json"),
        ToolCallEntry("c4", "todo_write", json.dumps({"todos": "nope"})),
        ToolCallEntry("c5", "todo_write", json.dumps({"todos": [{"content": "denied"}]})),
        ToolResultEntry("c5", "Tool call denied", is_error=True),
        ToolCallEntry("c6", "other_tool", good),
    ]
    assert todos_from_entries(entries) == [
        TodoItem("new", "in_progress"),
        TodoItem("n2", "pending"),
    ]
    assert todos_from_entries(entries[:3]) == [TodoItem("old")]
    assert todos_from_entries(entries, tool_name="other_tool") == [TodoItem("old")]
    assert todos_from_entries([]) == []


def test_todo_list_returns_detached_copies_and_render_marks_each_status() -> None:
    todos = TodoList()
    out = todos.replace([TodoItem("a", "in_progress", "Doing a"), TodoItem("b", "completed")])
    out.clear()
    assert len(todos.items) == 2
    assert render_todos(todos.items) == "[>] Doing a\n[x] b"
    assert render_todos([]) == "(no todos)"


async def test_a_custom_tool_name_is_used_for_the_tool_and_for_rebuilding() -> None:
    model = ScriptedProvider([call("plan", {"todos": PLAN}), text("ok")])
    await Runner.run(Agent("a", model=model, plugins=[Todo(tool_name="plan")]), "go")
    assert "Writing the fix" in _reminders(model.calls[1])[0]
    assert "plan" in model.tools[0] and "todo_write" not in model.tools[0]


async def test_the_list_survives_an_interrupted_run_and_its_resume() -> None:
    store = InMemoryCheckpointer()
    token = CancelToken()
    model = ScriptedProvider([call("todo_write", {"todos": PLAN}), text("never reached")])
    handle = Runner.stream(
        Agent("a", model=model, plugins=[Todo()]),
        "go",
        cancel_token=token,
        checkpoint=CheckpointOptions(store, "r"),
    )
    async for event in handle:
        if isinstance(event, ToolCallCompleted):
            token.cancel("interrupted on purpose")
    with pytest.raises(RunCancelled):
        await handle.result()
    snapshot = await store.load("r")
    assert snapshot is not None and snapshot.head.status == "interrupted"

    resumed = ScriptedProvider([text("resumed")])
    agent = Agent("a", model=resumed, plugins=[Todo()])
    result = await Runner.run(agent, "go", checkpoint=CheckpointOptions(store, "r"))
    assert result.output == "resumed"
    assert "[>] Writing the fix" in _reminders(resumed.calls[0])[0]
