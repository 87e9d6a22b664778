"""``ask_human`` over HTTP: ``QuestionRegistry`` and ``POST /api/chat/answer``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from lovia.exceptions import ToolError, UserError
from lovia.testing import call, text
from lovia.tools import HumanChannel, HumanQuestion, ask_human
from lovia.web import QuestionRegistry, RunSupervisor

from ..conftest import chat, read_frames, scripted_agent, until

ASK = {"question": "Which colour?", "options": [{"label": "red"}, {"label": "blue"}]}


def _asking(channel: HumanChannel, *after: Any) -> Any:
    return scripted_agent(call("ask_human", ASK), *after, tools=[ask_human(channel)])


async def test_a_question_reaches_the_client_as_a_tool_call_and_the_answer_resumes_the_run(
    make_app: Any, serve: Any
) -> None:
    channel = HumanChannel()
    server = await serve(make_app(_asking(channel, text("blue it is")), question_channel=channel))
    async with chat(server.client, "pick") as (session, frames):
        asked = (await until(frames, "tool_call"))[-1]
        assert asked.data["name"] == "ask_human" and json.loads(asked.data["arguments"]) == ASK
        sid = session.data["session_id"]
        registry = server.app.state.lovia.supervisor.questions
        deadline = asyncio.get_running_loop().time() + 5
        while registry.pending(sid) is None:  # the registry parks it a loop turn later
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0)
        # A reconnecting client sees it in the snapshot too.
        async with server.client.stream(
            "POST", "/api/chat/reconnect", params={"session_id": sid}
        ) as r:
            stream = read_frames(r)
            await anext(stream)
            snapshot = await anext(stream)
        pending = snapshot.data["pending_question"]
        assert pending["question"] == "Which colour?" and pending["multi_select"] is False
        assert [o["label"] for o in pending["options"]] == ["red", "blue"]
        r = await server.client.post("/api/chat/answer", json={"session_id": sid, "answer": "blue"})
        assert r.status_code == 200, r.text
        assert r.json() == {
            "session_id": sid,
            "question_id": pending["id"],
            "question": "Which colour?",
        }
        rest = await until(frames, "done")
    result = next(f for f in rest if f.event == "tool_result")
    assert (result.data["output"], result.data["is_error"]) == ("The human answered: blue", False)
    assert rest[-1].data["output"] == "blue it is"
    again = await server.client.post("/api/chat/answer", json={"session_id": sid, "answer": "x"})
    assert again.status_code == 404 and "no question pending" in again.json()["detail"]


async def test_answer_without_a_channel_or_a_question_is_404_and_a_blank_one_422(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    r = await client.post("/api/chat/answer", json={"session_id": "s", "answer": "hi"})
    assert r.status_code == 404 and "no question channel" in r.json()["detail"]
    channel = HumanChannel()
    other = await asgi_client(make_app(scripted_agent(), question_channel=channel))
    r = await other.post("/api/chat/answer", json={"session_id": "s", "answer": "hi"})
    assert r.status_code == 404 and "no question pending" in r.json()["detail"]
    r = await other.post("/api/chat/answer", json={"session_id": "s", "answer": "  "})
    assert r.status_code == 422 and "answer" in r.json()["detail"]
    r = await other.post("/api/chat/answer", json={"session_id": "s"})
    assert r.status_code == 422 and "answer" in r.json()["detail"]


async def test_an_unanswered_question_times_out_and_the_model_goes_on(
    make_app: Any, serve: Any
) -> None:
    channel = HumanChannel()
    agent = _asking(channel, text("I will pick myself"))
    server = await serve(make_app(agent, question_channel=channel, question_timeout=0.05))
    async with chat(server.client, "pick") as (_, frames):
        rest = await until(frames, "done")
    result = next(f for f in rest if f.event == "tool_result")
    assert result.data["is_error"] is True
    assert "the question was cancelled: nobody answered within 0.05 s" in result.data["output"]
    assert rest[-1].data == {**rest[-1].data, "status": "completed", "output": "I will pick myself"}
    assert channel.pending == ()


async def test_cancelling_the_run_sweeps_its_parked_question(store: Any) -> None:
    channel = HumanChannel()
    registry = QuestionRegistry(channel, timeout=None)
    supervisor = RunSupervisor({"helper": _asking(channel)}, store, questions=registry)
    started = await supervisor.start("pick")
    sid = started.run.session_id
    async for record in supervisor.follow(started.run.run_id):
        if record.type == "tool_call":
            break
    deadline = asyncio.get_running_loop().time() + 5
    while registry.pending(sid) is None:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0)
    await supervisor.stop(sid)
    assert registry.pending(sid) is None and channel.pending == ()
    assert (await store.read_events(started.run.run_id))[-1].data == {"status": "cancelled"}
    await supervisor.aclose()


async def test_one_pending_question_per_session() -> None:
    channel = HumanChannel()
    registry = QuestionRegistry(channel, timeout=None)
    registry.ensure_started()
    first = asyncio.create_task(channel.ask(HumanQuestion("q1", "one?", session_id="s")))
    second = asyncio.create_task(channel.ask(HumanQuestion("q2", "two?", session_id="s")))
    with pytest.raises(ToolError, match="another question is pending"):
        await second
    pending = registry.pending("s")
    assert pending is not None and pending.id == "q1"
    # A question without a session is not the registry's to answer.
    loose = asyncio.create_task(channel.ask(HumanQuestion("q3", "loose?")))
    answered = registry.answer("s", "yes")
    assert answered is not None and answered.id == "q1"
    assert await first == "yes"
    assert [q.id for q in channel.pending] == ["q3"]
    channel.cancel("q3")
    with pytest.raises(ToolError):
        await loose
    await registry.aclose()


def test_a_bad_question_timeout_is_a_usage_error() -> None:
    with pytest.raises(UserError, match="question_timeout"):
        QuestionRegistry(HumanChannel(), timeout=0)
