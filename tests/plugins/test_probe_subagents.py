"""Cancelling the task that runs a parent while it sits in ``wait_subagents``.

The wait gathered the children's ``done`` events with ``asyncio.gather`` inside
``asyncio.wait_for``. Cancelling the parent's task cancelled the gather, which on
CPython 3.11 stores the ``CancelledError`` as the gather's exception, and nothing ever
retrieved it: the loop logged "_GatheringFuture exception was never retrieved".
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from lovia import Agent, NoopContextPolicy, Runner
from lovia.plugins.subagents import Subagents
from lovia.testing import ScriptedProvider, call, text

from .test_subagents import Gate, child


async def _until_waiting_on(children: int) -> None:
    """Poll (deadline 10 s) until the wait awaits each child's ``done`` event in a task."""

    def waits() -> int:
        return sum(
            getattr(t.get_coro(), "__qualname__", "") == "Event.wait" for t in asyncio.all_tasks()
        )

    async def poll() -> None:
        while waits() < children:
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), 10)


@pytest.mark.parametrize("ids", [None, ["sa_1"]], ids=["all", "named"])
async def test_a_parent_task_cancelled_mid_wait_leaves_no_unretrieved_future(
    ids: list[str] | None,
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        gate = Gate()
        plugin = Subagents([child([call("block", {}), text("never")], tools=[gate.tool])])
        wait_args: dict[str, Any] = {"timeout_seconds": 600}
        if ids is not None:
            wait_args["ids"] = ids
        model = ScriptedProvider(
            [
                call("spawn_subagent", {"prompt": "one"}, call_id="c1"),
                call("wait_subagents", wait_args, call_id="w1"),
                text("never"),
            ]
        )
        agent = Agent(
            name="parent", model=model, plugins=[plugin], context_policy=NoopContextPolicy()
        )
        running = asyncio.ensure_future(Runner.run(agent, "go"))
        await asyncio.wait_for(gate.entered.wait(), 10)
        await _until_waiting_on(1)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(running, 10)
        assert gate.cancelled  # the children went with their parent
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in reported] == []
