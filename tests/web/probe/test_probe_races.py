"""Races between a destructive sessions call (rewind, delete) and a new message.

The seam: the store's transcript ``load`` (or the chat delete) is held open on an event, so a
new message arrives exactly while the destructive call is between its checks and its write.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lovia.testing import text
from lovia.transcript import AssistantTextEntry, InputEntry
from lovia.web.errors import RunConflict

from ..conftest import gated_agent
from ..sessions.conftest import seed


def _hold(obj: Any, name: str) -> tuple[asyncio.Event, asyncio.Event]:
    """Make ``obj.name`` (a coroutine method) wait on ``release`` once it is ``entered``."""
    entered, release = asyncio.Event(), asyncio.Event()
    real = getattr(obj, name)

    async def held(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            await release.wait()
        return await real(*args, **kwargs)

    setattr(obj, name, held)
    return entered, release


async def test_a_message_racing_a_rewind_never_runs_on_the_history_being_cut(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("after"))
    app = make_app(agent)
    client = await asgi_client(app)
    store, supervisor = app.state.lovia.store, app.state.lovia.supervisor
    await seed(store, "r1", [InputEntry("user", "first"), AssistantTextEntry("one")])
    entered, release = _hold(store, "rewind_session")
    rewind = asyncio.create_task(client.post("/api/sessions/r1/rewind", json={"user_turn": 0}))
    await entered.wait()  # the rewind passed its checks and is about to cut
    try:
        await supervisor.start("racing", session_id="r1")
    except RunConflict:
        pass  # refused: fine
    if supervisor.live("r1") is not None:
        release.set()
        r = await rewind
        # Either the rewind refuses (the run is live) or the message is refused; never both
        # a cut history and a run that read the uncut one.
        assert r.status_code == 409, r.text
    gate.open()
    release.set()
    await rewind


async def test_a_message_racing_a_delete_does_not_leave_an_orphan_chat(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("after"))
    app = make_app(agent)
    client = await asgi_client(app)
    store, supervisor = app.state.lovia.store, app.state.lovia.supervisor
    await seed(store, "d1", [InputEntry("user", "first"), AssistantTextEntry("one")])
    entered, release = _hold(store, "delete_session")
    delete = asyncio.create_task(client.delete("/api/sessions/d1"))
    await entered.wait()  # the delete stopped the (absent) run and is about to delete
    try:
        await supervisor.start("racing", session_id="d1")
    except RunConflict:
        pass  # refused: fine
    release.set()
    assert (await delete).status_code == 204
    gate.open()
    for run in supervisor.live_runs():
        await asyncio.wait({run.task})
    # Whatever the racing message got, the chat is gone and nothing of it lingers.
    assert await store.get_session("d1") is None
    assert await store.session.load("d1") == []
    assert await store.list_runs(session_id="d1") == []


async def test_a_message_racing_a_delete_all_does_not_leave_an_orphan_transcript(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("after"))
    app = make_app(agent)
    client = await asgi_client(app)
    store, supervisor = app.state.lovia.store, app.state.lovia.supervisor
    await seed(store, "a1", [InputEntry("user", "first"), AssistantTextEntry("one")])
    entered, release = _hold(store, "delete_all_sessions")
    delete = asyncio.create_task(client.delete("/api/sessions"))
    await entered.wait()
    try:
        await supervisor.start("racing", session_id="a1")
    except RunConflict:
        pass
    gate.open()
    release.set()
    r = await delete
    for run in supervisor.live_runs():
        await asyncio.wait({run.task})
    if r.status_code == 200:
        assert await store.get_session("a1") is None
        assert await store.session.load("a1") == []
        assert await store.list_runs(session_id="a1") == []
    else:
        assert r.status_code == 409, r.text


async def test_a_delete_all_racing_a_rewind_leaves_nothing_and_no_500(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("after"))
    app = make_app(agent)
    client = await asgi_client(app)
    store = app.state.lovia.store
    await seed(
        store,
        "w1",
        [InputEntry("user", "first"), AssistantTextEntry("one")],
        [InputEntry("user", "second"), AssistantTextEntry("two")],
    )
    entered, release = _hold(store, "rewind_session")
    rewind = asyncio.create_task(client.post("/api/sessions/w1/rewind", json={"user_turn": 1}))
    await entered.wait()
    r = await client.delete("/api/sessions")
    assert r.status_code in (200, 409), r.text
    release.set()
    rewound = await rewind
    assert rewound.status_code in (200, 404), rewound.text
    if r.status_code == 200:
        assert await store.get_session("w1") is None
        assert await store.session.load("w1") == []
