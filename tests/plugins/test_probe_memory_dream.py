"""Dreams of one memory never overlap: concurrent runs over budget consolidate once,
instead of each merging the others' rewrites back in as if they were new facts."""

from __future__ import annotations

import asyncio
import fcntl
import json
from pathlib import Path

from lovia import Agent, Runner
from lovia.messages import AssistantTurn
from lovia.plugins import Memory
from lovia.testing import ScriptedProvider, text


def dream_reply(version: int) -> AssistantTurn:
    fact = f"Drinks tea every morning (consolidated, version {version})"
    return text(json.dumps({"notes": [{"month": "2026-01", "fact": fact}]}))


def over_budget_memory(root: Path, curator: ScriptedProvider) -> Memory:
    memory = Memory(root, auto_curate=False, notes_budget=200, model=curator)
    for i in range(8):
        memory.remember(f"Drinks tea every morning, as said in conversation number {i}")
    return memory


async def test_concurrent_runs_over_budget_dream_once(tmp_path: Path) -> None:
    curator = ScriptedProvider([dream_reply(v) for v in range(20)])
    memory = over_budget_memory(tmp_path, curator)

    async def one(i: int) -> None:
        agent = Agent("a", model=ScriptedProvider([text("ok")]), plugins=[memory])
        await Runner.run(agent, f"hello {i}")

    await asyncio.gather(*(one(i) for i in range(20)))
    assert len(curator.calls) == 1
    assert memory.notes_body().count("consolidated") == 1


async def test_a_dream_due_in_another_process_is_left_to_it(tmp_path: Path) -> None:
    curator = ScriptedProvider([dream_reply(0)])
    memory = over_budget_memory(tmp_path, curator)
    with open(tmp_path / ".dreaming.lock", "a") as held:  # as another process would hold it
        fcntl.flock(held, fcntl.LOCK_EX)
        agent = Agent("a", model=ScriptedProvider([text("ok")]), plugins=[memory])
        await Runner.run(agent, "hello")
    assert len(curator.calls) == 0
    assert await memory.dream() == (8, 1)  # on demand, once the slot is free
