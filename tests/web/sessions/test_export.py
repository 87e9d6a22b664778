"""``export_session``: Markdown, plain text and the JSON envelope, with hostile content."""

from __future__ import annotations

import json
from collections.abc import Sequence

from lovia.parts import ImagePart, TextPart
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)
from lovia.web.export import export_filename, export_session
from lovia.web.store.base import ChatMeta

META = ChatMeta("s1", "helper", "Weather in Paris", False, 1_700_000_000.0, 1_700_000_000.0)

CHAT: list[TranscriptEntry] = [
    InputEntry("user", "What's the weather in Paris, and the time?"),
    ReasoningEntry("I should call both tools.\nThe weather first."),
    ToolCallEntry("c1", "get_weather", '{"city": "Paris"}'),
    ToolCallEntry("c2", "get_time", '{"tz": "Europe/Paris"}'),
    # Results arrive out of call order: attribution is by call id, not position.
    ToolResultEntry("c2", "14:05"),
    ToolResultEntry("c1", "sunny, 21 °C"),
    AssistantTextEntry("It is sunny and 14:05."),
    InputEntry("user", "Thanks!"),
    AssistantTextEntry("You're welcome."),
]


def _md(entries: Sequence[TranscriptEntry]) -> str:
    return export_session(META, entries, "md").body.decode("utf-8")


def test_markdown_has_speakers_reasoning_as_a_blockquote_and_attributed_results() -> None:
    md = _md(CHAT)
    assert md.startswith("# Weather in Paris\n")
    assert md.count("## User") == 2 and md.count("## Assistant") == 2
    assert "> **Reasoning**\n>\n> I should call both tools.\n> The weather first." in md
    assert "**Tool call:** `get_weather`" in md and '"city": "Paris"' in md
    time_result = md.index("**Tool result** from `get_time`:")
    weather_result = md.index("**Tool result** from `get_weather`:")
    assert md.index("14:05") > time_result and md.index("sunny, 21 °C") > weather_result
    assert time_result < weather_result  # in transcript order


def test_markdown_without_reasoning_has_no_blockquote() -> None:
    md = _md([InputEntry("user", "hi"), ReasoningEntry("   "), AssistantTextEntry("hello")])
    assert ">" not in md.replace("->", "")


def test_an_errored_result_and_an_orphan_result_are_labelled() -> None:
    md = _md([ToolCallEntry("c1", "deploy"), ToolResultEntry("c1", "denied", is_error=True)])
    assert "**Tool error** from `deploy`:" in md
    assert "from `unknown tool`" in _md([ToolResultEntry("zz", "?")])


def test_text_export_has_no_markup() -> None:
    out = export_session(META, CHAT, "txt")
    text = out.body.decode("utf-8")
    assert out.media_type.startswith("text/plain") and out.filename == "Weather-in-Paris.txt"
    assert "--- User ---" in text and "[tool result: get_time]\n14:05" in text
    assert "[reasoning]\n  I should call both tools." in text
    assert "**" not in text and "```" not in text


def test_json_is_an_envelope_of_the_metadata_and_the_entries() -> None:
    out = export_session(META, CHAT, "json")
    data = json.loads(out.body)
    assert set(data) == {"session", "entries"} and out.media_type == "application/json"
    assert data["session"]["id"] == "s1" and data["session"]["title"] == "Weather in Paris"
    assert [e["type"] for e in data["entries"]][:3] == ["input", "reasoning", "tool_call"]
    assert "°C" in out.body.decode("utf-8")  # non-ASCII kept readable


def test_hostile_content_still_exports_valid_utf8() -> None:
    fence_breaker = "```\n# not a heading\n````"
    entries: list[TranscriptEntry] = [
        InputEntry("user", "NUL\x00 bell\x07 surrogate\udcff emoji 🦊 rtl \u202e"),
        ToolCallEntry("c1", "cat", "not json {"),
        ToolResultEntry("c1", fence_breaker + "x" * 2_000_000),
        ToolResultEntry(
            "c1", "see image", parts=(TextPart("a"), ImagePart(data="aGk=", mime_type="image/png"))
        ),
        InputEntry("user", (TextPart("look"), ImagePart(url="https://example.com/a.png"))),
    ]
    for fmt in ("md", "txt", "json"):
        body = export_session(META, entries, fmt).body
        text = body.decode("utf-8")  # strict: it must be valid UTF-8
        assert "🦊" in text
        if fmt != "json":
            assert "\x00" not in text and "\x07" not in text
    md = _md(entries)
    # The fence around the result is longer than any backtick run inside it.
    assert "\n`````\n" + fence_breaker in md
    assert (
        "not json {" in md and "[1 image(s)]" in md and "*[image: https://example.com/a.png]*" in md
    )


def test_file_names_and_content_disposition() -> None:
    def meta(title: str) -> ChatMeta:
        return ChatMeta("abc", "helper", title, False, 0.0, 0.0)

    assert export_filename(meta("../../etc/passwd"), "md") == "etc-passwd.md"
    assert export_filename(meta('a/b\\c"d\r\ne'), "md") == "a-b-c-d-e.md"
    assert export_filename(meta("..."), "json") == "chat-abc.json"
    assert export_filename(meta("Привет мир"), "txt") == "Привет-мир.txt"
    assert export_filename(meta("Café crème"), "md", ascii_only=True) == "Cafe-creme.md"
    out = export_session(meta("Привет мир"), [], "md")
    assert out.content_disposition == (
        'attachment; filename="chat-abc.md"; '
        "filename*=UTF-8''%D0%9F%D1%80%D0%B8%D0%B2%D0%B5%D1%82-%D0%BC%D0%B8%D1%80.md"
    )
