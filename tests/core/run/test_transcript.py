"""The canonical transcript: strict (de)serialisation, conversions and pair-safe slicing."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import PurePosixPath
from typing import Any

import pytest
from lovia.exceptions import BudgetExceeded, LoviaError, ProviderError, UserError
from lovia.messages import AssistantTurn, Message, ToolCall, Usage, assistant, system, user
from lovia.parts import FilePart, ImagePart, TextPart, coerce_parts, image_mime, project_parts
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    assistant_to_entries,
    drop_dangling_tool_calls,
    entries_to_messages,
    entry_from_dict,
    entry_to_dict,
    input_to_entries,
    leading_system_count,
    messages_to_entries,
    safe_window,
    split_system,
    to_json_safe,
)

PNG = "iVBORw0KGgo="  # valid base64 (the PNG signature)

ALL_KINDS: list[TranscriptEntry] = [
    InputEntry("system", "be brief"),
    InputEntry("user", (TextPart("look"), ImagePart(data=PNG, mime_type="image/png"))),
    ReasoningEntry("thinking", id="r1", provider="anthropic", metadata={"signature": "sig"}),
    AssistantTextEntry("hello", id="m1"),
    ToolCallEntry("c1", "add", '{"a": 1,  "b":2}'),
    ToolResultEntry("c1", "3", raw=3),
    ToolResultEntry("c2", "boom", is_error=True),
    ToolResultEntry("c3", "[image]", parts=(ImagePart(url="https://example.test/x.png"),)),
]


@pytest.mark.parametrize("entry", ALL_KINDS, ids=lambda e: e.type)
def test_every_entry_round_trips_through_json(entry: TranscriptEntry) -> None:
    data = json.loads(json.dumps(entry_to_dict(entry)))
    assert entry_from_dict(data) == entry


def test_tool_arguments_survive_byte_for_byte() -> None:
    raw = '{"a": 1,  "b":2}'
    back = entry_from_dict(json.loads(json.dumps(entry_to_dict(ToolCallEntry("c", "f", raw)))))
    assert isinstance(back, ToolCallEntry)
    assert back.arguments == raw


def test_a_plain_tool_result_omits_parts_and_raw() -> None:
    assert entry_to_dict(ToolResultEntry("c", "ok")) == {
        "type": "tool_result",
        "call_id": "c",
        "output": "ok",
    }


@pytest.mark.parametrize(
    "data",
    [
        {"type": "mystery", "content": "x"},
        {"type": "assistant_text", "content": "x", "extra": 1},
        {"type": "input", "role": "tool", "content": "x"},
        {"type": "input", "role": "user", "content": [{"type": "video", "url": "u"}]},
        {"type": "tool_call", "call_id": "c", "name": "f", "arguments": {"a": 1}},
        {"type": "tool_result", "output": "missing call id"},
        ["not", "an", "object"],
    ],
    ids=[
        "unknown-type",
        "unknown-field",
        "bad-role",
        "unknown-part",
        "args-not-text",
        "missing",
        "list",
    ],
)
def test_strict_deserialisation_rejects_what_it_cannot_trust(data: Any) -> None:
    with pytest.raises(ValueError):
        entry_from_dict(data)


def test_unserialisable_raw_is_left_out_instead_of_failing() -> None:
    assert "raw" not in entry_to_dict(ToolResultEntry("c", "ok", raw=object()))


class Colour(Enum):
    RED = "red"


@dataclass
class Point:
    x: int
    when: date


def test_to_json_safe_covers_common_python_values() -> None:
    value = {
        "p": Point(1, date(2026, 1, 2)),
        "c": Colour.RED,
        "path": PurePosixPath("/a"),
        "t": (1, 2),
    }
    assert to_json_safe(value) == {
        "p": {"x": 1, "when": "2026-01-02"},
        "c": "red",
        "path": "/a",
        "t": [1, 2],
    }
    with pytest.raises(TypeError):
        to_json_safe(b"bytes")


def test_input_to_entries_accepts_text_messages_and_entries() -> None:
    assert input_to_entries("hi") == [InputEntry("user", "hi")]
    entries = input_to_entries([system("s"), user("u"), ToolResultEntry("c", "r")])
    assert entries == [
        InputEntry("system", "s"),
        InputEntry("user", "u"),
        ToolResultEntry("c", "r"),
    ]
    with pytest.raises(TypeError):
        input_to_entries([42])  # type: ignore[arg-type, list-item, unused-ignore]  # deliberately wrong input


def test_messages_and_entries_convert_both_ways() -> None:
    messages = [
        system("s"),
        user("question"),
        Message(
            "assistant", "let me add", reasoning="hmm", tool_calls=(ToolCall("c1", "add", "{}"),)
        ),
        Message("tool", "3", tool_call_id="c1"),
        assistant("it is 3"),
    ]
    entries = messages_to_entries(messages)
    assert entries == [
        InputEntry("system", "s"),
        InputEntry("user", "question"),
        ReasoningEntry("hmm"),
        AssistantTextEntry("let me add"),
        ToolCallEntry("c1", "add", "{}"),
        ToolResultEntry("c1", "3"),
        AssistantTextEntry("it is 3"),
    ]
    assert entries_to_messages(entries) == messages


def test_consecutive_assistant_text_folds_into_one_message() -> None:
    view = entries_to_messages([AssistantTextEntry("a"), AssistantTextEntry("b")])
    assert view == [Message("assistant", "ab")]


def test_assistant_turn_orders_reasoning_text_then_calls() -> None:
    turn = AssistantTurn("answer", reasoning="why", tool_calls=(ToolCall("c", "f", "{}"),))
    assert assistant_to_entries(turn, provider="x") == [
        ReasoningEntry("why", provider="x"),
        AssistantTextEntry("answer"),
        ToolCallEntry("c", "f", "{}"),
    ]


def test_system_head_helpers() -> None:
    entries: list[TranscriptEntry] = [
        InputEntry("system", "a"),
        InputEntry("system", "b"),
        InputEntry("user", "u"),
        InputEntry("system", "late"),
    ]
    assert leading_system_count(entries) == 2
    head, body = split_system(entries)
    assert head == entries[:2]
    assert body == entries[2:]


def _pairs() -> list[TranscriptEntry]:
    return [
        InputEntry("system", "s"),
        InputEntry("user", "u1"),
        ToolCallEntry("a", "f"),
        ToolCallEntry("b", "f"),
        ToolResultEntry("b", "rb"),
        ToolResultEntry("a", "ra"),
        AssistantTextEntry("done"),
    ]


def test_safe_window_walks_the_cut_back_to_keep_pairs() -> None:
    entries = _pairs()
    # The last three entries hold results whose calls sit further back: both calls come along.
    assert safe_window(entries, head=1, tail=3) == [entries[0], *entries[2:]]


def test_safe_window_never_returns_an_orphan_result() -> None:
    entries = _pairs()
    window = safe_window(entries, head=0, tail=2)
    calls = {e.call_id for e in window if isinstance(e, ToolCallEntry)}
    results = {e.call_id for e in window if isinstance(e, ToolResultEntry)}
    assert results <= calls


def test_safe_window_drops_results_whose_call_is_gone() -> None:
    entries: list[TranscriptEntry] = [ToolResultEntry("ghost", "r"), AssistantTextEntry("x")]
    assert safe_window(entries, tail=2) == [AssistantTextEntry("x")]


def test_safe_window_clamps_its_arguments() -> None:
    entries = _pairs()
    assert safe_window(entries, head=-5, tail=100) == entries
    assert safe_window(entries, head=0, tail=-1) == []


def test_drop_dangling_tool_calls_keeps_resolved_pairs() -> None:
    entries: list[TranscriptEntry] = [
        InputEntry("user", "u"),
        ToolCallEntry("a", "f"),
        ToolCallEntry("b", "f"),
        ToolResultEntry("a", "ra"),
    ]
    assert drop_dangling_tool_calls(entries) == entries[:2] + [entries[3]]


def test_parts_need_exactly_one_valid_source() -> None:
    with pytest.raises(UserError):
        ImagePart()
    with pytest.raises(UserError):
        ImagePart(url="u", data=PNG, mime_type="image/png")
    with pytest.raises(UserError):
        ImagePart(data=PNG)
    with pytest.raises(UserError):
        FilePart(data="not base64!", mime_type="application/pdf")


def test_a_bare_string_inside_a_part_list_is_not_coerced() -> None:
    with pytest.raises(UserError) as info:
        coerce_parts([TextPart("a"), "b"])  # type: ignore[list-item]  # deliberately wrong input
    assert info.value.hint


def test_image_mime_rejects_unknown_suffixes() -> None:
    assert image_mime("a.JPG") == "image/jpeg"
    with pytest.raises(UserError):
        image_mime("a.bmp")


def test_project_parts_marks_binaries_by_size() -> None:
    text = project_parts([TextPart("see"), ImagePart.from_bytes(b"\x89PNG....", "image/png")])
    assert text == "see\n[image: image/png, 8 bytes]"


def test_usage_accumulates_in_place() -> None:
    total = Usage()
    total.add(Usage(input_tokens=10, output_tokens=2, cache_read_tokens=4))
    total.add(Usage(input_tokens=5, output_tokens=1))
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (15, 3, 18)
    assert Usage.from_dict(total.to_dict()) == total


def test_errors_render_their_hint_and_survive_pickling() -> None:
    exc = ProviderError(
        "rate limited", vendor="openai", status_code=429, retryable=True, hint="wait"
    )
    assert str(exc) == "rate limited\nHint: wait"
    back = pickle.loads(pickle.dumps(exc))
    assert (back.status_code, back.retryable, back.hint) == (429, True, "wait")
    assert isinstance(
        pickle.loads(pickle.dumps(BudgetExceeded("x", limit="max_tool_calls"))), LoviaError
    )
