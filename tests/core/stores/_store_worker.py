"""A separate process for the cross-process store tests (run as a script, not collected).

Usage: python _store_worker.py COMMAND BACKEND_JSON SESSION_ID [N]

BACKEND_JSON is {"name": "sqlite"|"postgres", "location": path-or-dsn, "schema": ...}.
Commands print one line per observable step and flush, so the parent synchronises on them:

* append N: append N runs to the session and checkpoint each run, then print "done".
* hold: take the lease (fail fast), print "held", keep it until stdin closes.
* hold-run: the same with the checkpointer's lease on the run id SESSION_ID.
* contend: try the lease fail-fast (prints "busy"), then wait for it (prints "acquired").
* run: run a checkpointed one-tool run with run_id SESSION_ID; its tool prints "in-tool"
  and returns once stdin closes; then print "done OUTPUT".
* open-append N (BACKEND_JSON unused): for each path read from stdin, open N new WAL
  stores on that file at once and append one run from each, then print "done" (or the
  error).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from lovia import Agent, Runner, tool
from lovia.checkpointer import CheckpointOptions, RunHead
from lovia.exceptions import SessionBusyError
from lovia.stores import PostgresCheckpointer, PostgresSession, SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry


def say(line: str) -> None:
    print(line, flush=True)


def stores(spec: dict[str, Any]) -> tuple[Any, Any]:
    if spec["name"] == "sqlite":
        return SQLiteSession(spec["location"]), SQLiteCheckpointer(spec["location"])
    return (
        PostgresSession(spec["location"], schema=spec["schema"]),
        PostgresCheckpointer(spec["location"], schema=spec["schema"]),
    )


async def append(session: Any, checkpointer: Any, session_id: str, n: int) -> None:
    for i in range(n):
        run_id = f"{session_id}-run{i}"
        entries = [
            InputEntry("user", f"{session_id} q{i}"),
            ToolCallEntry(f"c{i}", "tool", "{}"),
            ToolResultEntry(f"c{i}", f"r{i}"),
            AssistantTextEntry(f"{session_id} a{i}"),
        ]
        await checkpointer.append(run_id, entries[:2], RunHead(agent_name="a"))
        await checkpointer.append(run_id, entries[2:], RunHead(agent_name="a", status="completed"))
        await session.append(session_id, entries, run_id=run_id)
    say("done")


async def hold(store: Any, key: str) -> None:
    async with store.lease(key, wait=False):
        say("held")
        await asyncio.to_thread(sys.stdin.read)
    say("released")


async def contend(session: Any, session_id: str) -> None:
    try:
        async with session.lease(session_id, wait=False):
            say("acquired-without-waiting")
            return
    except SessionBusyError:
        say("busy")
    async with session.lease(session_id, wait=True, timeout=30):
        say("acquired")


async def run(checkpointer: Any, run_id: str) -> None:
    @tool
    async def charge(who: str) -> str:
        """Charge a customer."""
        say("in-tool")
        await asyncio.to_thread(sys.stdin.read)
        return f"charged {who}"

    script = [call("charge", {"who": "bob"}, call_id="c1"), text("bob is charged")]
    agent = Agent("biller", model=ScriptedProvider(script), tools=[charge])
    result = await Runner.run(
        agent, "charge bob", checkpoint=CheckpointOptions(checkpointer, run_id)
    )
    say(f"done {result.output}")


async def open_append(prefix: str, n: int) -> None:
    while path := (await asyncio.to_thread(sys.stdin.readline)).strip():
        opened = [SQLiteSession(path, wal=True) for _ in range(n)]
        outcomes = await asyncio.gather(
            *(
                store.append(f"{prefix}-{i}", [InputEntry("user", "hi")])
                for i, store in enumerate(opened)
            ),
            return_exceptions=True,
        )
        for store in opened:
            await store.aclose()
        errors = [repr(o) for o in outcomes if isinstance(o, BaseException)]
        say(f"failed: {errors}" if errors else "done")


async def main(command: str, spec: dict[str, Any], session_id: str, n: int) -> None:
    if command == "open-append":
        await open_append(session_id, n)
        return
    session, checkpointer = stores(spec)
    try:
        if command == "append":
            await append(session, checkpointer, session_id, n)
        elif command == "hold":
            await hold(session, session_id)
        elif command == "hold-run":
            await hold(checkpointer, session_id)
        elif command == "run":
            await run(checkpointer, session_id)
        elif command == "contend":
            await contend(session, session_id)
        else:
            raise SystemExit(f"unknown command {command!r}")
    finally:
        await session.aclose()
        await checkpointer.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4] or 0)))
