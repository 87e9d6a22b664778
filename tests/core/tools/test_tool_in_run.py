"""Tools inside a real run: what the model sees and what the stream reports."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia import Agent, RunContext, Runner, Tool, ToolResultEntry, tool
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


class Opaque:
    pass


async def test_unserialisable_result_reaches_the_model_as_an_error_and_the_run_goes_on() -> None:
    @tool
    def opaque() -> Any:
        return Opaque()

    provider = ScriptedProvider([call("opaque", {}), text("noted")])
    result = await Runner.run(Agent(name="a", model=provider, tools=[opaque]), "go")
    (entry,) = results(result.entries)
    assert (entry.is_error, entry.raw) == (True, None)
    assert entry.output.startswith(
        "Tool error: rendering the result of 'opaque' failed: TypeError: Object of type Opaque"
    )
    assert result.output == "noted"


async def test_agent_default_timeout_cuts_off_a_hanging_tool() -> None:
    @tool
    async def hangs() -> None:
        await asyncio.Event().wait()

    agent = Agent(
        name="a",
        model=ScriptedProvider([call("hangs", {}), text("gave up")]),
        tools=[hangs],
        default_tool_timeout=0.01,
    )
    result = await Runner.run(agent, "go")
    (entry,) = results(result.entries)
    assert entry.is_error
    assert entry.output.startswith("Tool error: tool 'hangs' timed out after 0.01 s")
    assert result.output == "gave up"


async def test_agent_default_retries_reach_the_call() -> None:
    attempts: list[int] = []

    @tool
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("reset")
        return "ok"

    agent = Agent(
        name="a",
        model=ScriptedProvider([call("flaky", {}), text("done")]),
        tools=[flaky],
        default_tool_retries=1,  # one 0.5 s backoff: the smallest the run loop allows
    )
    result = await Runner.run(agent, "go")
    (entry,) = results(result.entries)
    assert (entry.output, entry.is_error, len(attempts)) == ("ok", False, 2)


async def test_default_agent_caps_tool_output_at_200_000_characters() -> None:
    @tool
    def huge() -> str:
        return "h" * 200_001

    @tool
    def at_cap() -> str:
        return "c" * 200_000

    provider = ScriptedProvider([call("huge", {}), call("at_cap", {}), text("ok")])
    result = await Runner.run(Agent(name="a", model=provider, tools=[huge, at_cap]), "go")
    cut, whole = results(result.entries)
    assert cut.output == "h" * 100_000 + "\n[... 1 characters truncated ...]\n" + "h" * 100_000
    assert (whole.output, whole.raw) == ("c" * 200_000, None)  # large: raw dropped anyway


async def test_a_programmatic_tool_receives_raw_arguments_and_the_context() -> None:
    seen: list[tuple[dict[str, Any], Any]] = []

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        seen.append((args, ctx.deps))
        return f"echo {args['text']}"

    echo = Tool(
        name="echo",
        description="Echo text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        invoke=invoke,
    )
    provider = ScriptedProvider([call("echo", {"text": 5, "extra": True}), text("ok")])
    result = await Runner.run(Agent(name="a", model=provider, tools=[echo]), "go", context="d")
    (entry,) = results(result.entries)
    assert (entry.output, entry.is_error) == ("echo 5", False)
    assert seen == [({"text": 5, "extra": True}, "d")]  # no validation: invoke owns the args
    assert "echo" in provider.tools[0]
