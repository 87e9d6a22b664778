"""Mailbox steering in the run loop (catalogue section 12, item 15)."""

from __future__ import annotations

from typing import Any

from lovia import Agent, RunContext, Runner, tool
from lovia.events import TurnStarted, UserMessageInjected
from lovia.hooks import AgentHooks
from lovia.messages import Message
from lovia.parts import TextPart
from lovia.steering import Mailbox
from lovia.stores.memory import InMemorySession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry


async def test_push_before_the_run_is_injected_at_the_first_turn() -> None:
    box = Mailbox()
    box.push("also this")
    provider = ScriptedProvider([text("ok")])
    events = [e async for e in Runner.stream(Agent("m", model=provider), "hi", mailbox=box)]
    injected = [e for e in events if isinstance(e, UserMessageInjected)]
    assert [(e.content, e.turn) for e in injected] == [("also this", 1)]
    assert provider.calls[0][-1] == Message("user", "also this")


async def test_push_from_a_turn_started_hook_lands_in_the_same_turn() -> None:
    hooks = AgentHooks()

    @hooks.on(TurnStarted)
    def steer(event: TurnStarted, ctx: RunContext[Any]) -> None:
        if event.turn == 1:
            ctx.mailbox.push("from hook")

    provider = ScriptedProvider([text("ok")])
    await Runner.run(Agent("m", model=provider, hooks=hooks), "hi")
    assert provider.calls[0][-1] == Message("user", "from hook")


async def test_push_during_a_turn_lands_in_the_next_turn() -> None:
    @tool
    async def steer(ctx: RunContext[Any]) -> str:
        """Push."""
        ctx.mailbox.push("mid-run correction")
        return "pushed"

    provider = ScriptedProvider([call("steer", {}), text("ok")])
    result = await Runner.run(Agent("m", model=provider, tools=[steer]), "hi")
    assert Message("user", "mid-run correction") not in provider.calls[0]
    assert provider.calls[1][-1] == Message("user", "mid-run correction")
    assert InputEntry("user", "mid-run correction") in result.entries


async def test_parts_are_injected_as_typed_content() -> None:
    box = Mailbox()
    box.push([TextPart("part text")])
    provider = ScriptedProvider([text("ok")])
    result = await Runner.run(Agent("m", model=provider), "hi", mailbox=box)
    assert result.entries[1] == InputEntry("user", (TextPart("part text"),))


async def test_leftovers_stay_in_a_caller_supplied_mailbox() -> None:
    box = Mailbox()

    @tool
    async def late(ctx: RunContext[Any]) -> str:
        """Push on the final turn."""
        return "ok"

    provider = ScriptedProvider([text("done")])

    hooks = AgentHooks()

    @hooks.on(UserMessageInjected)
    def never(event: UserMessageInjected, ctx: RunContext[Any]) -> None:
        raise AssertionError("nothing should be injected")

    async for event in Runner.stream(Agent("m", model=provider, hooks=hooks), "hi", mailbox=box):
        if type(event).__name__ == "MessageCompleted":
            box.push("too late")
    assert box.drain() == ["too late"]


async def test_removed_items_are_not_injected() -> None:
    box = Mailbox()
    token = box.push("withdrawn")
    box.push("kept")
    assert box.remove(token)
    provider = ScriptedProvider([text("ok")])
    await Runner.run(Agent("m", model=provider), "hi", mailbox=box)
    assert provider.calls[0][-1] == Message("user", "kept")
    assert Message("user", "withdrawn") not in provider.calls[0]


async def test_context_mailbox_is_always_present() -> None:
    seen: list[Mailbox] = []

    @tool
    async def look(ctx: RunContext[Any]) -> str:
        """Look."""
        seen.append(ctx.mailbox)
        return "ok"

    provider = ScriptedProvider([call("look", {}), text("ok")])
    await Runner.run(Agent("m", model=provider, tools=[look]), "hi")
    assert isinstance(seen[0], Mailbox)


async def test_an_injected_message_reaches_the_session_exactly_once() -> None:
    box = Mailbox()
    box.push("also this")

    @tool
    async def step(ctx: RunContext[Any]) -> str:
        """Pushes a second message, injected at the next turn."""
        ctx.mailbox.push("and this")
        return "stepped"

    session = InMemorySession()
    provider = ScriptedProvider([call("step", {}), text("done")])
    agent = Agent("m", model=provider, tools=[step])
    await Runner.run(agent, "hi", mailbox=box, session=session, session_id="s")
    stored = await session.load("s")
    users = [e.content for e in stored if isinstance(e, InputEntry) and e.role == "user"]
    assert users == ["hi", "also this", "and this"]
    assert len(box) == 0
