"""``GET /api/sessions/{id}/turns/{n}/context``: the context inspector answers from what the
recorder logged of each model call (``lovia.web.recorder``), and estimates only for runs
recorded before it existed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.context import ClearToolResults, Compaction
from lovia.messages import Usage
from lovia.plugins import Todo
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import entry_to_dict
from lovia.web import create_app
from lovia.web.inspector import turn_context
from lovia.web.recorder import PRIVATE_RECORDS
from lovia.workspace import PathRule, Workspace, WorkspacePolicy

from tests.web.conftest import deploy, frames_until_done

BIG = "x" * 2400  # ~600 estimated tokens: three of them overflow the small window below


def _usage(turn: int) -> Usage:
    return Usage(input_tokens=1000 + turn, output_tokens=10 + turn, cache_read_tokens=turn * 100)


SCRIPT = [
    call("todo_write", {"todos": [{"content": "read the notes", "status": "in_progress"}]},
         call_id="t1", usage=_usage(1)),
    call("read_file", {"path": "notes1.txt"}, call_id="r1", usage=_usage(2)),
    call("read_file", {"path": "private/key.txt"}, call_id="r2", usage=_usage(3)),
    call("shell", {"command": "ls"}, call_id="s1", usage=_usage(4)),
    call("read_file", {"path": "notes2.txt"}, call_id="r3", usage=_usage(5)),
    call("read_file", {"path": "notes3.txt"}, call_id="r4", usage=_usage(6)),
    text("done", usage=_usage(7)),
]  # fmt: skip


async def _chat(client: Any, message: str, session_id: str | None = None) -> str:
    body: dict[str, Any] = {"message": message}
    if session_id is not None:
        body["session_id"] = session_id
    async with client.stream("POST", "/api/chat/stream", json=body) as r:
        frames = await frames_until_done(r)
    # The recorder's records reach a chat client as empty frames only (ids stay contiguous).
    private = [f for f in frames if f.event == "context"]
    assert private and all(f.data == {} for f in private)
    assert not any(f.event in PRIVATE_RECORDS for f in frames)
    return str(frames[0].data["session_id"])


@pytest.fixture
async def recorded(tmp_path: Path, asgi_client: Any) -> tuple[Any, Any, ScriptedProvider, str]:
    root = tmp_path / "ws"
    (root / "private").mkdir(parents=True)
    for i in (1, 2, 3):
        (root / f"notes{i}.txt").write_text(f"{i}{BIG}")
    (root / "private" / "key.txt").write_text("k")
    model = ScriptedProvider(SCRIPT)
    agent = Agent(
        name="helper",
        instructions="You are terse.",
        model=model,
        plugins=[Todo()],
        workspace=Workspace.local(
            root, policy=WorkspacePolicy.coding(path_rules=(PathRule("private", "deny"),))
        ),
        context_policy=Compaction(
            context_window=3300,
            compact_to=0.75,
            keep_recent_tokens=200,
            stages=[ClearToolResults()],
        ),
    )
    app = create_app(agent, db_path=tmp_path / "c.db", approval_timeout=0.05, generate_titles=False)
    client = await asgi_client(app)
    session = await _chat(client, "read my notes")
    return app, client, model, session


def _view_as_sent(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v["entry"] for v in view]


async def test_every_turn_shows_the_exact_view_sent(recorded: Any) -> None:
    _, client, model, session = recorded
    views = model.views
    assert len(views) == 7
    for turn, sent in enumerate(views, start=1):
        r = await client.get(f"/api/sessions/{session}/turns/{turn}/context")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["source"] == "recorded"
        assert _view_as_sent(body["view"]) == [entry_to_dict(e) for e in sent], turn
        assert body["call_usage"] == {
            "input_tokens": 1000 + turn,
            "output_tokens": 10 + turn,
            "cache_read_tokens": turn * 100,
            "cache_write_tokens": 0,
            "scope": "call",
        }
        assert body["model"] == "scripted:scripted-model"
        assert body["attempts"] == 1
        assert body["missing"] == []


async def test_parts_reminders_and_the_system_head(recorded: Any) -> None:
    _, client, model, session = recorded
    body = (await client.get(f"/api/sessions/{session}/turns/2/context")).json()
    sources = [v["source"] for v in body["view"]]
    assert sources[0] == "system"
    assert body["view"][0]["entry"]["content"].startswith("You are terse.")
    # The todo list written in turn 1 is reminded at the tail of turn 2's view only.
    assert sources[-1] == "reminder"
    assert "read the notes" in body["view"][-1]["entry"]["content"]
    first = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()
    assert "reminder" not in [v["source"] for v in first["view"]]
    parts = {p["name"]: p for p in body["parts"]}
    assert parts["system"]["entries"] == 1 and parts["system"]["tokens"] > 0
    assert parts["reminders"]["entries"] == 1 and parts["reminders"]["tokens"] > 0
    assert parts["tool_results"]["entries"] == 1  # todo_write's result
    assert parts["tool_schemas"]["tokens"] > 0
    assert body["seen_tokens"] == sum(p["tokens"] for p in body["parts"])
    assert body["window"] == 3300
    # Record entries point at their place in the record; literals are not in it.
    assert [v["index"] for v in body["view"][:-1]] == list(range(len(body["view"]) - 1))
    assert body["view"][-1]["index"] is None


async def test_a_cleared_result_and_its_recall_handle(recorded: Any) -> None:
    _, client, model, session = recorded
    cleared_turns = []
    for turn in range(1, 8):
        body = (await client.get(f"/api/sessions/{session}/turns/{turn}/context")).json()
        if body["cleared"]:
            cleared_turns.append((turn, body))
    assert cleared_turns, "the small window never cleared a result"
    turn, body = cleared_turns[0]
    marker = body["cleared"][0]
    assert marker["kind"] == "cleared"
    assert marker["recall"] == marker["call_id"]  # a cleared result is recalled by call id
    assert marker["original_tokens"] > marker["tokens"]
    shown = next(v for v in body["view"] if v["source"] == "cleared")
    assert shown["recall"] == marker["call_id"]
    assert "recall_tool_result" in shown["entry"]["output"]
    # The same marker is what the provider received in that call.
    sent = model.views[turn - 1]
    assert entry_to_dict(sent[body["view"].index(shown)]) == shown["entry"]
    assert body["compactions"] and body["compactions"][0]["tokens_after"] > 0


async def test_workspace_decisions_with_their_rules(recorded: Any) -> None:
    _, client, _, session = recorded

    async def decisions(turn: int) -> list[tuple[str, str, str, str, str | None]]:
        body = (await client.get(f"/api/sessions/{session}/turns/{turn}/context")).json()
        return [
            (p["subject"], p["op"], p["decision"], p["rule"], p["pattern"])
            for p in body["permissions"]
        ]

    assert await decisions(2) == [("notes1.txt", "read", "allow", "read_inside", None)]
    assert await decisions(3) == [("private/key.txt", "read", "deny", "path_rules", "private")]
    assert ("ls", "run", "ask", "shell_default", None) in await decisions(4)
    body = (await client.get(f"/api/sessions/{session}/turns/4/context")).json()
    assert [(a["call_id"], a["decision"]) for a in body["approvals"]] == [("s1", "denied")]


async def test_storage_grows_with_changes_not_with_the_transcript(
    tmp_path: Path, asgi_client: Any
) -> None:
    """A 60-message chat (60 runs): the bytes logged for a late turn stay those of an early
    one although the transcript it points into is 60 times longer."""
    model = ScriptedProvider([text(f"reply {i} " + "y" * 400) for i in range(60)])
    agent = Agent(name="helper", instructions="Be brief. " * 40, model=model)
    app = create_app(agent, db_path=tmp_path / "c.db", generate_titles=False)
    client = await asgi_client(app)
    session = await _chat(client, "message 0 " + "z" * 400)
    sizes = []
    for i in range(1, 60):
        await _chat(client, f"message {i} " + "z" * 400, session)
        if i in (2, 50):
            body = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()
            sizes.append((body["stored_bytes"], len(body["view"]), body["record_tokens"]))
    (early, early_len, _), (late, late_len, late_tokens) = sizes
    assert late_len > 20 * early_len // 2  # the view really grew: ~100 entries
    assert late <= early + 16  # the record of a call: a range and numbers, not the view
    assert late < late_tokens  # far below the size of what it stands for


async def test_a_run_without_a_recording_is_estimated(recorded: Any) -> None:
    """A run logged before the recorder existed: the record's estimate, and ``missing``."""
    app, _, _, session = recorded
    store = app.state.lovia.store

    class Unrecorded:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        async def read_events(self, run_id: str, after: int = 0) -> list[Any]:
            events = await store.read_events(run_id, after=after)
            return [e for e in events if e.type not in PRIVATE_RECORDS]

    body = await turn_context(Unrecorded(), app.state.lovia.agents, session, 2)  # type: ignore[arg-type]
    assert body.source == "estimated"
    assert body.view == [] and body.call_usage is None
    assert any("cached tokens" in m for m in body.missing)
    parts = {p.name: p for p in body.parts}
    assert parts["reminders"].tokens is None
    assert parts["history"].entries >= 1


