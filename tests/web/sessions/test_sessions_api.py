"""The sessions API in-process: delete-all, rewind, export, todos, tool images, follow-ups,
and the compaction notice in the session detail."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from lovia.parts import ImagePart, TextPart
from lovia.testing import text
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
)
from lovia.web import ChatStore, SQLiteChatStore
from lovia.web.followups import FollowupRequest

from ..conftest import gated_agent, read_frames, scripted_agent
from .conftest import seed

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def _no_internals(response: Any) -> None:
    body = response.text
    assert "Traceback" not in body and "/work/" not in body and ".py" not in body


THREE_TURNS: list[list[Any]] = [
    [InputEntry("user", "first"), AssistantTextEntry("one")],
    [
        InputEntry("user", "second"),
        ToolCallEntry("c1", "lookup", "{}"),
        ToolResultEntry("c1", "found"),
        AssistantTextEntry("two"),
    ],
    [InputEntry("user", "third"), AssistantTextEntry("three")],
]


async def test_delete_all_stops_live_runs_and_removes_every_chat(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("never"))
    app = make_app(agent)
    client = await asgi_client(app)
    store: ChatStore = app.state.lovia.store
    supervisor = app.state.lovia.supervisor
    await seed(store, "idle", THREE_TURNS[0])
    live = await supervisor.start("park here")
    await gate.entered.wait()
    r = await client.delete("/api/sessions")
    assert r.status_code == 200
    assert sorted(r.json()["deleted"]) == sorted(["idle", live.run.session_id])
    assert supervisor.live(live.run.session_id) is None
    assert (await client.get("/api/sessions")).json()["sessions"] == []
    assert await store.session.load("idle") == []
    assert await store.session.load(live.run.session_id) == []
    r = await client.delete("/api/sessions")  # nothing left: still fine
    assert r.status_code == 200 and r.json() == {"deleted": []}


async def test_rewind_drops_a_user_turn_and_everything_after_it(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent(text("again")))
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "s1", *THREE_TURNS)
    r = await client.post("/api/sessions/s1/rewind", json={"user_turn": 1})
    assert r.status_code == 200, r.text
    assert r.json() == {"session_id": "s1", "user_turn": 1, "removed": 6, "message": "second"}
    entries = (await client.get("/api/sessions/s1")).json()["entries"]
    assert [e.get("content") for e in entries] == ["first", "one"]
    # Edit and resend: the chat continues from the cut.
    async with client.stream(
        "POST", "/api/chat/stream", json={"message": "second, edited", "session_id": "s1"}
    ) as stream:
        frames = [f async for f in read_frames(stream)]
    assert frames[-1].event == "done"
    entries = (await client.get("/api/sessions/s1")).json()["entries"]
    assert [e.get("content") for e in entries] == ["first", "one", "second, edited", "again"]
    r = await client.post("/api/sessions/s1/rewind", json={"user_turn": 0})
    assert r.status_code == 200 and r.json()["removed"] == 4
    assert (await client.get("/api/sessions/s1")).json()["entries"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"user_turn": 3}, "user_turn"),
        ({"user_turn": -1}, "user_turn"),
        ({"user_turn": "one"}, "user_turn"),
        ({"user_turn": 10**12}, "user_turn"),
        ({"user_turn": True}, "user_turn"),
        ({"user_turn": "0"}, "user_turn"),
        ({"user_turn": 0.0}, "user_turn"),
        ({}, "user_turn"),
        ({"user_turn": 0, "keep": 1}, "keep"),
    ],
)
async def test_a_bad_rewind_is_422_naming_the_field(
    make_app: Any, asgi_client: Any, body: dict[str, Any], field: str
) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "s1", *THREE_TURNS)
    r = await client.post("/api/sessions/s1/rewind", json=body)
    assert r.status_code == 422 and field in r.json()["detail"], r.text
    _no_internals(r)
    assert len(await app.state.lovia.store.session.load("s1")) == 8  # untouched


async def test_rewind_is_409_while_a_run_is_live_and_404_for_an_unknown_chat(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("done"))
    app = make_app(agent)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    started = await supervisor.start("park")
    await gate.entered.wait()
    sid = started.run.session_id
    r = await client.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 0})
    assert r.status_code == 409 and r.json()["hint"]
    gate.open()
    [r async for r in supervisor.follow(started.run.run_id)]
    r = await client.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 0})
    assert r.status_code == 200 and r.json()["message"] == "park"
    r = await client.post("/api/sessions/nope/rewind", json={"user_turn": 0})
    assert r.status_code == 404


async def test_rewind_waits_out_a_cancelled_run_that_is_winding_down(
    make_app: Any, asgi_client: Any
) -> None:
    gate, agent = gated_agent(text("done"))
    app = make_app(agent)
    client = await asgi_client(app)
    supervisor = app.state.lovia.supervisor
    await seed(app.state.lovia.store, "s1", THREE_TURNS[0])
    started = await supervisor.start("park", session_id="s1")
    await gate.entered.wait()
    supervisor.cancel("s1")  # stopping, not yet gone
    assert supervisor.live("s1") is not None
    r = await client.post(f"/api/sessions/{started.run.session_id}/rewind", json={"user_turn": 0})
    assert r.status_code == 200, r.text


async def test_rewind_forgets_a_stale_interrupted_run(make_app: Any, asgi_client: Any) -> None:
    gate, agent = gated_agent(text("resumed"))
    app = make_app(agent)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    started = await app.state.lovia.supervisor.start("park")
    await gate.entered.wait()
    sid, run_id = started.run.session_id, started.run.run_id
    await lifespan.__aexit__(None, None, None)  # shutdown: pointer and checkpoint kept
    restarted = make_app(scripted_agent(text("fresh")))
    client = await asgi_client(restarted)
    store: ChatStore = restarted.state.lovia.store
    assert (await store.get_session(sid)).active_run_id == run_id  # type: ignore[union-attr]
    assert await store.checkpointer.load(run_id) is not None
    await seed(store, sid, [InputEntry("user", "earlier"), AssistantTextEntry("ok")])
    r = await client.post(f"/api/sessions/{sid}/rewind", json={"user_turn": 0})
    assert r.status_code == 200, r.text
    assert (await store.get_session(sid)).active_run_id is None  # type: ignore[union-attr]
    assert await store.checkpointer.load(run_id) is None
    assert await restarted.state.lovia.supervisor.resume(sid) is None  # nothing to resume


class NoRewindStore(SQLiteChatStore):
    """A store that cannot truncate a transcript."""

    @property
    def supports_rewind(self) -> bool:
        return False


async def test_rewind_is_501_when_the_store_cannot(
    make_app: Any, asgi_client: Any, tmp_path: Any
) -> None:
    store = NoRewindStore(str(tmp_path / "norewind.db"))
    app = make_app(scripted_agent(), store=store)
    client = await asgi_client(app)
    await seed(store, "s1", *THREE_TURNS)
    r = await client.post("/api/sessions/s1/rewind", json={"user_turn": 0})
    assert r.status_code == 501 and r.json()["hint"]
    assert len(await store.session.load("s1")) == 8


async def test_export_in_three_formats_with_a_download_name(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    entries = [InputEntry("user", "hi"), ReasoningEntry("hmm"), *THREE_TURNS[1]]
    await seed(app.state.lovia.store, "s1", entries, title="Résumé: “plans”")
    r = await client.get("/api/sessions/s1/export")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"Resume-plans.md\"; filename*=UTF-8''R%C3%A9sum%C3%A9-plans.md"
    )
    assert "> hmm" in r.text and "**Tool result** from `lookup`:" in r.text
    r = await client.get("/api/sessions/s1/export", params={"format": "json"})
    assert r.headers["content-type"] == "application/json"
    assert set(r.json()) == {"session", "entries"} and len(r.json()["entries"]) == 6
    r = await client.get("/api/sessions/s1/export", params={"format": "txt"})
    assert r.headers["content-type"].startswith("text/plain") and "[tool result: lookup]" in r.text
    r = await client.get("/api/sessions/s1/export", params={"format": "pdf"})
    assert r.status_code == 422 and "format" in r.json()["detail"]
    assert (await client.get("/api/sessions/nope/export")).status_code == 404


async def test_export_of_a_huge_binary_ish_unicode_chat(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    junk = "".join(chr(c) for c in range(1, 0x800)) * 10
    entries = [
        InputEntry("user", "dump it \x00 🦊"),
        ToolCallEntry("c1", "dump", "{}"),
        ToolResultEntry("c1", junk + "y" * 3_000_000),
    ]
    await seed(app.state.lovia.store, "big", entries, title="\x00\n💥")
    for fmt in ("md", "json", "txt"):
        r = await client.get("/api/sessions/big/export", params={"format": fmt})
        assert r.status_code == 200 and len(r.content) > 3_000_000
        r.content.decode("utf-8")
        assert "\r" not in r.headers["content-disposition"]


async def test_todos_are_rebuilt_from_the_transcript(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    todos = {
        "todos": [
            {"content": "Write tests", "status": "completed"},
            {"content": "Ship", "status": "in_progress", "active_form": "Shipping"},
        ]
    }
    await seed(
        app.state.lovia.store,
        "s1",
        [
            InputEntry("user", "plan"),
            ToolCallEntry("t1", "todo_write", json.dumps(todos)),
            ToolResultEntry("t1", "ok"),
            ToolCallEntry("t2", "todo_write", "{broken"),
            ToolResultEntry("t2", "bad", is_error=True),
        ],
    )
    await seed(app.state.lovia.store, "empty", [InputEntry("user", "hi")])
    r = await client.get("/api/sessions/s1/todos")
    assert r.json() == {
        "todos": [
            {"content": "Write tests", "status": "completed", "active_form": ""},
            {"content": "Ship", "status": "in_progress", "active_form": "Shipping"},
        ]
    }
    assert (await client.get("/api/sessions/empty/todos")).json() == {"todos": []}
    assert (await client.get("/api/sessions/nope/todos")).status_code == 404


async def test_tool_result_images_are_served_and_linked_from_the_detail(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    b64 = base64.b64encode(PNG).decode()
    await seed(
        app.state.lovia.store,
        "s1",
        [
            InputEntry("user", "screenshot"),
            ToolCallEntry("c1", "shot", "{}"),
            ToolResultEntry(
                "c1",
                "two images",
                parts=(
                    TextPart("caption"),
                    ImagePart(data=b64, mime_type="image/png"),
                    ImagePart(url="https://example.com/x.png"),
                    ImagePart(data=base64.b64encode(b"<svg/>").decode(), mime_type="image/svg+xml"),
                ),
            ),
            ToolCallEntry("c2", "plain", "{}"),
            ToolResultEntry("c2", "no images"),
        ],
    )
    r = await client.get("/api/sessions/s1/tool-images/c1/0")
    assert r.status_code == 200 and r.content == PNG
    assert r.headers["content-type"] == "image/png" and r.headers["x-content-type-options"]
    r = await client.get("/api/sessions/s1/tool-images/c1/2")  # SVG: download only
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"].startswith("attachment")
    for url in (
        "/api/sessions/s1/tool-images/c1/1",  # a URL image has no stored bytes
        "/api/sessions/s1/tool-images/c1/3",
        "/api/sessions/s1/tool-images/c2/0",
        "/api/sessions/s1/tool-images/nope/0",
        "/api/sessions/nope/tool-images/c1/0",
    ):
        assert (await client.get(url)).status_code == 404, url
    r = await client.get("/api/sessions/s1/tool-images/c1/-1")
    assert r.status_code == 422
    entries = (await client.get("/api/sessions/s1")).json()["entries"]
    parts = entries[2]["parts"]
    assert parts[1] == {
        "type": "image",
        "url": "/api/sessions/s1/tool-images/c1/0",
        "mime_type": "image/png",
    }
    assert parts[2] == {"type": "image", "url": "https://example.com/x.png"}
    assert parts[3]["url"].endswith("/c1/2") and "data" not in json.dumps(parts)
    assert "parts" not in entries[4]  # a plain result has no image stubs


async def test_the_detail_replays_the_newest_compaction_notice(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    notice = {"reason": "window", "reactive": False, "summary": "earlier talk", "detail": []}
    store = app.state.lovia.store
    await seed(store, "s1", THREE_TURNS[0], meta={"notices": [{"reason": "old"}, notice]})
    await seed(store, "plain", THREE_TURNS[0])
    assert (await client.get("/api/sessions/s1")).json()["compaction"] == notice
    assert (await client.get("/api/sessions/plain")).json()["compaction"] is None


async def test_followups_are_off_by_default(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "s1", *THREE_TURNS)
    r = await client.post("/api/sessions/s1/followups")
    assert r.status_code == 404 and "off" in r.json()["detail"]


async def test_followups_with_a_custom_suggester(make_app: Any, asgi_client: Any) -> None:
    seen: list[FollowupRequest] = []

    def suggest(request: FollowupRequest) -> list[str]:
        seen.append(request)
        if request.session_id == "bad":
            raise RuntimeError("down")
        return ["1. Why three?", "2. And four?", "3. Five?", "4. Six?"]

    app = make_app(scripted_agent(), followups=suggest)
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "s1", *THREE_TURNS)
    await seed(app.state.lovia.store, "bad", *THREE_TURNS)
    r = await client.post("/api/sessions/s1/followups")
    assert r.json() == {"suggestions": ["Why three?", "And four?", "Five?"]}
    assert [m.content for m in seen[0].messages] == ["third", "three"]
    r = await client.post("/api/sessions/bad/followups")
    assert r.status_code == 200 and r.json() == {"suggestions": []}
    assert (await client.post("/api/sessions/nope/followups")).status_code == 404


async def test_followups_through_the_model(make_app: Any, asgi_client: Any) -> None:
    from lovia.testing import ScriptedProvider

    model = ScriptedProvider([text("- What next?\n- Anything else?")])
    app = make_app(scripted_agent(), followups=True, followup_model=model)
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "s1", *THREE_TURNS)
    r = await client.post("/api/sessions/s1/followups")
    assert r.json() == {"suggestions": ["What next?", "Anything else?"]}


async def test_absurd_paging_is_422_not_500(make_app: Any, asgi_client: Any) -> None:
    client = await asgi_client(make_app(scripted_agent()))
    r = await client.get("/api/sessions", params={"offset": "9" * 30})
    assert r.status_code == 422 and "offset" in r.json()["detail"]
    r = await client.get("/api/sessions", params={"offset": 10**9})
    assert r.status_code == 200 and r.json()["sessions"] == []
