"""Tools inside a real run: what the model sees and what the stream reports."""

from __future__ import annotations

from typing import Any

from lovia import Agent, RunContext, Runner, ToolResultEntry, tool
from lovia.events import ToolCallCompleted, ToolCallFailed, ToolCallStarted
from lovia.testing import ScriptedProvider, call, text


def results(entries: list[Any]) -> list[ToolResultEntry]:
    return [e for e in entries if isinstance(e, ToolResultEntry)]


async def test_invalid_arguments_reach_the_model_as_an_error_and_the_run_goes_on() -> None:
    seen: list[int] = []

    @tool
    def square(n: int) -> int:
        seen.append(n)
        return n * n

    provider = ScriptedProvider(
        [call("square", {"n": "many"}), call("square", {"n": "3"}), text("done")]
    )
    result = await Runner.run(Agent(name="a", model=provider, tools=[square]), "go")
    first, second = results(result.entries)
    assert first.is_error and first.raw is None
    assert first.output.startswith("Tool error: invalid arguments for 'square': n: Input should")
    assert (second.output, second.raw, second.is_error) == ("9", 9, False)
    assert seen == [3]
    assert result.output == "done"


async def test_stream_reports_a_failed_attempt_and_the_error_result() -> None:
    @tool
    def boom() -> None:
        raise RuntimeError("disk full")

    provider = ScriptedProvider([call("boom", {}), text("sorry")])
    handle = Runner.stream(Agent(name="a", model=provider, tools=[boom]), "go")
    events = [
        ev
        async for ev in handle
        if isinstance(ev, (ToolCallStarted, ToolCallFailed, ToolCallCompleted))
    ]
    assert [type(ev) for ev in events] == [ToolCallStarted, ToolCallFailed, ToolCallCompleted]
    completed = events[-1]
    assert isinstance(completed, ToolCallCompleted)
    assert (completed.output, completed.is_error, completed.result) == (
        "Tool error: RuntimeError: disk full",
        True,
        None,
    )


async def test_agent_settings_reach_the_call() -> None:
    @tool
    def big(ctx: RunContext[str]) -> dict[str, str]:
        return {"who": ctx.deps, "pad": "x" * 100}

    agent: Agent[str] = Agent(
        name="a",
        model=ScriptedProvider([call("big", {}), text("ok")]),
        tools=[big],
        max_tool_output_chars=20,
        tool_result_renderer=lambda value: f"{value['who']}:{value['pad']}",
    )
    result = await Runner.run(agent, "go", context="ada")
    (entry,) = results(result.entries)
    assert (
        entry.output == "ada:x" * 1 + "xxxxx" + "\n[... 84 characters truncated ...]\n" + "x" * 10
    )
    assert entry.raw is None