BAD_REQUESTS = [
    ("/api/sessions/nope/turns/1/context", 404),
    ("/api/sessions/{s}/turns/9/context", 404),
    ("/api/sessions/{s}/turns/0/context", 422),
    ("/api/sessions/{s}/turns/x/context", 422),
    ("/api/sessions/{s}/turns/1/context?run_id=" + "a" * 32, 404),
    ("/api/sessions/{s}/turns/1/context?run_id=../../x", 422),
    ("/api/sessions/bad%20id/turns/1/context", 422),
]


async def test_bad_requests(tmp_path: Path, asgi_client: Any) -> None:
    agent = Agent(
        name="helper",
        model=ScriptedProvider([call("deploy", {"env": "prod"}, call_id="c1"), text("done")]),
        tools=[deploy],
    )
    app = create_app(agent, db_path=tmp_path / "c.db", approval_timeout=0.05, generate_titles=False)
    client = await asgi_client(app)
    session = await _chat(client, "ship it")
    for path, status in BAD_REQUESTS:
        r = await client.get(path.replace("{s}", session))
        assert r.status_code == status, (path, r.text)
        assert "Traceback" not in r.text
        if status == 404:
            assert r.json()["detail"] and r.json()["hint"], path  # says what to do


async def test_another_sessions_run_is_not_found(tmp_path: Path, asgi_client: Any) -> None:
    agent = Agent(name="helper", model=ScriptedProvider([text("one"), text("two")]))
    client = await asgi_client(create_app(agent, db_path=tmp_path / "c.db", generate_titles=False))
    first = await _chat(client, "a")
    second = await _chat(client, "b")
    theirs = (await client.get(f"/api/sessions/{second}/turns/1/context")).json()["run_id"]
    r = await client.get(f"/api/sessions/{first}/turns/1/context?run_id={theirs}")
    assert r.status_code == 404
    assert "has no run" in r.text


