"""``GET /api/sessions/{id}/tasks``: a chat's own task sessions with the status of each
one's latest run, and ``parent_id`` in the session list (which the UI's sidebar uses to
leave task sessions out)."""

from __future__ import annotations

from typing import Any

from lovia.web.store.base import RunRecord

from ..conftest import scripted_agent


async def test_a_chats_tasks_with_their_latest_run_status(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    store = app.state.lovia.store
    await store.create_session("lead", agent="helper", title="the chat")
    children = {
        "t-done": ("completed", None),
        "t-failed": ("failed", "the model erred"),
        "t-cancelled": ("cancelled", None),
        "t-running": ("running", None),
        "t-new": (None, None),
    }
    for n, (sid, (status, error)) in enumerate(children.items()):
        await store.create_session(sid, agent="worker", title=f"sa_{n + 1}: job", parent_id="lead")
        if status is None:
            continue
        # An older run first: only the latest one decides.
        await store.record_run_started(
            RunRecord(f"{sid}-0", sid, "worker", "subagent", started_at=1000.0)
        )
        await store.record_run_finished(f"{sid}-0", status="completed", ended_at=1001.0)
        await store.record_run_started(
            RunRecord(f"{sid}-1", sid, "worker", "subagent", started_at=2000.0)
        )
        if status != "running":
            await store.record_run_finished(f"{sid}-1", status=status, error=error)
    await store.create_session("t-grand", agent="worker", title="sa_1: deeper", parent_id="t-done")

    r = await client.get("/api/sessions/lead/tasks")
    assert r.status_code == 200, r.text
    tasks = r.json()["tasks"]
    assert [(t["id"], t["status"], t["error"]) for t in tasks] == [
        ("t-done", "done", None),
        ("t-failed", "failed", "the model erred"),
        ("t-cancelled", "cancelled", None),
        ("t-running", "running", None),
        ("t-new", "pending", None),
    ]  # a grandchild is listed under its own parent, not here
    assert tasks[0]["title"] == "sa_1: job" and tasks[0]["agent"] == "worker"
    grand = (await client.get("/api/sessions/t-done/tasks")).json()["tasks"]
    assert [t["id"] for t in grand] == ["t-grand"]
    assert (await client.get("/api/sessions/t-new/tasks")).json() == {"tasks": []}
    assert (await client.get("/api/sessions/nope/tasks")).status_code == 404

    listed = (await client.get("/api/sessions?limit=50")).json()["sessions"]
    parents = {s["id"]: s["parent_id"] for s in listed}
    assert parents["lead"] is None and parents["t-done"] == "lead"
    assert parents["t-grand"] == "t-done"


async def test_the_session_list_can_leave_task_sessions_out(
    make_app: Any, asgi_client: Any
) -> None:
    # The sidebar reads one page of the newest chats and hid the task sessions in it: a chat
    # that spawned a page's worth of tasks pushed every one of the user's own chats out of
    # that page, and the sidebar showed nothing. The server leaves them out before paging.
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    store = app.state.lovia.store
    await store.create_session("mine", agent="helper", title="my older chat")
    await store.create_session("lead", agent="helper", title="the busy chat")
    for n in range(5):
        await store.create_session(f"t-{n}", agent="worker", title=f"sa_{n}: job", parent_id="lead")

    page = (await client.get("/api/sessions?limit=2&tasks=false")).json()["sessions"]
    assert [s["id"] for s in page] == ["lead", "mine"]
    found = (await client.get("/api/sessions?limit=2&tasks=false&q=job")).json()["sessions"]
    assert found == []  # a search leaves them out too
    everything = (await client.get("/api/sessions?limit=200")).json()["sessions"]
    assert len(everything) == 7  # without the flag the list still has them all
