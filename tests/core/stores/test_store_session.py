"""The Session contract, run against every backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import pytest
from lovia.checkpointer import RunHead
from lovia.exceptions import StoreError, UserError
from lovia.parts import FilePart, ImagePart, TextPart
from lovia.session import Segment
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .conftest import Backend


def run_entries(n: int, *, tag: str = "") -> list[TranscriptEntry]:
    """A small, tool-using run: question, call, result, answer."""
    return [
        InputEntry("user", f"question {tag}{n}"),
        ToolCallEntry(f"c{tag}{n}", "lookup", f'{{"q": {n}}}'),
        ToolResultEntry(f"c{tag}{n}", f"result {tag}{n}"),
        AssistantTextEntry(f"answer {tag}{n}"),
    ]


async def test_load_concatenates_segments_in_insertion_order(backend: Backend) -> None:
    store = backend.session()
    await store.append("s", run_entries(2), run_id="b")
    await store.append("s", run_entries(1), run_id="a")
    assert await store.load("s") == run_entries(2) + run_entries(1)
    assert [s.run_id for s in await store.segments("s")] == ["b", "a"]


async def test_unknown_session_is_empty(backend: Backend) -> None:
    store = backend.session()
    assert await store.load("nobody") == []
    assert await store.segments("nobody") == []


async def test_append_generates_a_run_id_when_none_is_given(backend: Backend) -> None:
    store = backend.session()
    first = await store.append("s", run_entries(1))
    second = await store.append("s", run_entries(2))
    assert len(first) == 32 and int(first, 16) >= 0
    assert first != second
    assert [s.run_id for s in await store.segments("s")] == [first, second]


async def test_reappending_a_run_with_the_same_entries_is_a_no_op(backend: Backend) -> None:
    store = backend.session()
    assert await store.append("s", run_entries(1), run_id="r1") == "r1"
    assert await store.append("s", run_entries(1), run_id="r1", meta={"other": 1}) == "r1"
    assert await store.segments("s") == [Segment("r1", tuple(run_entries(1)), {})]


async def test_reappending_a_run_with_different_entries_raises(backend: Backend) -> None:
    store = backend.session()
    await store.append("s", run_entries(1), run_id="r1")
    with pytest.raises(StoreError) as info:
        await store.append("s", run_entries(2), run_id="r1")
    assert info.value.run_id == "r1"
    assert info.value.hint is not None and "new run_id" in info.value.hint
    assert await store.load("s") == run_entries(1)


async def test_same_run_id_in_two_sessions_is_two_segments(backend: Backend) -> None:
    store = backend.session()
    await store.append("s1", run_entries(1), run_id="r")
    await store.append("s2", run_entries(2), run_id="r")
    assert await store.load("s1") == run_entries(1)
    assert await store.load("s2") == run_entries(2)


async def test_clear_empties_one_session_only(backend: Backend) -> None:
    store = backend.session()
    await store.append("s1", run_entries(1))
    await store.append("s2", run_entries(2))
    await store.clear("s1")
    await store.clear("never-used")
    assert await store.load("s1") == []
    assert await store.load("s2") == run_entries(2)


async def test_meta_round_trips_and_defaults_to_empty(backend: Backend) -> None:
    store = backend.session()
    meta = {"compaction": {"summary": "résumé", "covered": [1, 2]}, "n": 3}
    await store.append("s", run_entries(1), run_id="a", meta=meta)
    await store.append("s", run_entries(2), run_id="b")
    assert [s.meta for s in await store.segments("s")] == [meta, {}]


async def test_meta_is_isolated_from_the_caller(backend: Backend) -> None:
    store = backend.session()
    meta: dict[str, object] = {"items": [1]}
    await store.append("s", run_entries(1), meta=meta)
    meta["items"] = "changed"
    (segment,) = await store.segments("s")
    segment.meta["items"] = "changed again"
    assert [s.meta for s in await store.segments("s")] == [{"items": [1]}]


async def test_meta_that_is_not_json_safe_is_a_user_error(backend: Backend) -> None:
    store = backend.session()
    with pytest.raises(UserError):
        await store.append("s", run_entries(1), meta={"bad": object()})
    assert await store.load("s") == []


async def test_every_entry_kind_and_non_ascii_text_round_trip(backend: Backend) -> None:
    entries: list[TranscriptEntry] = [
        InputEntry("system", "Tu es un assistant. 日本語 ✓"),
        InputEntry(
            "user",
            (
                TextPart("what is in this picture?"),
                ImagePart(data="aGVsbG8=", mime_type="image/png"),
                FilePart(url="https://example.invalid/a.pdf", mime_type="application/pdf"),
            ),
        ),
        ReasoningEntry("thinking…", id="r1", provider="anthropic", metadata={"signature": "x"}),
        ToolCallEntry("c1", "zoom", '{"factor": 2}'),
        ToolResultEntry(
            "c1", "zoomed", raw={"ok": True}, parts=(ImagePart(url="https://x.invalid/i.png"),)
        ),
        ToolCallEntry("c2", "fail", "{}"),
        ToolResultEntry("c2", "boom \x00 \ud800", is_error=True),
        AssistantTextEntry("done — 完了", id="msg_1"),
    ]
    store = backend.session()
    await store.append("s", entries)
    assert await store.load("s") == entries


async def test_history_persists_across_store_instances(db_backend: Backend) -> None:
    await db_backend.session().append("s", run_entries(1), run_id="r1")
    assert await db_backend.session().load("s") == run_entries(1)


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "input", "role": "user", "content": "a dict, not an entry"},
        "plain text",
        ReasoningEntry("thinking", metadata={"handle": object()}),
    ],
    ids=["dict", "str", "non-json-metadata"],
)
async def test_appending_something_that_is_not_a_storable_entry_is_a_user_error(
    backend: Backend, bad: object
) -> None:
    store = backend.session()
    with pytest.raises(UserError) as info:
        await store.append("s", [InputEntry("user", "ok"), bad], run_id="r")  # type: ignore[list-item]
    assert info.value.hint
    assert await store.load("s") == []
    checkpointer = backend.checkpointer()
    with pytest.raises(UserError):
        await checkpointer.append("r", [bad], RunHead(agent_name="a"))  # type: ignore[list-item]
    assert await checkpointer.load("r") is None


async def test_a_blank_session_id_is_a_user_error(backend: Backend) -> None:
    with pytest.raises(UserError):
        await backend.session().append("", run_entries(1))


# -- maintenance ---------------------------------------------------------------------------


def big_run(n: int, size: int = 1000) -> list[TranscriptEntry]:
    return [
        InputEntry("user", f"q{n}"),
        ToolCallEntry(f"c{n}", "read", "{}"),
        ToolResultEntry(f"c{n}", "x" * size, raw={"big": "x" * size}, is_error=n % 2 == 1),
        ToolCallEntry(f"small{n}", "read", "{}"),
        ToolResultEntry(f"small{n}", "tiny"),
        AssistantTextEntry(f"a{n}"),
    ]


async def test_trim_cuts_old_results_and_keeps_pairing(backend: Backend) -> None:
    store = backend.session()
    for n in range(3):
        await store.append("s", big_run(n), run_id=f"r{n}")
    trimmed = await store.trim_tool_results("s", keep_chars=50, keep_runs=1)
    assert trimmed == 2
    segments = await store.segments("s")
    for segment in segments[:2]:
        result = segment.entries[2]
        assert isinstance(result, ToolResultEntry)
        assert result.output.startswith("x" * 50)
        assert "950 chars trimmed" in result.output
        assert result.raw is None
        assert [type(e) for e in segment.entries] == [type(e) for e in big_run(0)]
        assert segment.entries[4] == ToolResultEntry(result.call_id.replace("c", "small"), "tiny")
    assert segments[0].entries[2].is_error is False  # type: ignore[union-attr]
    assert segments[1].entries[2].is_error is True  # type: ignore[union-attr]
    assert list(segments[2].entries) == big_run(2)


async def test_trim_is_idempotent(backend: Backend) -> None:
    store = backend.session()
    for n in range(2):
        await store.append("s", big_run(n), run_id=f"r{n}")
    await store.trim_tool_results("s", keep_chars=10, keep_runs=0)
    once = await store.load("s")
    assert await store.trim_tool_results("s", keep_chars=10, keep_runs=0) == 0
    assert await store.load("s") == once


@pytest.mark.parametrize(
    ("keep_chars", "keep_runs"), [(-1, 1), (10, -1), (True, 1)], ids=["chars", "runs", "bool"]
)
async def test_trim_validates_its_arguments(
    backend: Backend, keep_chars: int, keep_runs: int
) -> None:
    store = backend.session()
    with pytest.raises(UserError):
        await store.trim_tool_results("s", keep_chars=keep_chars, keep_runs=keep_runs)


async def test_rewind_truncates_the_run_the_cut_lands_in(backend: Backend) -> None:
    store = backend.session()
    await store.append("s", run_entries(1), run_id="r1", meta={"m": 1})
    await store.append("s", run_entries(2), run_id="r2", meta={"m": 2})
    await store.append("s", run_entries(3), run_id="r3", meta={"m": 3})
    # Cut after run 2's tool call: that call has no result, so it goes too.
    removed = await store.rewind("s", keep_entries=6)
    assert removed == 7
    assert await store.segments("s") == [
        Segment("r1", tuple(run_entries(1)), {"m": 1}),
        Segment("r2", (run_entries(2)[0],), {}),
    ]


async def test_rewind_on_a_segment_boundary_keeps_that_run_whole(backend: Backend) -> None:
    store = backend.session()
    await store.append("s", run_entries(1), run_id="r1", meta={"m": 1})
    await store.append("s", run_entries(2), run_id="r2")
    assert await store.rewind("s", keep_entries=4) == 4
    assert await store.segments("s") == [Segment("r1", tuple(run_entries(1)), {"m": 1})]


async def test_rewind_to_zero_empties_and_past_the_end_is_a_no_op(backend: Backend) -> None:
    store = backend.session()
    await store.append("s", run_entries(1))
    assert await store.rewind("s", keep_entries=100) == 0
    assert await store.load("s") == run_entries(1)
    assert await store.rewind("s", keep_entries=0) == 4
    assert await store.load("s") == []


async def test_rewind_inside_a_parallel_call_group_drops_only_the_unanswered_call(
    backend: Backend,
) -> None:
    parallel: list[TranscriptEntry] = [
        InputEntry("user", "both"),
        ToolCallEntry("a", "read", "{}"),
        ToolCallEntry("b", "read", "{}"),
        ToolResultEntry("a", "A"),
        ToolResultEntry("b", "B"),
        AssistantTextEntry("done"),
    ]
    store = backend.session()
    await store.append("s", run_entries(1), run_id="r1")
    await store.append("s", parallel, run_id="r2", meta={"m": 2})
    # The cut keeps call a, call b and result a: call b has lost its result.
    assert await store.rewind("s", keep_entries=4 + 4) == 3
    assert await store.segments("s") == [
        Segment("r1", tuple(run_entries(1))),
        Segment("r2", (parallel[0], parallel[1], parallel[3]), {}),
    ]


async def test_rewind_deletes_a_cut_run_left_empty(backend: Backend) -> None:
    store = backend.session()
    await store.append("s", run_entries(1), run_id="r1")
    await store.append(
        "s", [ToolCallEntry("x", "t", "{}"), ToolResultEntry("x", "ok")], run_id="r2"
    )
    await store.append("s", run_entries(3), run_id="r3")
    assert await store.rewind("s", keep_entries=5) == 6
    assert await store.segments("s") == [Segment("r1", tuple(run_entries(1)))]


async def test_maintenance_leaves_other_sessions_alone(backend: Backend) -> None:
    store = backend.session()
    for sid in ("s", "other"):
        for n in range(2):
            await store.append(sid, big_run(n), run_id=f"r{n}", meta={"m": n})
    await store.trim_tool_results("s", keep_chars=5, keep_runs=0)
    await store.rewind("s", keep_entries=3)
    assert await store.segments("other") == [
        Segment(f"r{n}", tuple(big_run(n)), {"m": n}) for n in range(2)
    ]


async def test_maintenance_of_an_unknown_session_changes_nothing(backend: Backend) -> None:
    store = backend.session()
    assert await store.trim_tool_results("nobody") == 0
    assert await store.rewind("nobody", keep_entries=0) == 0
    assert await store.rewind("nobody", keep_entries=5) == 0
    assert await store.load("nobody") == []


async def test_trim_keeps_the_last_runs_and_small_results_untouched(backend: Backend) -> None:
    store = backend.session()
    for n in range(3):
        await store.append("s", big_run(n, size=100), run_id=f"r{n}")
    # Defaults: keep_chars=400 leaves 100-char results alone even in old runs.
    assert await store.trim_tool_results("s") == 0
    assert await store.trim_tool_results("s", keep_chars=99, keep_runs=2) == 1
    segments = await store.segments("s")
    assert [list(s.entries) == big_run(n, size=100) for n, s in enumerate(segments)] == [
        False,
        True,
        True,
    ]
    assert await store.trim_tool_results("s", keep_chars=99, keep_runs=5) == 0


async def test_rewind_validates_its_argument(backend: Backend) -> None:
    with pytest.raises(UserError):
        await backend.session().rewind("s", keep_entries=-1)