async def test_a_handoff_targets_calls_are_recorded(tmp_path: Path, asgi_client: Any) -> None:
    second = ScriptedProvider([text("from b")], model="model-b")
    target = Agent(name="b", instructions="You are b.", model=second)
    first = ScriptedProvider([call("transfer_to_b", {}, call_id="h1")], model="model-a")
    agent = Agent(name="a", instructions="You are a.", model=first, handoffs=[target])
    app = create_app(agent, db_path=tmp_path / "c.db", generate_titles=False)
    client = await asgi_client(app)
    session = await _chat(client, "go to b")
    body = (await client.get(f"/api/sessions/{session}/turns/2/context")).json()
    assert body["model"] == "scripted:model-b"
    assert _view_as_sent(body["view"]) == [entry_to_dict(e) for e in second.views[0]]
    assert body["view"][0]["entry"]["content"].startswith("You are b.")


def test_ag_ui_drops_the_recorders_records() -> None:
    from lovia.web.encoders.agui import AguiEncoder
    from lovia.web.eventlog import EventRecord

    encoder = AguiEncoder("thread", "run")
    for kind in sorted(PRIVATE_RECORDS):
        assert encoder.events_of(EventRecord("r", 1, kind, {"turn": 1})) == []
    assert encoder.events_of(EventRecord("r", 2, "handoff", {"from": "a", "to": "b"}))


