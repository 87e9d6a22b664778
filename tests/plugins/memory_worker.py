"""A separate process for the memory tests: ``python memory_worker.py MODE ROOT LABEL``.

``remember``: prints ``ready``, waits for a line on stdin, then remembers 40 facts.
``chat``: runs one scripted conversation through Memory (its messages are archived).
"""

from __future__ import annotations

import asyncio
import sys

from lovia import Agent, Runner
from lovia.plugins import Memory
from lovia.testing import ScriptedProvider, text


def remember(root: str, label: str) -> None:
    memory = Memory(root, auto_curate=False)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(40):
        memory.remember(f"fact {i} from worker {label}")


async def chat(root: str, label: str) -> None:
    memory = Memory(root, auto_curate=False)
    model = ScriptedProvider([text(f"Noted: your {label} is parked in bay 42.")])
    agent = Agent("a", model=model, plugins=[memory])
    await Runner.run(agent, f"Remember that my {label} is parked in bay 42")


if __name__ == "__main__":
    mode, root, label = sys.argv[1:4]
    if mode == "remember":
        remember(root, label)
    else:
        asyncio.run(chat(root, label))
