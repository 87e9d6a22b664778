"""A lone call's first step runs at once, yet in a task of its own (on 3.11 too, see
``runtime/_tasks._step_as``): these pin what a shared task would break."""

from __future__ import annotations

import asyncio
import contextvars
import sys

import pytest
from lovia import Agent, Runner, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling is 3.11+")

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def _outputs(result: object) -> list[str]:
    return [e.output for e in result.entries if isinstance(e, ToolResultEntry)]  # type: ignore[attr-defined]


async def test_a_context_variable_set_by_one_call_is_not_seen_by_the_next() -> None:
    @tool
    async def mark(value: str) -> str:
        """Reports the variable, then sets it."""
        before = _seen.get()
        _seen.set(value)
        return before

    provider = ScriptedProvider(
        [call("mark", {"value": "a"}), call("mark", {"value": "b"}), text("done")]
    )
    result = await Runner.run(Agent("t", model=provider, tools=[mark]), "go")
    assert _outputs(result) == ["unset", "unset"]
    assert _seen.get() == "unset"


async def test_a_call_that_cancels_its_own_task_at_once_does_not_reach_the_next_call() -> None:
    @tool
    async def self_cancel() -> str:
        """Asks to cancel its own task, then returns without waiting."""
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        return "asked"

    @tool
    async def sleeper() -> str:
        """Suspends: a cancel leaked from the previous call would land here."""
        await asyncio.sleep(0.01)
        return "slept"

    provider = ScriptedProvider([call("self_cancel", {}), call("sleeper", {}), text("done")])
    agent = Agent("t", model=provider, tools=[self_cancel, sleeper])
    result = await asyncio.wait_for(Runner.run(agent, "go"), 5)
    assert _outputs(result) == ["asked", "slept"]
    assert result.output == "done"


async def test_sync_finishing_calls_then_a_suspending_one_keep_the_run_task_out() -> None:
    runner_task = asyncio.current_task()
    tasks: list[asyncio.Task[object] | None] = []

    @tool
    async def quick() -> str:
        """Returns at once."""
        tasks.append(asyncio.current_task())
        return "ok"

    @tool
    async def slow() -> str:
        """Suspends, and reports whether it kept one task."""
        first = asyncio.current_task()
        await asyncio.sleep(0)
        return f"{first is asyncio.current_task()} {first is runner_task}"

    script = [
        call("quick", {}),
        call("quick", {}),
        call("slow", {}),
        call("quick", {}),
        text("done"),
    ]
    provider = ScriptedProvider(script)
    result = await Runner.run(Agent("t", model=provider, tools=[quick, slow]), "go")
    assert _outputs(result) == ["ok", "ok", "True False", "ok"]
    assert runner_task not in tasks and None not in tasks


async def test_a_run_with_lone_calls_leaves_no_task_behind() -> None:
    before = asyncio.all_tasks()

    @tool
    async def quick() -> str:
        """Returns at once."""
        return "ok"

    provider = ScriptedProvider([call("quick", {}), call("quick", {}), text("done")])
    await Runner.run(Agent("t", model=provider, tools=[quick]), "go")
    await asyncio.sleep(0)  # (a call's task that finished in its first step ends at its next one)
    assert asyncio.all_tasks() == before


async def test_a_cancel_a_finished_call_scheduled_on_its_task_never_reaches_a_later_call() -> None:
    # A task per call (3.12+): the first call's task is done when the cancel fires, so the
    # cancel is a no-op. A task shared between calls would cancel the second call instead.
    @tool
    async def arm() -> str:
        """Schedules a cancel of its own task for later, then returns at once."""
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_later(0.01, task.cancel)
        return "armed"

    @tool
    async def slow() -> str:
        """Suspends past the armed cancel."""
        await asyncio.sleep(0.05)
        return "slept"

    provider = ScriptedProvider([call("arm", {}), call("slow", {}), text("done")])
    agent = Agent("t", model=provider, tools=[arm, slow])
    result = await asyncio.wait_for(Runner.run(agent, "go"), 5)
    assert _outputs(result) == ["armed", "slept"]


async def test_each_lone_call_runs_as_a_task_of_its_own() -> None:
    # Per-task state (a cache or a session keyed on current_task(), a done callback) must
    # belong to one call, as it does with a task per call.
    seen: list[asyncio.Task[object] | None] = []

    @tool
    async def quick() -> str:
        """Returns at once."""
        seen.append(asyncio.current_task())
        return "ok"

    provider = ScriptedProvider([call("quick", {}), call("quick", {}), text("done")])
    await Runner.run(Agent("t", model=provider, tools=[quick]), "go")
    assert len(seen) == 2 and seen[0] is not seen[1]