async def test_a_long_run_logs_what_changed_per_turn() -> None:
    """60 turns of 2 KB results under a window that clears them: each call logs what
    changed (its ranges, the markers new in it) while the record grows past 120 KB."""
    from lovia import Runner, tool
    from lovia.web.recorder import record_views

    @tool
    async def fetch(n: int) -> str:
        """A 2 KB page."""
        return f"page {n} " + "w" * 2000

    logged: list[tuple[str, dict[str, Any]]] = []

    async def sink(kind: str, data: dict[str, Any]) -> None:
        logged.append((kind, data))

    script = [call("fetch", {"n": i}) for i in range(59)] + [text("done")]
    agent = Agent(
        name="helper",
        instructions="Read every page.",
        model=ScriptedProvider(script),
        tools=[fetch],
        context_policy=Compaction(context_window=12_000, stages=[ClearToolResults()]),
    )
    result = await Runner.run(record_views(agent, sink), "go", max_turns=61)
    views = [d for kind, d in logged if kind == "context_view"]
    assert len(views) == 60
    record = sum(len(json.dumps(entry_to_dict(e))) for e in result.entries)
    assert record > 120_000
    for data in views:  # a few numbers, plus each marker new in this call, once
        assert len(json.dumps(data)) < 400 + 300 * len(data.get("lits", [])), data
    assert sum(len(d.get("lits", [])) for d in views) > 20  # results were cleared
    assert len(json.dumps(views[49])) < 400  # turn 50: a range and numbers


def test_literals_are_classified_by_lovia_contexts_own_markers() -> None:
    from lovia.context.render import clear_marker, offload_marker, omission_marker, summary_entry
    from lovia.context.state import OffloadRecord
    from lovia.transcript import InputEntry, ToolResultEntry
    from lovia.web.recorder import classify_literal

    result = ToolResultEntry(call_id="c7", output="long output")
    offload = OffloadRecord(preview="long", chars=11, digest="d" * 64)
    assert classify_literal(clear_marker(result), trailing=False) == ("cleared", "c7")
    assert classify_literal(clear_marker(result, recall=False), trailing=False) == (
        "cleared",
        None,
    )
    assert classify_literal(offload_marker(result, offload), trailing=False) == (
        "offloaded",
        "d" * 64,
    )
    assert classify_literal(summary_entry("so far"), trailing=False) == ("summary", None)
    assert classify_literal(omission_marker([result]), trailing=False) == ("omitted", None)
    note = InputEntry("user", "<system-reminder>x</system-reminder>")
    assert classify_literal(note, trailing=True) == ("reminder", None)
    assert classify_literal(note, trailing=False) == ("injected", None)


async def test_a_garbled_recording_is_shown_as_far_as_it_goes(recorded: Any) -> None:
    """A log edited by hand (or cut short) answers with what it can and says what is not
    known, never a 500."""
    from lovia.web.eventlog import EventRecord

    app, _, _, session = recorded
    store = app.state.lovia.store
    garbled = {"turn": 1, "start": True, "n": 10_000, "last": "x", "segs": [[0, 1], 5, "x"]}

    class Garbled:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        async def read_events(self, run_id: str, after: int = 0) -> list[Any]:
            events = await store.read_events(run_id, after=after)
            extra = EventRecord(run_id, events[-1].seq + 1, "context_view", garbled)
            return [*events, extra]

    body = await turn_context(Garbled(), app.state.lovia.agents, session, 1)  # type: ignore[arg-type]
    assert body.source == "recorded"
    assert [v.source for v in body.view] == ["record"]  # head unknown: no system text
    assert body.view[0].entry is None  # the record does not line up with n
    assert any("no longer lines up" in m for m in body.missing)
    assert any("literal 5" in m for m in body.missing)


async def test_a_resumed_run_is_recorded_by_a_fresh_recorder(make_app: Any, serve: Any) -> None:
    """A restart interrupts the run mid-tool; the resumed run (same id, same log) records
    its calls with a new recorder, and both turns still show exactly what was sent."""
    from tests.web.chat.conftest import post_stream
    from tests.web.conftest import chat, gated_agent, until

    gate, agent = gated_agent(text("back again"))
    model = agent.model
    assert isinstance(model, ScriptedProvider)
    first = await serve(make_app(agent))
    async with chat(first.client, "long job") as (session, frames):
        await until(frames, "tool_call")
    await gate.entered.wait()
    await first.stop()
    gate.open()
    second = await serve(make_app(agent))
    sid = session.data["session_id"]
    await post_stream(second.client, "/api/chat/reconnect", params={"session_id": sid})
    for turn in (1, 2):
        r = await second.client.get(f"/api/sessions/{sid}/turns/{turn}/context")
        body = r.json()
        assert body["source"] == "recorded"
        # (this scripted model reports no usage: the only thing not known)
        assert [m.split(" (")[0] for m in body["missing"]] == ["the provider's usage for this call"]
        sent = [entry_to_dict(e) for e in model.views[turn - 1]]
        assert _view_as_sent(body["view"]) == sent, turn


