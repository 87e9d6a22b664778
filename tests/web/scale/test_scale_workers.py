"""Three ``lovia web`` workers on one PostgreSQL and one RabbitMQ queue, as separate processes
on their own ports, with the client choosing the worker (no balancer).

Each test starts its workers and stops them (``workers`` fixture); waits are polls with
deadlines, never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..conftest import Frame, read_frames
from .conftest import Worker, Workers, poll

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


class Frames:
    """One response's frames, read up to a point and later on from there."""

    def __init__(self, response: httpx.Response) -> None:
        self._frames = read_frames(response)
        self.seen: list[Frame] = []

    async def until(self, event: str, name: str | None = None) -> list[Frame]:
        async for frame in self._frames:
            self.seen.append(frame)
            if frame.event == event and (name is None or frame.data.get("name") == name):
                break
        return self.seen


async def _until_done(response: httpx.Response, frames: list[Frame]) -> list[Frame]:
    frames.extend(await Frames(response).until("done"))
    return frames


async def _chat(worker: Worker, message: str) -> list[Frame]:
    async with (
        httpx.AsyncClient(base_url=worker.url, timeout=30) as client,
        client.stream("POST", "/api/chat/stream", json={"message": message}) as r,
    ):
        assert r.status_code == 200, await r.aread()
        return await _until_done(r, [])


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


class Lifecycle:
    """One worker's ``/api/events``, collected in the background."""

    def __init__(self, client: httpx.AsyncClient, worker: Worker) -> None:
        self.kinds: list[tuple[str, str]] = []  # (kind, session_id)
        self.subscribed = asyncio.Event()
        self.task = asyncio.create_task(self._read(client, worker.url))

    async def _read(self, client: httpx.AsyncClient, url: str) -> None:
        async with client.stream("GET", f"{url}/api/events") as r:
            kind = ""
            async for line in r.aiter_lines():
                if line.startswith(": subscribed"):
                    self.subscribed.set()
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    self.kinds.append((kind, json.loads(line[6:]).get("session_id", "")))


def _other(workers: Workers, *not_these: Worker) -> Worker:
    return next(w for w in workers.workers if w.alive and w not in not_these)


async def test_chats_spread_and_commands_reach_the_worker_holding_the_run(
    workers: Workers, tmp_path: Path
) -> None:
    pool = await workers.start(3)
    chats = await asyncio.gather(*(_chat(pool[i % 3], f"quick {i}") for i in range(9)))
    for frames in chats:
        assert frames[-1].data["status"] == "completed"
        ids = [int(f.id or "") for f in frames[1:]]
        assert ids == list(range(1, len(ids) + 1))
    assert len(set(_lines(tmp_path / "quick.log"))) >= 2  # more than one worker ran them

    # Every worker's /api/events tells of a chat, whichever worker started or ran it: once.
    async with httpx.AsyncClient(timeout=30) as client:
        buses = [Lifecycle(client, w) for w in pool]
        try:
            await asyncio.wait_for(asyncio.gather(*(b.subscribed.wait() for b in buses)), 20)
            frames = await _chat(pool[0], "hello")
            sid = frames[0].data["session_id"]
            for bus in buses:
                await poll(partial(bus.kinds.__contains__, ("run_finished", sid)), "the end")
                mine = sorted(kind for kind, session in bus.kinds if session == sid)
                assert mine == ["run_finished", "run_started", "session_created"]
        finally:
            for bus in buses:
                bus.task.cancel()
            await asyncio.gather(*(b.task for b in buses), return_exceptions=True)

    # An approval posted to a worker that does not hold the run reaches the one that does.
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{pool[0].url}/api/chat/stream", json={"message": "gate"}) as r,
    ):
        stream = Frames(r)
        frames = await stream.until("approval_required")
        sid, call_id = frames[0].data["session_id"], frames[-1].data["call_id"]
        owner = await workers.owner(sid)
        stranger = _other(workers, owner)
        # A reconnect through that worker shows the pending approval in its snapshot.
        async with client.stream(
            "POST", f"{stranger.url}/api/chat/reconnect", params={"session_id": sid}
        ) as again_r:
            snapshot = (await Frames(again_r).until("snapshot"))[-1]
        assert snapshot.data["pending_approvals"] == [call_id]
        body = {"session_id": sid, "call_id": call_id, "decision": "approve"}
        decided = await client.post(f"{stranger.url}/api/chat/approve", json=body)
        assert decided.status_code == 200, decided.text
        again = await client.post(f"{stranger.url}/api/chat/approve", json=body)
        assert again.status_code == 404  # decided once
        await stream.until("done")
    results = [f.data["output"] for f in frames if f.event == "tool_result"]
    assert results == ["gated ran"]
    assert frames[-1].data["status"] == "completed"

    # A message sent through another worker joins the live run; a cancel posted to another
    # worker stops the run where it lives, and both streams end with it.
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{pool[1].url}/api/chat/stream", json={"message": "tool"}) as r,
    ):
        stream = Frames(r)
        frames = await stream.until("tool_call", "block")
        sid, run_id = frames[0].data["session_id"], frames[0].data["run_id"]
        owner = await workers.owner(sid)
        stranger = _other(workers, owner)
        more = {"message": "one more thing", "session_id": sid}
        async with client.stream("POST", f"{stranger.url}/api/chat/stream", json=more) as joined:
            assert joined.status_code == 200, await joined.aread()
            attached = Frames(joined)
            (session,) = await attached.until("session")
            assert session.data["attached"] is True and session.data["run_id"] == run_id
            cancelled = await client.post(
                f"{stranger.url}/api/chat/cancel", params={"session_id": sid}
            )
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["run_id"] == run_id
            assert (await attached.until("done"))[-1].data["status"] == "cancelled"
        await stream.until("done")
    assert frames[-1].data["status"] == "cancelled"
    async with httpx.AsyncClient(base_url=owner.url) as client:
        gone = await client.post("/api/chat/cancel", params={"session_id": sid})
        assert gone.status_code == 404  # no worker holds a run of it now
    async with httpx.AsyncClient() as client:
        detail = (await client.get(f"{pool[2].url}/api/sessions/{sid}")).json()
    assert detail["active_run_id"] is None


