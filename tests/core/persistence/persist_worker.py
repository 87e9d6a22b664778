"""The child process of the SIGKILL crash test (run as a script, never collected).

Usage: python persist_worker.py SPEC_JSON

It runs (or resumes, or replays) one checkpointed multi-turn, multi-tool, two-agent run
against a real store, picking up the model script after the turns the checkpoint already
holds. SPEC_JSON keys:

* ``backend``: ``{"name": "sqlite", "path": ..., "wal": bool}`` or
  ``{"name": "postgres", "dsn": ..., "schema": ...}``;
* ``run_id``, ``session_id``, ``log`` (a file each tool execution appends its item to);
* ``kill`` (optional): where to stop and wait for the parent's SIGKILL --
  ``{"at": "before-append"|"after-append", "n": N}`` (the N-th checkpoint append),
  ``{"at": "in-tool", "item": ITEM}`` (inside that tool, after its side effect), or
  ``{"at": "before-session"}`` (between the checkpoint finalisation and the session append).

At the kill point it prints ``READY`` and blocks; the parent kills it on that line, so kill
points are deterministic without sleeps. Without ``kill`` it runs to the end and prints
``RESULT {json}``; the parent may also call ``run(spec)`` in its own process.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from lovia import Agent, Runner, tool
from lovia.checkpointer import CheckpointOptions, RunHead, RunSnapshot
from lovia.messages import AssistantTurn
from lovia.session import Segment
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import TranscriptEntry

SCRIPT: list[AssistantTurn] = [
    batch(("step", {"item": "a"}, "a"), ("step", {"item": "b"}, "b")),
    call("step", {"item": "c"}, call_id="c"),
    call("transfer_to_closer", {"reason": "wrap up"}, call_id="h"),
    batch(("step", {"item": "d"}, "d"), ("step", {"item": "e"}, "e")),
    text("finished"),
]
"""Five turns: two parallel calls, one call, a handoff, two parallel calls in the target,
then the final answer. Twelve checkpoint appends in all (five model outputs, six tool
results, the finalisation)."""


def say(line: str) -> None:
    print(line, flush=True)


async def stop_here() -> None:
    say("READY")
    await asyncio.Event().wait()  # the parent's SIGKILL ends the process here


class KillableCheckpointer:
    """The real checkpointer, stopping before or after its N-th append when asked."""

    def __init__(self, inner: Any, kill: dict[str, Any]) -> None:
        self.inner, self.kill, self.count = inner, kill, 0

    async def append(self, run_id: str, entries: Sequence[TranscriptEntry], head: RunHead) -> None:
        self.count += 1
        hit = self.kill.get("n") == self.count
        if hit and self.kill.get("at") == "before-append":
            await stop_here()
        await self.inner.append(run_id, entries, head)
        if hit and self.kill.get("at") == "after-append":
            await stop_here()

    async def load(self, run_id: str) -> RunSnapshot | None:
        snapshot: RunSnapshot | None = await self.inner.load(run_id)
        return snapshot

    async def delete(self, run_id: str) -> None:
        await self.inner.delete(run_id)


class KillableSession:
    """The real session, stopping before its append when asked."""

    def __init__(self, inner: Any, kill: dict[str, Any]) -> None:
        self.inner, self.kill = inner, kill

    async def segments(self, session_id: str) -> list[Segment]:
        segments: list[Segment] = await self.inner.segments(session_id)
        return segments

    async def load(self, session_id: str) -> list[TranscriptEntry]:
        entries: list[TranscriptEntry] = await self.inner.load(session_id)
        return entries

    async def append(
        self,
        session_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        if self.kill.get("at") == "before-session":
            await stop_here()
        used: str = await self.inner.append(session_id, entries, run_id=run_id, meta=meta)
        return used

    async def clear(self, session_id: str) -> None:
        await self.inner.clear(session_id)

    def lease(
        self, session_id: str, *, wait: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        lease: AbstractAsyncContextManager[None] = self.inner.lease(
            session_id, wait=wait, timeout=timeout
        )
        return lease


def open_stores(backend: dict[str, Any]) -> tuple[Any, Any]:
    if backend["name"] == "sqlite":
        from lovia.stores import SQLiteCheckpointer, SQLiteSession

        wal = bool(backend.get("wal"))
        return SQLiteSession(backend["path"], wal=wal), SQLiteCheckpointer(backend["path"], wal=wal)
    from lovia.stores import PostgresCheckpointer, PostgresSession

    dsn, schema = backend["dsn"], backend["schema"]
    return PostgresSession(dsn, schema=schema), PostgresCheckpointer(dsn, schema=schema)


def agents(log_path: str, kill: dict[str, Any], provider: ScriptedProvider) -> Agent[Any]:
    @tool
    async def step(item: str) -> str:
        """Do one step of the job (appends ``item`` to the log: the observable side effect)."""
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(item + "\n")
        if kill.get("at") == "in-tool" and kill.get("item") == item:
            await stop_here()
        return f"step {item} done"

    closer = Agent("closer", instructions="Close the job.", model=provider, tools=[step])
    return Agent(
        "starter", instructions="Start the job.", model=provider, tools=[step], handoffs=[closer]
    )


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run, resume or replay the job as ``spec`` says; returns what the parent checks."""
    kill: dict[str, Any] = spec.get("kill") or {}
    session, checkpointer = open_stores(spec["backend"])
    try:
        stored = await checkpointer.load(spec["run_id"])
        done_turns = stored.head.turns if stored is not None else 0
        provider = ScriptedProvider(SCRIPT[done_turns:])
        result = await Runner.run(
            agents(spec["log"], kill, provider),
            "run the job",
            session=KillableSession(session, kill),
            session_id=spec["session_id"],
            checkpoint=CheckpointOptions(
                KillableCheckpointer(checkpointer, kill),
                spec["run_id"],
            ),
        )
        provider.assert_consumed()
        return {
            "output": result.output,
            "agent": result.final_agent.name,
            "model_calls": len(provider.calls),
            "resumed_from_turn": done_turns,
        }
    finally:
        await session.aclose()
        await checkpointer.aclose()


async def main(spec: dict[str, Any]) -> None:
    say("RESULT " + json.dumps(await run(spec)))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