async def test_a_model_string_is_recorded_and_closed_at_the_runs_end(
    tmp_path: Path, asgi_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``model="vendor:model"``: the wrapper builds the provider on first use and closes it
    when the run ends (once), as the runner does for a provider it builds from a string."""
    from lovia.providers import registry

    built: list[Closing] = []

    class Closing(ScriptedProvider):
        closed = 0

        async def aclose(self) -> None:
            self.closed += 1

    def factory(model: str, **_: Any) -> Closing:
        built.append(Closing([text(f"reply {len(built)}")], model=model))
        return built[-1]

    monkeypatch.setitem(registry._registered, "rectest", factory)
    agent = Agent(name="helper", instructions="Be brief.", model="rectest:m1")
    app = create_app(agent, db_path=tmp_path / "c.db", generate_titles=False)
    client = await asgi_client(app)
    session = await _chat(client, "hello")
    body = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()
    assert body["source"] == "recorded" and body["model"] == "scripted:m1"
    assert _view_as_sent(body["view"]) == [entry_to_dict(e) for e in built[0].views[0]]
    await _chat(client, "again", session)  # a new run builds (and closes) its own
    assert [p.closed for p in built] == [1, 1]


async def test_lone_surrogates_in_the_view_are_answered(tmp_path: Path, asgi_client: Any) -> None:
    """A tool's output and a todo (hence the reminder) with a lone surrogate: every turn
    answers 200 with U+FFFD in its place, as the chat's detail does, never a 500."""
    from lovia import tool

    @tool
    async def probe() -> str:
        """Output that is not valid UTF-8 text."""
        return "bad \ud800 output"

    todos = '{"todos": [{"content": "fix \\udc00 this", "status": "in_progress"}]}'
    script = [call("probe", {}, call_id="p1"), call("todo_write", todos, call_id="t1"), text("ok")]
    agent = Agent(
        name="helper", instructions="Be brief.", model=ScriptedProvider(script),
        tools=[probe], plugins=[Todo()],
    )  # fmt: skip
    client = await asgi_client(create_app(agent, db_path=tmp_path / "c.db", generate_titles=False))
    session = await _chat(client, "go")
    for turn in (1, 2, 3):
        r = await client.get(f"/api/sessions/{session}/turns/{turn}/context")
        assert r.status_code == 200, (turn, r.text)
    shown = json.dumps(r.json()["view"], ensure_ascii=False)
    assert "bad \ufffd output" in shown and "fix \ufffd this" in shown


GARBLED_ROWS: list[dict[str, Any]] = [
    {"turn": 1, "keep": None, "segs": [[0, 1]]},
    {"turn": "1", "segs": [[0, 1]]},
    {"turn": 1, "segs": [[0, 1]], "n": "x", "last": 5},
    {"turn": 1, "segs": [[0, 1]], "usage": {"input_tokens": "x"}},
    {"turn": 1, "segs": [[0, 1]], "usage": {"foo": 1}},
    {"turn": 1, "segs": [[-5, 1], [3, 1], [True, 1]]},
    {"turn": 1, "segs": "x", "lits": {"id": 0}},
    {"turn": 1, "segs": [0, 1], "lits": [{"id": 0, "entry": "nope"}, {"id": 1, "recall": 5,
     "kind": "cleared", "entry": {"type": "tool_result", "call_id": "c", "output": "x"}}]},
    {"turn": 1, "segs": [[0, 1]], "tools": {"names": 5, "tokens": "x"}},
    {"turn": 1, "segs": [[0, 1]], "tools": "x", "system": 5, "model": 5},
    {"turn": 1, "n": 10**9, "segs": [[0, 10**9]]},  # a range it would take hours to list
]  # fmt: skip


async def test_a_garbled_row_of_any_shape_is_answered(recorded: Any) -> None:
    """Every field of a ``context_view`` row (and a decision or compaction row) of the wrong
    type or out of range: the turn answers with what it can, never a 500 and never a range listed
    entry by entry past what the record holds."""
    from lovia.web.eventlog import EventRecord

    app, _, _, session = recorded
    store = app.state.lovia.store
    decisions = {"decisions": [{"turn": 1, "kind": "path", "op": "fly"}, "x", {"turn": 1}]}

    for garbled in GARBLED_ROWS:

        class Garbled:
            row: dict[str, Any] = garbled  # bound now, not when the loop has moved on

            def __getattr__(self, name: str) -> Any:
                return getattr(store, name)

            async def read_events(self, run_id: str, after: int = 0) -> list[Any]:
                events = await store.read_events(run_id, after=after)
                seq = events[-1].seq
                return [
                    *events,
                    EventRecord(run_id, seq + 1, "context_permissions", decisions),
                    EventRecord(run_id, seq + 2, "context_view", self.row),
                    EventRecord(run_id, seq + 3, "context_compacted", {"tokens_before": "x"}),
                ]

        body = await turn_context(Garbled(), app.state.lovia.agents, session, 1)  # type: ignore[arg-type]
        assert body.source == "recorded", garbled
        assert len(body.view) <= 100, garbled  # the real record is a few entries long
        assert body.permissions == []
        assert body.missing, garbled  # says what it could not read


async def test_a_gated_operation_is_shown_enforced(recorded: Any) -> None:
    """The check ahead of a read and the read's own gate are one decision in the panel; it
    must say the operation was gated, not "checked only" (the first of the pair)."""
    _, client, _, session = recorded

    async def enforced(turn: int) -> list[tuple[str, bool]]:
        body = (await client.get(f"/api/sessions/{session}/turns/{turn}/context")).json()
        return [(p["subject"], p["enforced"]) for p in body["permissions"]]

    assert await enforced(2) == [("notes1.txt", True)]  # checked, then read through the gate
    assert await enforced(3) == [("private/key.txt", True)]  # the gate refused it
    assert await enforced(4) == [("ls", False)]  # the approval was denied: never run


async def test_a_summarisers_call_is_no_attempt_of_the_turn(
    tmp_path: Path, asgi_client: Any
) -> None:
    """``SummarizeHistory`` folds on the run's own provider, so the recorder sees its calls
    too: they are counted apart (``side_calls``), never as attempts of the turn, and the
    view shown is the turn's own call."""
    from lovia import tool
    from lovia.context import REQUIRED_SECTIONS, SummarizeHistory

    @tool
    async def fetch(n: int) -> str:
        """A page."""
        return f"page {n} " + "q" * 1500

    class Folding(ScriptedProvider):
        """Replays the script for the run's turns, and answers every fold with a summary."""

        folds = 0

        async def stream(self, entries: Any, **options: Any) -> Any:
            if entries[0].content.startswith("Read every page."):
                async for delta in super().stream(entries, **options):
                    yield delta
                return
            self.folds += 1
            async for delta in ScriptedProvider([text(summary)]).stream(entries, **options):
                yield delta

    summary = "\n".join(f"## {s}\nok" for s in REQUIRED_SECTIONS)
    script = [call("fetch", {"n": i}, call_id=f"c{i}") for i in range(6)]
    model = Folding([*script, text("done")])
    agent = Agent(
        name="helper",
        instructions="Read every page.",
        model=model,
        tools=[fetch],
        context_policy=Compaction(
            context_window=2500,
            compact_to=0.5,
            keep_recent_tokens=200,
            stages=[SummarizeHistory(min_savings_ratio=0.0)],
        ),
    )
    client = await asgi_client(create_app(agent, db_path=tmp_path / "c.db", generate_titles=False))
    session = await _chat(client, "go")
    turns = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()["turns"]
    assert len(turns) == 7, turns  # six fetches and the answer: folds add no turn
    bodies = []
    for turn in turns:
        r = await client.get(f"/api/sessions/{session}/turns/{turn}/context")
        assert r.status_code == 200, (turn, r.text)
        bodies.append(r.json())
    assert model.folds and sum(b["side_calls"] for b in bodies) == model.folds
    for body in bodies:
        assert body["attempts"] == 1, body["turn"]
        assert body["view"][0]["entry"]["content"].startswith("Read every page.")
        assert "reminder" not in [v["source"] for v in body["view"]]
    assert "summary" in [v["source"] for v in bodies[-1]["view"]]
    assert _view_as_sent(bodies[-1]["view"]) == [entry_to_dict(e) for e in model.views[-1]]


async def test_a_shared_workspace_session_keeps_each_runs_decisions_apart(
    tmp_path: Path, make_app: Any, serve: Any
) -> None:
    """An agent bound to one caller-owned workspace session serves every chat through it:
    while chat A's run waits, chat B's run reads a file. B's read is B's decision only; it
    must not show up in A's turn (another chat's paths)."""
    from tests.web.conftest import Gate, chat, until

    root = tmp_path / "ws"
    root.mkdir()
    (root / "b_private.txt").write_text("b's file")
    gate = Gate()
    workspace = Workspace.local(root, mode="coding")
    session = await workspace.open()
    try:
        script = [
            call("wait_gate", call_id="g1"),  # chat A, turn 1: parks
            call("read_file", {"path": "b_private.txt"}, call_id="r1"),  # chat B, turn 1
            text("b done"),  # chat B, turn 2
            text("a done"),  # chat A, turn 2
        ]
        agent = Agent(
            name="helper",
            model=ScriptedProvider(script),
            tools=[gate.tool],
            workspace=workspace.bind(session),
        )
        server = await serve(make_app(agent))
        async with chat(server.client, "chat a") as (a, a_frames):
            await gate.entered.wait()
            async with chat(server.client, "chat b") as (b, b_frames):
                await until(b_frames, "done")
            gate.open()
            await until(a_frames, "done")
        subjects: dict[str, list[str]] = {}
        for frame in (a, b):
            sid = frame.data["session_id"]
            for turn in (1, 2):
                r = await server.client.get(f"/api/sessions/{sid}/turns/{turn}/context")
                subjects.setdefault(sid, []).extend(p["subject"] for p in r.json()["permissions"])
        assert subjects[b.data["session_id"]] == ["b_private.txt"]
        assert subjects[a.data["session_id"]] == []
    finally:
        await session.close()


async def test_the_response_format_sent_is_shown(tmp_path: Path, asgi_client: Any) -> None:
    """A run with an ``output_type`` on a provider with native JSON schema: the schema is
    part of what the model was sent, so the turn shows it (the recorder logs it)."""
    from pydantic import BaseModel

    class Verdict(BaseModel):
        ok: bool
        reason: str

    model = ScriptedProvider([text('{"ok": true, "reason": "fine"}')], supports_json_schema=True)
    agent = Agent(name="helper", instructions="Judge.", model=model, output_type=Verdict)
    client = await asgi_client(create_app(agent, db_path=tmp_path / "c.db", generate_titles=False))
    session = await _chat(client, "judge this")
    body = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()
    sent = model.response_formats[0]
    assert sent is not None
    assert body["response_format"] == sent


async def test_a_run_rewound_away_is_not_shown_with_the_messages_written_since(
    tmp_path: Path, asgi_client: Any
) -> None:
    """Chat: "a", "b"; rewound to before "b"; then "d". The run that answered "b" no
    longer has its record in the chat, and "d" now stands where "b" stood (same place,
    same kind of entry): its turn must not show "d" as what the model was sent."""
    model = ScriptedProvider([text("A"), text("B"), text("D")])
    agent = Agent(name="helper", instructions="Be brief.", model=model)
    client = await asgi_client(create_app(agent, db_path=tmp_path / "c.db", generate_titles=False))
    session = await _chat(client, "a")
    await _chat(client, "b", session)
    run_b = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()["run_id"]
    r = await client.post(f"/api/sessions/{session}/rewind", json={"user_turn": 1})
    assert r.status_code == 200, r.text
    await _chat(client, "d", session)
    r = await client.get(f"/api/sessions/{session}/turns/1/context", params={"run_id": run_b})
    body = r.json()
    shown = [v["entry"]["content"] for v in body["view"] if v["entry"] is not None]
    assert "d" not in shown, shown
    assert any("no longer lines up" in m for m in body["missing"])
    # The chat's current run still lines up, entry for entry.
    latest = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()
    assert _view_as_sent(latest["view"]) == [entry_to_dict(e) for e in model.views[2]]
    assert latest["missing"] == [m for m in latest["missing"] if "usage" in m]


async def test_an_approved_call_that_failed_with_denied_in_its_error_stays_approved(
    make_app: Any, serve: Any
) -> None:
    """The user approves a deploy; the deploy itself fails with "access denied" from the
    remote. The approval was granted: only the run's own refusal reads as denied."""
    from lovia import tool

    from tests.web.conftest import chat, until

    @tool(needs_approval=True)
    def release(env: str) -> str:
        """Release to ``env``."""
        raise RuntimeError(f"access denied by the {env} registry")

    script = [
        call("release", {"env": "prod"}, call_id="a1"),
        call("release", {"env": "qa"}, call_id="a2"),
        text("done"),
    ]
    agent = Agent(name="helper", model=ScriptedProvider(script), tools=[release])
    server = await serve(make_app(agent))
    async with chat(server.client, "ship it") as (session, frames):
        sid = session.data["session_id"]
        for call_id, decision in (("a1", "approve"), ("a2", "deny")):
            await until(frames, "approval_required")
            body = {"session_id": sid, "call_id": call_id, "decision": decision}
            assert (await server.client.post("/api/chat/approve", json=body)).status_code == 200
        await until(frames, "done")
    seen = []
    for turn in (1, 2):
        r = await server.client.get(f"/api/sessions/{sid}/turns/{turn}/context")
        seen += [(a["call_id"], a["decision"]) for a in r.json()["approvals"]]
    assert seen == [("a1", "approved"), ("a2", "denied")]


class _Capture(ScriptedProvider):
    """A scripted model that keeps each view as JSON the moment it is sent (not lazily)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.sent: list[list[dict[str, Any]]] = []

    async def stream(self, entries: Any, **options: Any) -> Any:
        self.sent.append([entry_to_dict(e) for e in entries])
        async for delta in super().stream(entries, **options):
            yield delta


async def _views_shown(client: Any, session: str) -> list[list[dict[str, Any]]]:
    turns = (await client.get(f"/api/sessions/{session}/turns/1/context")).json()["turns"]
    shown = []
    for turn in turns:
        body = (await client.get(f"/api/sessions/{session}/turns/{turn}/context")).json()
        shown.append(_view_as_sent(body["view"]))
    return shown


async def test_exact_views_across_handoffs_to_a_systemless_agent_and_back(
    tmp_path: Path, asgi_client: Any
) -> None:
    """The record's head is removed on the way to an agent without instructions and put
    back on the way home: every turn still shows, entry for entry, what was sent."""
    b_model = _Capture([call("transfer_to_a", {}, call_id="h2")], model="b")
    target = Agent(name="b", model=b_model)
    a_model = _Capture([call("transfer_to_b", {}, call_id="h1"), text("home")], model="a")
    agent = Agent(name="a", instructions="You are a.", model=a_model, handoffs=[target])
    target.handoffs = (agent,)
    client = await asgi_client(create_app(agent, db_path=tmp_path / "c.db", generate_titles=False))
    session = await _chat(client, "go")
    sent = [a_model.sent[0], b_model.sent[0], a_model.sent[1]]
    assert await _views_shown(client, session) == sent


async def test_exact_views_with_an_injector_of_several_entries_and_a_reactive_retry(
    tmp_path: Path, asgi_client: Any
) -> None:
    """A view injector adds two notes around a record entry it repeats (by identity), and
    the provider rejects a view as too long once: the turn shows the smaller view retried."""
    from lovia import tool
    from lovia.exceptions import ContextOverflowError
    from lovia.plugin import PluginInstance
    from lovia.transcript import InputEntry

    class Notes:
        async def setup(self, ctx: Any) -> PluginInstance:
            def inject(run: Any) -> list[Any]:
                first = run.entries[1]  # the user's message, the record's own object
                return [InputEntry("user", "note A"), first, InputEntry("user", f"B{run.turn}")]

            return PluginInstance(view_injectors=(inject,))

    @tool
    async def fetch(n: int) -> str:
        """A long page."""
        return f"page {n} " + "q" * 3000

    script = [
        call("fetch", {"n": 1}, call_id="c1"),
        call("fetch", {"n": 2}, call_id="c2"),
        ContextOverflowError("too long", reported_window=1500),
        text("done"),
    ]
    model = _Capture(script)
    agent = Agent(
        name="helper",
        instructions="Read.",
        model=model,
        tools=[fetch],
        plugins=[Notes()],
        context_policy=Compaction(
            context_window=100_000, keep_recent_tokens=10, stages=[ClearToolResults()]
        ),
    )
    client = await asgi_client(create_app(agent, db_path=tmp_path / "c.db", generate_titles=False))
    session = await _chat(client, "go")
    shown = await _views_shown(client, session)
    assert shown == [model.sent[0], model.sent[1], model.sent[3]]  # [2] was rejected
    last = (await client.get(f"/api/sessions/{session}/turns/3/context")).json()
    assert last["attempts"] == 2 and last["cleared"]
