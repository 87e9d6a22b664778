"""Static typing of the core API: mypy must accept every line here (and the `reveal_type`
expectations are pinned with `assert_type`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lovia import Agent, RunContext, RunHandle, Runner, RunResult, Tool, tool
from lovia.events import Event
from typing_extensions import assert_type


@dataclass
class Deps:
    user_id: int


@tool
def lookup(ctx: RunContext[Deps], key: str) -> str:
    """A tool that reads the run's dependencies."""
    return f"{ctx.deps.user_id}:{key}"


@tool(name="shout", retries=2, timeout=1.5, parallel=False)
async def shout(text: str) -> str:
    """An async tool with options."""
    return text.upper()


assert_type(lookup, Tool)
assert_type(shout, Tool)

agent: Agent[Deps] = Agent(name="typed", tools=[lookup, shout])
assert_type(agent.clone(name="other"), Agent[Deps])
untyped = Agent(name="untyped")  # Deps defaults to Any


async def use() -> None:
    result = await Runner.run(agent, "hi", context=Deps(user_id=1))
    assert_type(result, RunResult[Any])
    handle = Runner.stream(agent, "hi", context=Deps(user_id=1))
    assert_type(handle, RunHandle[Any])
    async for event in handle:
        assert_type(event, Event)
    assert_type(await handle, RunResult[Any])