async def test_sigkill_mid_tool_resumes_on_another_worker_and_loses_nothing(
    workers: Workers, tmp_path: Path
) -> None:
    pool = await workers.start(3)
    entered = tmp_path / "entered.log"
    async with (
        httpx.AsyncClient(base_url=pool[0].url, timeout=30) as client,
        client.stream("POST", "/api/chat/stream", json={"message": "tool"}) as r,
    ):
        seen = await Frames(r).until("tool_call", "block")
    await poll(lambda: _lines(entered), "the tool to start")
    sid, run_id = seen[0].data["session_id"], seen[0].data["run_id"]
    runner = next(w for w in pool if str(w.proc.pid) == _lines(entered)[0])
    workers.kill(runner)
    killed_at = time.monotonic()
    # The engine hands the run to a live worker, which resumes it: the cut-off tool starts
    # again (the completed one does not).
    await poll(lambda: len(_lines(entered)) == 2, "the run to resume elsewhere", 30)
    moved_after = time.monotonic() - killed_at
    assert moved_after < 15
    resumed_by = _lines(entered)[1]
    assert resumed_by != str(runner.proc.pid)
    (tmp_path / "release").touch()

    # The client re-attaches through a worker it was not talking to, from its last id.
    other = _other(workers, pool[0], runner)
    last_id = seen[-1].id
    assert last_id is not None
    after: list[Frame] = []
    async with (
        httpx.AsyncClient(base_url=other.url, timeout=30) as client,
        client.stream(
            "GET",
            "/api/chat/stream",
            params={"session_id": sid},
            headers={"Last-Event-ID": last_id},
        ) as r,
    ):
        assert r.status_code == 200, await r.aread()
        await _until_done(r, after)
    assert after[0].data["run_id"] == run_id
    ids = [int(f.id or "") for f in seen[1:] + after[1:]]
    assert ids == list(range(1, len(ids) + 1))  # every event once, across the kill
    assert after[-1].data["status"] == "completed"
    assert after[-1].data["output"] == "finished block"
    assert _lines(tmp_path / "note.log") == [str(runner.proc.pid)]  # it never ran again
    results = [f.data["output"] for f in seen + after if f.event == "tool_result"]
    assert results == ["noted", "released"]

    async with httpx.AsyncClient(base_url=other.url, timeout=30) as client:
        detail = (await client.get(f"/api/sessions/{sid}")).json()
        assert detail["active_run_id"] is None
        kinds = [e["type"] for e in detail["entries"]]
        assert kinds == ["input", "tool_call", "tool_result", "tool_call", "tool_result"] + [
            "assistant_text"
        ]  # the run is in the session once
        runs = (await client.get("/api/runs/history", params={"session_id": sid})).json()
        records = [r for r in _runs(runs) if r["run_id"] == run_id]
        assert [r["status"] for r in records] == ["completed"]


def _runs(body: Any) -> list[dict[str, Any]]:
    return list(body["runs"] if isinstance(body, dict) else body)


