"""``inject`` / ``uninject``: queue a message into the live run, or take it back."""

from __future__ import annotations

from typing import Any

from lovia.testing import call, text

from ..conftest import Gate, scripted_agent


async def test_uninject_withdraws_a_queued_message_before_the_run_takes_it(
    make_app: Any, asgi_client: Any
) -> None:
    gate = Gate()
    agent = scripted_agent(call("wait_gate"), text("done"), tools=[gate.tool])
    app = make_app(agent)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    started = await supervisor.start("go")
    sid = started.run.session_id
    await gate.entered.wait()
    keep = await client.post("/api/chat/inject", json={"session_id": sid, "message": "keep"})
    drop = await client.post("/api/chat/inject", json={"session_id": sid, "message": "drop"})
    keep_id, drop_id = keep.json()["id"], drop.json()["id"]
    assert keep_id != drop_id
    r = await client.post("/api/chat/uninject", json={"session_id": sid, "id": drop_id})
    assert r.status_code == 200 and r.json() == {"session_id": sid, "id": drop_id}
    r = await client.post("/api/chat/uninject", json={"session_id": sid, "id": drop_id})
    assert r.status_code == 404  # already withdrawn
    r = await client.post("/api/chat/uninject", json={"session_id": sid, "id": 999})
    assert r.status_code == 404 and "no queued message 999" in r.json()["detail"]
    gate.open()
    records = [r async for r in supervisor.follow(started.run.run_id)]
    assert [r.data["content"] for r in records if r.type == "user_injected"] == ["keep"]
    # Drained by the run: too late to withdraw; and no live run any more.
    r = await client.post("/api/chat/uninject", json={"session_id": sid, "id": keep_id})
    assert r.status_code == 404


async def test_inject_refuses_blank_messages_no_live_run_and_unknown_chats(
    make_app: Any, asgi_client: Any
) -> None:
    client = await asgi_client(make_app(scripted_agent(text("hi"))))
    sid = (await client.post("/api/chat", json={"message": "hello"})).json()["session_id"]
    r = await client.post("/api/chat/inject", json={"session_id": sid, "message": "late"})
    assert r.status_code == 409 and "no live run" in r.json()["detail"]
    r = await client.post("/api/chat/inject", json={"session_id": "nobody", "message": "x"})
    assert r.status_code == 404
    r = await client.post("/api/chat/inject", json={"session_id": sid, "message": "\t\n"})
    assert r.status_code == 422 and "message" in r.json()["detail"]
    r = await client.post("/api/chat/uninject", json={"session_id": sid, "id": "one"})
    assert r.status_code == 422 and "id" in r.json()["detail"]
