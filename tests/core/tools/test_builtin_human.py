"""ask_human and HumanChannel: answers, cancels and closes reach the run as results or tool
errors, never as a hang."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from lovia import Agent, CancelToken, InMemorySession, RunCancelled, Runner, ToolResultEntry
from lovia.events import ToolCallCompleted
from lovia.exceptions import ToolError
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.tools import HumanChannel, HumanQuestion, QuestionOption, ask_human

COLOURS = {
    "question": "Which colour?",
    "options": [{"label": "Red", "description": "warm"}, {"label": "Blue"}],
}


def agent(channel: HumanChannel, *steps: Any) -> Agent[Any]:
    provider = ScriptedProvider([*steps, text("done")])
    return Agent(name="a", model=provider, tools=[ask_human(channel)])


def results(entries: list[Any]) -> list[ToolResultEntry]:
    return [e for e in entries if isinstance(e, ToolResultEntry)]


async def answer_next(channel: HumanChannel, reply: str) -> HumanQuestion:
    """Take the next question from the channel and answer it."""
    async for question in channel.questions():
        channel.answer(question.id, reply)
        return question
    raise AssertionError("the channel closed without a question")


def question(text: str = "q?") -> HumanQuestion:
    return HumanQuestion(id=f"id-{text}", question=text)


async def test_an_answer_becomes_the_tool_result() -> None:
    channel = HumanChannel()
    run = asyncio.create_task(Runner.run(agent(channel, call("ask_human", COLOURS)), "go"))
    asked = await answer_next(channel, "Blue")
    result = await run
    assert asked.question == "Which colour?"
    assert asked.options == (QuestionOption("Red", "warm"), QuestionOption("Blue", ""))
    assert asked.multi_select is False
    (entry,) = results(result.entries)
    assert (entry.output, entry.is_error) == ("The human answered: Blue", False)
    assert channel.pending == ()


async def test_the_question_carries_the_run_and_session_ids() -> None:
    channel = HumanChannel()
    run = asyncio.create_task(
        Runner.run(
            agent(channel, call("ask_human", {"question": "Go on?"})),
            "go",
            session=InMemorySession(),
            session_id="s-1",
        )
    )
    asked = await answer_next(channel, "yes")
    await run
    assert asked.session_id == "s-1"
    assert isinstance(asked.run_id, str) and asked.run_id


async def test_cancel_and_close_become_tool_errors_and_the_run_goes_on() -> None:
    channel = HumanChannel()
    steps = [call("ask_human", COLOURS, call_id="c1"), call("ask_human", COLOURS, call_id="c2")]
    run = asyncio.create_task(Runner.run(agent(channel, *steps), "go"))
    questions = channel.questions()
    first = await anext(questions)
    assert channel.cancel(first.id, "changed my mind")
    await anext(questions)
    channel.close("the UI went away")
    result = await run
    cancelled, closed = results(result.entries)
    assert cancelled.is_error and cancelled.output == (
        "Tool error: the question was cancelled: changed my mind"
    )
    assert (
        closed.is_error
        and closed.output == "Tool error: no one is there to answer: the UI went away"
    )
    assert result.output == "done"


async def test_asking_a_closed_channel_fails_fast() -> None:
    channel = HumanChannel()
    channel.close()
    result = await Runner.run(agent(channel, call("ask_human", {"question": "hello?"})), "go")
    (entry,) = results(result.entries)
    assert entry.output == "Tool error: no one is there to answer: the channel is closed"
    with pytest.raises(ToolError):
        await channel.ask(question())


async def test_a_late_consumer_gets_the_backlog_minus_questions_already_resolved() -> None:
    channel = HumanChannel()
    asks = [asyncio.create_task(channel.ask(question(t))) for t in ("one", "two", "three")]
    await asyncio.sleep(0)  # one loop pass: each task runs up to its wait
    assert [q.question for q in channel.pending] == ["one", "two", "three"]
    assert channel.answer("id-one", "1")  # resolved before any consumer looked
    seen = []
    async for q in channel.questions():
        seen.append(q.question)
        channel.answer(q.id, q.question.upper())
        if len(seen) == 2:
            break
    assert seen == ["two", "three"]
    assert [await t for t in asks] == ["1", "TWO", "THREE"]


async def test_close_ends_every_consumer_and_refuses_stale_answers() -> None:
    channel = HumanChannel()

    async def drain() -> list[str]:
        return [q.question async for q in channel.questions()]

    consumers = [asyncio.create_task(drain()) for _ in range(2)]
    await asyncio.sleep(0)
    channel.close("bye")
    assert await asyncio.gather(*consumers) == [[], []]
    assert channel.closed
    assert channel.answer("nope", "x") is False and channel.cancel("nope") is False


async def test_an_answer_from_another_thread_reaches_the_run() -> None:
    channel = HumanChannel()
    run = asyncio.create_task(Runner.run(agent(channel, call("ask_human", COLOURS)), "go"))
    asked = await anext(channel.questions())
    worker = threading.Thread(target=channel.answer, args=(asked.id, "Red"))
    worker.start()
    result = await run
    worker.join()
    assert results(result.entries)[0].output == "The human answered: Red"


async def test_ask_human_is_a_barrier_so_a_run_has_one_question_pending() -> None:
    channel = HumanChannel()
    tool = ask_human(channel)
    assert tool.parallel is False
    two = batch(("ask_human", {"question": "first?"}), ("ask_human", {"question": "second?"}))
    run = asyncio.create_task(Runner.run(agent(channel, two), "go"))
    pending_counts = []
    async for q in channel.questions():
        pending_counts.append(len(channel.pending))
        channel.answer(q.id, q.question)
        if len(pending_counts) == 2:
            break
    result = await run
    assert pending_counts == [1, 1]
    assert [r.output for r in results(result.entries)] == [
        "The human answered: first?",
        "The human answered: second?",
    ]


async def test_a_cancelled_run_withdraws_its_question() -> None:
    channel = HumanChannel()
    token = CancelToken()
    run = asyncio.create_task(
        Runner.run(agent(channel, call("ask_human", COLOURS)), "go", cancel_token=token)
    )
    await anext(channel.questions())
    token.cancel("user pressed stop")
    with pytest.raises(RunCancelled):
        await run
    assert channel.pending == ()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([{"label": "only"}], "2 to 4 choices"),
        ([{"label": str(i)} for i in range(5)], "2 to 4 choices"),
        ([{"label": "a"}, {"label": "a"}], "labels must be unique"),
        ([{"label": "a\nb"}, {"label": "c"}], "single-line label"),
        ([{"label": " "}, {"label": "c"}], "single-line label"),
        ([{"label": "a"}, {"label": "b", "description": 3}], "description must be a string"),
        ("Red, Blue", "2 to 4 choices"),
    ],
)
async def test_options_are_enforced(options: Any, message: str) -> None:
    channel = HumanChannel()
    args = {"question": "pick", "options": options}
    result = await Runner.run(agent(channel, call("ask_human", args)), "go")
    (entry,) = results(result.entries)
    assert entry.is_error and message in entry.output
    assert channel.pending == ()


async def test_multi_select_without_options_is_dropped() -> None:
    channel = HumanChannel()
    steps = [
        call("ask_human", {"question": "Anything else?", "multi_select": True}, call_id="a"),
        call("ask_human", {**COLOURS, "multi_select": True}, call_id="b"),
    ]
    handle = Runner.stream(agent(channel, *steps), "go")
    asked: list[HumanQuestion] = []

    async def consume() -> None:
        async for q in channel.questions():
            asked.append(q)
            channel.answer(q.id, "Red, Blue")

    consumer = asyncio.create_task(consume())
    completed = [e async for e in handle if isinstance(e, ToolCallCompleted)]
    channel.close()
    await consumer
    assert [q.multi_select for q in asked] == [False, True]
    assert [c.output for c in completed] == ["The human answered: Red, Blue"] * 2


def test_the_schema_states_the_option_rules() -> None:
    schema = ask_human(HumanChannel()).parameters
    options = schema["properties"]["options"]
    assert (options["minItems"], options["maxItems"]) == (2, 4)
    assert options["items"]["properties"]["label"]["pattern"] == "^[^\\r\\n]+$"
    assert schema["required"] == ["question"]
