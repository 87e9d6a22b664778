"""A lone tool call runs in its own task: task-scoped asyncio features work in a tool.

The lone-call fast path must not run a tool's first step on the run's own task: a tool
that uses ``asyncio.timeout()`` (and on 3.12+ ``asyncio.wait_for``, which the per-call
``timeout`` uses) would then cancel the whole run instead of itself.
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from lovia import Agent, Runner, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="asyncio.timeout and TaskGroup are 3.11+"
)


async def test_a_lone_calls_own_asyncio_timeout_cancels_the_call_not_the_run() -> None:
    never = asyncio.Event()

    @tool
    async def bounded() -> str:
        """Gives up on its own deadline."""
        try:
            async with asyncio.timeout(0.01):  # type: ignore[attr-defined,unused-ignore]  # 3.11+
                await never.wait()
        except TimeoutError:
            return "gave up"
        return "unreachable"

    provider = ScriptedProvider([call("bounded", {}), text("done")])
    result = await asyncio.wait_for(
        Runner.run(Agent("t", model=provider, tools=[bounded]), "go"), 5
    )
    outputs = [e.output for e in result.entries if isinstance(e, ToolResultEntry)]
    assert outputs == ["gave up"]
    assert result.output == "done"


async def test_a_lone_call_keeps_one_task_across_its_suspensions() -> None:
    runner_task = asyncio.current_task()

    @tool
    async def identity() -> str:
        """Reports whether it runs in one task of its own."""
        first = asyncio.current_task()
        await asyncio.sleep(0)
        return f"{first is asyncio.current_task()} {first is runner_task}"

    provider = ScriptedProvider([call("identity", {}), text("done")])
    result = await Runner.run(Agent("t", model=provider, tools=[identity]), "go")
    outputs = [e.output for e in result.entries if isinstance(e, ToolResultEntry)]
    assert outputs == ["True False"]


async def test_a_lone_call_with_a_task_group_that_fails_is_a_tool_error() -> None:
    @tool
    async def grouped() -> str:
        """Runs a failing child in a task group."""

        async def child() -> None:
            await asyncio.sleep(0)
            raise ValueError("child broke")

        async with asyncio.TaskGroup() as group:  # type: ignore[attr-defined,unused-ignore]  # 3.11+
            group.create_task(child())
            await asyncio.Event().wait()
        return "unreachable"

    provider = ScriptedProvider([call("grouped", {}), text("done")])
    result = await asyncio.wait_for(
        Runner.run(Agent("t", model=provider, tools=[grouped]), "go"), 5
    )
    (tool_result,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert tool_result.is_error
    assert "TaskGroup" in tool_result.output
    assert result.output == "done"
