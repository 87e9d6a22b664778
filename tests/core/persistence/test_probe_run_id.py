"""Re-issuing a ``run_id`` while its first run is still going (issue 20 item 3).

A run id is an idempotency key: a second run with a live run id on the same checkpointer
waits for the first one, then replays its stored result. Its tools never run twice and its
model is never called.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, Runner, tool
from lovia.cancellation import CancelToken
from lovia.checkpointer import CheckpointOptions
from lovia.exceptions import RunCancelled
from lovia.stores import SQLiteCheckpointer
from lovia.testing import ScriptedProvider, call, text


def _charging_agent(charged: list[str], gate: asyncio.Event) -> tuple[Agent[Any], ScriptedProvider]:
    @tool
    async def charge(who: str) -> str:
        """Charge a customer (the side effect must happen once)."""
        charged.append(who)
        await gate.wait()
        return f"charged {who}"

    provider = ScriptedProvider([call("charge", {"who": "bob"}), text("done")])
    return Agent("billing", model=provider, tools=[charge]), provider


class _TwoRuns:
    """A first run inside its tool, then a second run with the same run id."""

    def __init__(self, checkpointer: SQLiteCheckpointer, run_id: str) -> None:
        self.charged: list[str] = []
        self.gate = asyncio.Event()
        self.options = CheckpointOptions(checkpointer, run_id)
        self.first_agent, _ = _charging_agent(self.charged, self.gate)
        self.second_agent, self.second_model = _charging_agent(self.charged, self.gate)

    async def start(self, token: CancelToken | None = None) -> tuple[asyncio.Future[Any], ...]:
        first = asyncio.ensure_future(
            Runner.run(self.first_agent, "bill bob", checkpoint=self.options)
        )
        while not self.charged:
            await asyncio.sleep(0)  # until the first run is inside its tool
        second = asyncio.ensure_future(
            Runner.run(self.second_agent, "bill bob", checkpoint=self.options, cancel_token=token)
        )
        for _ in range(20):  # let the second run get as far as it would
            await asyncio.sleep(0)
        return first, second


async def test_a_second_run_with_a_live_run_id_waits_and_replays(tmp_path: Path) -> None:
    checkpointer = SQLiteCheckpointer(str(tmp_path / "runs.db"))
    runs = _TwoRuns(checkpointer, "invoice-7")
    try:
        first, second = await runs.start()
        assert not second.done()
        runs.gate.set()
        one, two = await asyncio.wait_for(asyncio.gather(first, second), 10)
    finally:
        await checkpointer.aclose()
    assert runs.charged == ["bob"]
    assert one.output == two.output == "done"
    assert two.entries == one.entries
    assert len(runs.second_model.unused_steps) == 2  # the replay never called its model


async def test_waiting_for_a_live_run_id_is_cancellable(tmp_path: Path) -> None:
    checkpointer = SQLiteCheckpointer(str(tmp_path / "runs.db"))
    runs = _TwoRuns(checkpointer, "invoice-8")
    token = CancelToken()
    try:
        first, second = await runs.start(token)
        token.cancel("gave up")
        with pytest.raises(RunCancelled):
            await asyncio.wait_for(second, 10)
        runs.gate.set()
        assert (await asyncio.wait_for(first, 10)).output == "done"
    finally:
        await checkpointer.aclose()
    assert runs.charged == ["bob"]
