"""Child process of ``test_probe_crash_ids.py`` (run as a script, never collected).

Usage: python probe_dup_worker.py SPEC_JSON (``backend``, ``run_id``, ``log``, ``kill``: the
keys of ``persist_worker.py``, without a session). The model sends the ids hostile
OpenAI-compatible servers send: one id twice in a batch, an id equal to a rewritten one
(``x_1``), blank ids, and the same id again in a later turn; two turns are lone calls (the
eager path), one of them suspending.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from lovia import Agent, Runner, tool
from lovia.checkpointer import CheckpointOptions
from lovia.messages import AssistantTurn
from lovia.testing import ScriptedProvider, batch, call, text

from tests.core.persistence.persist_worker import KillableCheckpointer, open_stores, say, stop_here

SCRIPT: list[AssistantTurn] = [
    batch(("step", {"item": "a"}, "x"), ("step", {"item": "b"}, "x")),
    batch(("step", {"item": "c"}, "x_1"), ("step", {"item": "d"}, "")),
    call("step", {"item": "e"}, call_id="x"),
    call("step", {"item": "f"}, call_id=""),
    text("finished"),
]
"""Five turns, twelve checkpoint appends (five model outputs, six results, the finalisation)."""
ITEMS = ("a", "b", "c", "d", "e", "f")
SUSPENDS = {"b", "e"}
"""Items whose tool suspends before returning (the others complete in their first step)."""


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    kill: dict[str, Any] = spec.get("kill") or {}
    _, checkpointer = open_stores(spec["backend"])

    @tool
    async def step(item: str) -> str:
        """Do one step (appends ``item`` to the log: the observable side effect)."""
        with open(spec["log"], "a", encoding="utf-8") as f:
            f.write(item + "\n")
        if kill.get("at") == "in-tool" and kill.get("item") == item:
            await stop_here()
        if item in SUSPENDS:
            await asyncio.sleep(0)
        return f"step {item} done"

    try:
        stored = await checkpointer.load(spec["run_id"])
        done_turns = stored.head.turns if stored is not None else 0
        provider = ScriptedProvider(SCRIPT[done_turns:])
        result = await Runner.run(
            Agent("worker", model=provider, tools=[step]),
            "run the job",
            checkpoint=CheckpointOptions(KillableCheckpointer(checkpointer, kill), spec["run_id"]),
        )
        provider.assert_consumed()
        return {"output": result.output, "model_calls": len(provider.calls)}
    finally:
        await checkpointer.aclose()


if __name__ == "__main__":
    say("RESULT " + json.dumps(asyncio.run(run(json.loads(sys.argv[1])))))