async def test_a_schedule_due_while_a_worker_is_down_fires_once(workers: Workers) -> None:
    pool = await workers.start(3)
    workers.kill(pool[2])
    async with httpx.AsyncClient(base_url=pool[0].url, timeout=30) as client:
        created = await client.post(
            "/api/schedules",
            json={
                "instruction": "quick check",
                "trigger_kind": "at",
                "trigger_expr": str(time.time() + 1.0),
            },
        )
        assert created.status_code == 201, created.text
        schedule_id = created.json()["id"]

        async def finished() -> dict[str, Any] | None:
            info = (await client.get(f"/api/schedules/{schedule_id}")).json()
            runs = (await client.get(f"/api/schedules/{schedule_id}/runs")).json()["runs"]
            done = info["status"] == "finished" and runs and runs[0]["status"] == "completed"
            return {"info": info, "runs": runs} if done else None

        state = await poll(finished, "the schedule to fire and its run to end", 30)
    assert state["info"]["fires"] == 1
    assert len(state["runs"]) == 1


async def test_a_worker_stopped_gracefully_hands_its_run_to_another(
    workers: Workers, tmp_path: Path
) -> None:
    pool = await workers.start(2)
    entered = tmp_path / "entered.log"
    async with (
        httpx.AsyncClient(base_url=pool[0].url, timeout=30) as client,
        client.stream("POST", "/api/chat/stream", json={"message": "tool"}) as r,
    ):
        seen = await Frames(r).until("tool_call", "block")
    await poll(lambda: _lines(entered), "the tool to start")
    sid = seen[0].data["session_id"]
    runner = next(w for w in pool if str(w.proc.pid) == _lines(entered)[0])
    runner.proc.terminate()  # SIGTERM: the run is interrupted and handed back
    assert runner.proc.wait(30) is not None
    await poll(lambda: len(_lines(entered)) == 2, "the run to resume elsewhere", 30)
    (tmp_path / "release").touch()
    survivor = _other(workers, runner)
    async with (
        httpx.AsyncClient(base_url=survivor.url, timeout=30) as client,
        client.stream(
            "GET", "/api/chat/stream", params={"session_id": sid}, headers={"Last-Event-ID": "0"}
        ) as r,
    ):
        frames = await Frames(r).until("done")
    assert frames[-1].data["status"] == "completed"
    ids = [int(f.id or "") for f in frames[1:]]
    assert ids == list(range(1, len(ids) + 1))
    assert len(_lines(tmp_path / "note.log")) == 1


async def test_a_worker_dead_between_claim_and_publish_leaves_no_hanging_run(
    workers: Workers, tmp_path: Path
) -> None:
    pool = await workers.start(2)
    sid = f"claimed-{uuid.uuid4().hex[:8]}"
    body = {"message": "quick die-before-publish", "session_id": sid}
    async with httpx.AsyncClient(base_url=pool[0].url, timeout=30) as client:
        with pytest.raises(httpx.TransportError):  # the worker died with the request
            await client.post("/api/chat/stream", json=body)
    assert pool[0].proc.wait(10) == 17  # the fault hook, after the claim
    # The client re-attaches through the other worker: the run nobody published is
    # published again, runs there, and streams back.
    async with (
        httpx.AsyncClient(base_url=pool[1].url, timeout=30) as client,
        client.stream("POST", "/api/chat/reconnect", params={"session_id": sid}) as r,
    ):
        assert r.status_code == 200, await r.aread()
        frames = await Frames(r).until("done")
    assert frames[1].event == "snapshot" and frames[1].data["run_id"] is not None
    assert frames[-1].data["status"] == "completed"
    assert frames[-1].data["output"] == "finished quick"
    ids = [int(f.id or "") for f in frames[2:]]
    assert ids == list(range(1, len(ids) + 1))
    assert _lines(tmp_path / "quick.log") == [str(pool[1].proc.pid)]  # once, there


async def test_deleting_every_chat_through_any_worker_stops_the_runs_of_all(
    workers: Workers,
) -> None:
    await workers.start(2)
    async with httpx.AsyncClient(timeout=30) as client:
        streams = []
        for worker in workers.workers:  # one blocked run per worker, wherever it runs
            async with client.stream(
                "POST", f"{worker.url}/api/chat/stream", json={"message": "tool"}
            ) as r:
                frames = await Frames(r).until("session")
            streams.append(frames[0].data["session_id"])
        owners = [await workers.owner(sid) for sid in streams]
        receiver = _other(workers, owners[0])  # at least one run lives elsewhere
        deleted = await client.delete(f"{receiver.url}/api/sessions")
        assert deleted.status_code == 200, deleted.text
        assert set(streams) <= set(deleted.json()["deleted"])
        for owner in owners:  # the runs were stopped (each had ended when it answered)

            async def idle(owner: Worker = owner) -> bool:
                live = (await client.get(f"{owner.url}/test/live")).json()
                return bool(live["sessions"] == [])

            await poll(idle, "the runs to be gone", 5)
        for sid in streams:
            for worker in workers.workers:
                gone = await client.get(f"{worker.url}/api/sessions/{sid}")
                assert gone.status_code == 404
