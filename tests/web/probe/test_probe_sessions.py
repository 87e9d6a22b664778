"""Hostile probes of the sessions API: each test reproduces a defect found by probing."""

from __future__ import annotations

from typing import Any

from lovia.testing import text
from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry

from ..conftest import frames_until_done, resume, scripted_agent
from ..sessions.conftest import seed


def _no_internals(response: Any) -> None:
    body = response.text
    assert "Traceback" not in body and "/work/" not in body and ".py" not in body


async def test_the_detail_of_a_chat_holding_lone_surrogates_is_valid_json(
    make_app: Any, asgi_client: Any
) -> None:
    # A provider's JSON may carry "\ud800" escapes; the transcript keeps them as they came.
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    entries = [
        InputEntry("user", "hi \udc80"),
        ToolCallEntry("c1", "dump", '{"x": "\ud800"}'),
        ToolResultEntry("c1", "bytes \udcff\ud83d"),
        AssistantTextEntry("ok \ud800 and a pair \ud83d\ude00"),
    ]
    await seed(app.state.lovia.store, "sur", entries)
    r = await client.get("/api/sessions/sur")
    _no_internals(r)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["entries"][3]["content"] == "ok \ufffd and a pair 😀"
    assert body["entries"][0]["content"] == "hi \ufffd"


async def test_a_title_of_only_nul_is_422_not_an_empty_title(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "t1", [InputEntry("user", "hi")], title="kept")
    r = await client.patch(
        "/api/sessions/t1",
        content=b'{"title": "\\u0000\\u0000"}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert "title" in r.json()["detail"]
    assert (await client.get("/api/sessions/t1")).json()["title"] == "kept"


async def test_a_lone_surrogate_in_a_model_delta_does_not_cut_the_stream(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent(text("ok \ud800 then \ud83d\ude00 done")))
    client = await asgi_client(app)
    async with client.stream("POST", "/api/chat/stream", json={"message": "hi"}) as r:
        frames = await frames_until_done(r)
    assert frames[-1].event == "done" and frames[-1].data["status"] == "completed"
    said = "".join(f.data["delta"] for f in frames if f.event == "text_delta")
    assert "\ufffd" in said and said.endswith("done")
    sid = frames[0].data["session_id"]
    replay = await resume(client, sid)  # the logged records replay just as well
    assert replay[-1].event == "done"


async def test_followups_holding_a_lone_surrogate_are_cleaned_not_a_500(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent(), followups=lambda request: ["shoes \udc80?", "rain?"])
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "f1", [InputEntry("user", "hi"), AssistantTextEntry("yo")])
    r = await client.post("/api/sessions/f1/followups")
    _no_internals(r)
    assert r.status_code == 200, r.text
    assert r.json() == {"suggestions": ["shoes \ufffd?", "rain?"]}


async def test_a_first_message_of_control_characters_does_not_leave_an_empty_title(
    make_app: Any, asgi_client: Any
) -> None:
    app = make_app(scripted_agent(text("ok")))
    client = await asgi_client(app)
    body = b'{"message": "\\u0000\\u0000\\u0007", "session_id": "nul"}'
    headers = {"content-type": "application/json"}
    async with client.stream("POST", "/api/chat/stream", content=body, headers=headers) as r:
        assert r.status_code == 200
        await frames_until_done(r)
    title = (await client.get("/api/sessions/nul")).json()["title"]
    assert title.strip() and "\x00" not in title and "\x07" not in title


async def test_pinned_of_the_wrong_type_is_422_naming_it(make_app: Any, asgi_client: Any) -> None:
    app = make_app(scripted_agent())
    client = await asgi_client(app)
    await seed(app.state.lovia.store, "p1", [InputEntry("user", "hi")])
    for wrong in ("yes", 1, "true", 0.0):
        r = await client.patch("/api/sessions/p1", json={"pinned": wrong})
        assert r.status_code == 422, (wrong, r.text)
        assert "pinned" in r.json()["detail"]
    assert (await client.get("/api/sessions/p1")).json()["pinned"] is False
