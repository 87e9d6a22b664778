"""SIGKILL a checkpointed run whose provider sends duplicate, colliding and blank call ids,
then resume it in a new process (``probe_dup_worker.py``).

Nothing is lost or duplicated, every result is paired with its own call (the result of the
call for item ``a`` says ``step a done``), a tool whose result was stored never runs again,
and one without a stored result runs exactly once more. Lone calls take the eager path,
one of them suspending, so kills land inside and around it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from lovia.stores import SQLiteCheckpointer
from lovia.transcript import ToolCallEntry, ToolResultEntry

from tests.core.persistence import probe_dup_worker as worker

WORKER = str(Path(__file__).with_name("probe_dup_worker.py"))
TIMEOUT = 60.0  # a guard against a hung child only

KILLS: list[dict[str, Any]] = [
    *({"at": "before-append", "n": n} for n in (1, 2, 4, 6, 8, 10, 12)),
    *({"at": "after-append", "n": n} for n in (3, 9)),
    *({"at": "in-tool", "item": item} for item in ("a", "e", "f")),
]
"""Model outputs and results of batches and of lone calls (eager, suspending or not)."""


async def _kill_at_ready(spec: dict[str, Any]) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        WORKER,
        json.dumps(spec),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)
    if line.strip() != b"READY":
        proc.kill()
        _, err = await proc.communicate()
        pytest.fail(f"the worker never reached {spec['kill']}: {line!r}\n{err.decode()}")
    proc.kill()
    await proc.wait()


async def _resume_in_new_process(spec: dict[str, Any]) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        WORKER,
        json.dumps({**spec, "kill": None}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 0, err.decode()
    (line,) = [ln for ln in out.decode().splitlines() if ln.startswith("RESULT ")]
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return result


def _log(path: Path) -> Counter[str]:
    return Counter(path.read_text().split()) if path.exists() else Counter()


async def _load(path: str, run_id: str) -> Any:
    checkpointer = SQLiteCheckpointer(path)
    try:
        return await checkpointer.load(run_id)
    finally:
        await checkpointer.aclose()


def _paired(entries: Any) -> dict[str, str]:
    """Item of each call -> the output of the result with the call's id."""
    items = {
        e.call_id: json.loads(e.arguments)["item"] for e in entries if isinstance(e, ToolCallEntry)
    }
    return {items[e.call_id]: e.output for e in entries if isinstance(e, ToolResultEntry)}


@pytest.mark.parametrize("kill", KILLS, ids=lambda k: "-".join(str(v) for v in k.values()))
async def test_sigkill_with_hostile_call_ids_then_resume(
    tmp_path: Path, kill: dict[str, Any]
) -> None:
    db = str(tmp_path / "crash.db")
    spec: dict[str, Any] = {
        "backend": {"name": "sqlite", "path": db, "wal": False},
        "run_id": "run-1",
        "log": str(tmp_path / "tools.log"),
        "kill": kill,
    }
    await _kill_at_ready(spec)
    at_kill = await _load(db, "run-1")
    ran_at_kill = _log(Path(spec["log"]))
    kept = set(_paired(at_kill.entries)) if at_kill is not None else set()

    result = await _resume_in_new_process(spec)
    final = await _load(db, "run-1")

    assert result["output"] == "finished"
    stored_turns = at_kill.head.turns if at_kill is not None else 0
    assert result["model_calls"] == 5 - stored_turns
    assert final.head.status == "completed"
    if at_kill is not None:
        assert final.entries[: len(at_kill.entries)] == at_kill.entries  # append-only
    call_ids = [e.call_id for e in final.entries if isinstance(e, ToolCallEntry)]
    result_ids = [e.call_id for e in final.entries if isinstance(e, ToolResultEntry)]
    assert len(set(call_ids)) == len(call_ids) == 6  # unique, nothing lost or duplicated
    assert sorted(result_ids) == sorted(call_ids)
    assert _paired(final.entries) == {item: f"step {item} done" for item in worker.ITEMS}
    ran = _log(Path(spec["log"]))
    for item in worker.ITEMS:
        again = 0 if item in kept else 1  # only a call without a stored result re-runs
        assert ran[item] == ran_at_kill[item] + again, (item, ran_at_kill, kept)
