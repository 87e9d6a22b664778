"""Cancel and failure keep what the run did; budgets are per run; todo_write -> ``todo``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from lovia import Agent
from lovia.budget import RunBudget
from lovia.events import TextDelta
from lovia.exceptions import ProviderError
from lovia.plugins.todo import Todo
from lovia.providers.base import FinishDelta, ModelDelta
from lovia.testing import ScriptedProvider, call, text
from lovia.web import ChatStore, RunSupervisor

from ..conftest import Gate, chat, scripted_agent, until
from .conftest import Counter


def _types(entries: list[Any]) -> list[str]:
    return [type(e).__name__ for e in entries]


async def test_cancel_keeps_the_turns_so_far_trims_the_dangling_call_and_forgets_the_checkpoint(
    store: ChatStore,
) -> None:
    gate, note = Gate(), Counter()
    provider = ScriptedProvider([call("note"), call("wait_gate"), text("next run sees it all")])
    agent = Agent(name="helper", model=provider, tools=[note.tool, gate.tool])
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("work")
    sid, run_id = started.run.session_id, started.run.run_id
    await gate.entered.wait()
    supervisor.inject(sid, "left over")
    await supervisor.stop(sid)
    assert _types(await store.session.load(sid)) == [
        "InputEntry",
        "ToolCallEntry",
        "ToolResultEntry",  # note's result; wait_gate's call had none and was trimmed
    ]
    assert await store.checkpointer.load(run_id) is None
    meta = await store.get_session(sid)
    assert meta is not None and meta.active_run_id is None
    assert supervisor.live(sid) is None  # no auto-chain after a cancel
    # The next message continues the chat from what the cancelled run left.
    nxt = await supervisor.start("go on", session_id=sid)
    assert [r async for r in supervisor.follow(nxt.run.run_id)][-1].data["status"] == "completed"
    assert [(m.role, m.content) for m in provider.calls[-1]] == [
        ("user", "work"),
        ("assistant", ""),
        ("tool", "note 1"),
        ("user", "go on"),
    ]
    assert note.calls == 1
    await supervisor.aclose()


async def test_a_failed_run_persists_its_partial_transcript(store: ChatStore) -> None:
    note = Counter()
    agent = scripted_agent(
        call("note"), ProviderError("the model is down", retryable=False), tools=[note.tool]
    )
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("work")
    records = [r async for r in supervisor.follow(started.run.run_id)]
    assert records[-1].data == {"status": "failed"}
    assert _types(await store.session.load(started.run.session_id)) == [
        "InputEntry",
        "ToolCallEntry",
        "ToolResultEntry",
    ]
    assert await store.checkpointer.load(started.run.run_id) is None
    await supervisor.aclose()


async def test_cancel_with_no_live_run_clears_a_stranded_checkpoint_else_404(
    make_app: Any, serve: Any
) -> None:
    gate, note = Gate(), Counter()
    agent = scripted_agent(
        call("note"), call("wait_gate"), text("never"), tools=[note.tool, gate.tool]
    )
    first = await serve(make_app(agent))
    async with chat(first.client, "work") as (session, frames):
        await until(frames, "tool_call")
        await gate.entered.wait()
    await first.stop()  # interrupted: the checkpoint and the pointer stay
    sid, run_id = session.data["session_id"], session.data["run_id"]
    second = await serve(make_app(agent))
    r = await second.client.post("/api/chat/cancel", params={"session_id": sid})
    assert r.status_code == 200 and r.json() == {"session_id": sid, "run_id": run_id}
    detail = (await second.client.get(f"/api/sessions/{sid}")).json()
    assert detail["active_run_id"] is None and detail["live"] is False
    assert [e["type"] for e in detail["entries"]] == ["input", "tool_call", "tool_result"]
    assert await second.app.state.lovia.store.checkpointer.load(run_id) is None
    r = await second.client.post("/api/chat/cancel", params={"session_id": sid})
    assert r.status_code == 404
    r = await second.client.post("/api/chat/cancel", params={"session_id": "unknown"})
    assert r.status_code == 404


async def test_a_configured_budget_is_fresh_for_every_run(make_app: Any, asgi_client: Any) -> None:
    note = Counter()
    agent = scripted_agent(
        call("note"),
        text("one"),
        call("note"),
        text("two"),
        call("note"),
        call("note"),
        tools=[note.tool],
    )
    app = make_app(agent, budget=RunBudget(max_tool_calls=1))
    await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    for expected in ("one", "two"):  # a shared budget would trip on the second run
        started = await supervisor.start("go")
        done = [r async for r in supervisor.follow(started.run.run_id)][-1]
        assert done.data["status"] == "completed" and done.data["output"] == expected
    started = await supervisor.start("go")
    records = [r async for r in supervisor.follow(started.run.run_id)]
    assert records[-2].data["type"] == "BudgetExceeded"  # two calls in one run: over
    assert supervisor.budget.max_tool_calls == 1


async def test_todo_write_results_become_todo_events(store: ChatStore) -> None:
    todos = {"todos": [{"content": "plan", "status": "in_progress"}, {"content": "ship"}]}
    provider = ScriptedProvider([call("todo_write", todos), text("planned")])
    agent = Agent(name="helper", model=provider, plugins=[Todo()])
    supervisor = RunSupervisor({"helper": agent}, store)
    started = await supervisor.start("plan it")
    records = [r async for r in supervisor.follow(started.run.run_id)]
    kinds = [r.type for r in records]
    assert "tool_result" not in kinds and kinds.count("todo") == 1
    todo = next(r for r in records if r.type == "todo")
    assert todo.data == {
        "call_id": "call_todo_write",
        "todos": [
            {"content": "plan", "status": "in_progress", "active_form": ""},
            {"content": "ship", "status": "pending", "active_form": ""},
        ],
    }
    await supervisor.aclose()


async def test_deleting_a_chat_mid_run_leaves_no_orphan_transcript(
    make_app: Any, asgi_client: Any
) -> None:
    gate, note = Gate(), Counter()
    agent = scripted_agent(
        call("note"), call("wait_gate"), text("never"), tools=[note.tool, gate.tool]
    )
    app = make_app(agent)
    client = await asgi_client(app)
    store = app.state.lovia.store
    started = await app.state.lovia.supervisor.start("work")
    sid = started.run.session_id
    await gate.entered.wait()
    assert (await client.delete(f"/api/sessions/{sid}")).status_code == 204
    # The cancel kept the partial turns in the session; the delete that waited for it
    # removed them with everything else.
    assert await store.session.load(sid) == []
    assert await store.get_session(sid) is None
    assert await store.checkpointer.load(started.run.run_id) is None


class _EndlessAnswer:
    """A model that streams the start of an answer and then never sends another byte."""

    name = "endless"
    model = "endless-model"
    supports_json_schema = False

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    async def stream(self, entries: Any, **_: Any) -> AsyncIterator[ModelDelta]:
        try:
            yield TextDelta("The answer is")
            await asyncio.Event().wait()  # the model goes quiet; only the cancel ends this
            yield FinishDelta("stop")
        finally:
            self.closed.set()


async def test_cancel_during_a_streaming_answer_ends_the_run_without_waiting_for_the_model(
    make_app: Any, serve: Any
) -> None:
    model = _EndlessAnswer()
    server = await serve(make_app(Agent(name="helper", model=model)))
    async with chat(server.client, "go") as (session, frames):
        seen = await until(frames, "text_delta")
        assert seen[-1].data == {"delta": "The answer is"}
        sid = session.data["session_id"]
        answer = await server.client.post("/api/chat/cancel", params={"session_id": sid})
        assert answer.status_code == 200
        rest = await asyncio.wait_for(until(frames, "done"), 5.0)
    assert rest[-2].event == "error" and rest[-2].data["type"] == "RunCancelled"
    assert rest[-1].data == {"status": "cancelled"}
    assert model.closed.is_set()  # the model's stream was closed, not left to time out
    # The cut-off answer is not a completed reply, so the chat keeps only the user's message.
    detail = (await server.client.get(f"/api/sessions/{sid}")).json()
    assert [e["type"] for e in detail["entries"]] == ["input"]
    assert detail["active_run_id"] is None and detail["live"] is False
