"""Re-issuing a ``run_id`` while its first run is still going (issue 20 item 3).

A run id is an idempotency key: a second run with a live run id on the same checkpointer
waits for the first one, then replays its stored result. Its tools never run twice and its
model is never called.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lovia import Agent, Runner, tool
from lovia.cancellation import CancelToken
from lovia.checkpointer import CheckpointOptions
from lovia.exceptions import RunCancelled
from lovia.stores import SQLiteCheckpointer
from lovia.testing import ScriptedProvider, call, text


def _charging_agent(charged: list[str], gate: asyncio.Event) -> tuple[Agent, ScriptedProvider]:
    @tool
    async def charge(who: str) -> str:
        """Charge a customer (the side effect must happen once)."""
        charged.append(who)
        await gate.wait()
        return f"charged {who}"

    provider = ScriptedProvider([call("charge", {"who": "bob"}), text("done")])
    return Agent("billing", model=provider, tools=[charge]), provider


async def test_a_second_run_with_a_live_run_id_waits_and_replays(tmp_path: Path) -> None:
    checkpointer = SQLiteCheckpointer(str(tmp_path / "runs.db"))
    charged: list[str] = []
    gate = asyncio.Event()
    first_agent, _ = _charging_agent(charged, gate)
    second_agent, second_model = _charging_agent(charged, gate)
    try:
        options = CheckpointOptions(checkpointer, "invoice-7")
        first = asyncio.ensure_future(Runner.run(first_agent, "bill bob", checkpoint=options))
        while not charged:
            await asyncio.sleep(0)  # until the first run is inside its tool
        second = asyncio.ensure_future(Runner.run(second_agent, "bill bob", checkpoint=options))
        for _ in range(20):  # let the second run get as far as it would
            await asyncio.sleep(0)
        assert not second.done()
        gate.set()
        one, two = await asyncio.wait_for(asyncio.gather(first, second), 10)
    finally:
        await checkpointer.aclose()
    assert charged == ["bob"]
    assert one.output == two.output == "done"
    assert two.entries == one.entries
    assert len(second_model.unused_steps) == 2  # the replay never called its model


async def test_waiting_for_a_live_run_id_is_cancellable(tmp_path: Path) -> None:
    checkpointer = SQLiteCheckpointer(str(tmp_path / "runs.db"))
    charged: list[str] = []
    gate = asyncio.Event()
    first_agent, _ = _charging_agent(charged, gate)
    second_agent, _ = _charging_agent(charged, gate)
    token = CancelToken()
    try:
        options = CheckpointOptions(checkpointer, "invoice-8")
        first = asyncio.ensure_future(Runner.run(first_agent, "bill bob", checkpoint=options))
        while not charged:
            await asyncio.sleep(0)
        second = asyncio.ensure_future(
            Runner.run(second_agent, "bill bob", checkpoint=options, cancel_token=token)
        )
        for _ in range(20):
            await asyncio.sleep(0)
        token.cancel("gave up")
        with pytest.raises(RunCancelled):
            await asyncio.wait_for(second, 10)
        gate.set()
        assert (await asyncio.wait_for(first, 10)).output == "done"
    finally:
        await checkpointer.aclose()
    assert charged == ["bob"]
