"""``HumanChannel`` answered through ``pending`` (a UI that polls instead of iterating
``questions()``) must not keep every question it was ever asked."""

from __future__ import annotations

import asyncio
import gc

from lovia import Agent, Runner, ToolResultEntry
from lovia.testing import ScriptedProvider, call, text
from lovia.tools import HumanChannel, HumanQuestion, ask_human


def _questions_alive() -> int:
    gc.collect()
    return sum(isinstance(o, HumanQuestion) for o in gc.get_objects())


async def _ask_and_answer_by_polling(channel: HumanChannel, question: str) -> None:
    model = ScriptedProvider([call("ask_human", {"question": question}), text("ok")])
    run = asyncio.create_task(
        Runner.run(Agent(name="a", model=model, tools=[ask_human(channel)]), "go")
    )
    while not channel.pending:
        await asyncio.sleep(0)  # the run reaches its tool call in a few loop iterations
    channel.answer(channel.pending[0].id, "yes")
    result = await run
    (entry,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert entry.output == "The human answered: yes"


async def test_questions_answered_through_pending_are_not_kept() -> None:
    channel = HumanChannel()
    before = _questions_alive()
    for i in range(40):
        await _ask_and_answer_by_polling(channel, f"question {i}?")
    assert _questions_alive() - before <= 1  # at most the newest waits for a consumer


async def test_a_consumer_starting_late_still_gets_every_open_question() -> None:
    channel = HumanChannel()
    for i in range(3):
        await _ask_and_answer_by_polling(channel, f"answered {i}?")
    models = [
        ScriptedProvider([call("ask_human", {"question": f"open {i}?"}), text("ok")])
        for i in range(2)
    ]
    runs = [
        asyncio.create_task(Runner.run(Agent(name="a", model=m, tools=[ask_human(channel)]), "go"))
        for m in models
    ]
    while len(channel.pending) < 2:
        await asyncio.sleep(0)
    seen = []
    async for asked in channel.questions():
        seen.append(asked.question)
        channel.answer(asked.id, "fine")
        if len(seen) == 2:
            break
    await asyncio.gather(*runs)
    assert sorted(seen) == ["open 0?", "open 1?"]
