"""The SSE parser: framing, noise, multi-line data, [DONE], arbitrary chunk boundaries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from lovia.providers.sse import SSEEvent, SSEParser, iter_sse


def parse(*chunks: bytes) -> tuple[list[SSEEvent], SSEParser]:
    parser = SSEParser()
    out: list[SSEEvent] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.close(), parser


def test_named_events_and_comments_and_noise() -> None:
    body = (
        b': keep-alive\n\nevent: message_start\ndata: {"a":1}\n\n'
        b"OPENROUTER PROCESSING\nid: 7\nretry: 100\ndata: x\n\n"
    )
    events, _ = parse(body)
    assert events == [SSEEvent("message_start", '{"a":1}'), SSEEvent(None, "x")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    events, _ = parse(b"data: first\ndata:second\ndata:  third\n\n")
    assert events == [SSEEvent(None, "first\nsecond\n third")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    body = newline.join([b"event: e", b"data: 1", b"", b"data: 2", b"", b""])
    events, _ = parse(body)
    assert events == [SSEEvent("e", "1"), SSEEvent(None, "2")]


def test_any_chunk_boundary_gives_the_same_events() -> None:
    body = 'event: a\r\ndata: {"t": "héllo"}\r\n\r\ndata: [DONE]\r\n\r\n'.encode()
    whole, _ = parse(body)
    for cut in range(1, len(body)):
        split, parser = parse(body[:cut], body[cut:])
        assert split == whole, cut
        assert parser.done
    bytewise, _ = parse(*(body[i : i + 1] for i in range(len(body))))
    assert bytewise == whole == [SSEEvent("a", '{"t": "héllo"}')]


def test_done_stops_the_stream() -> None:
    events, parser = parse(b"data: 1\n\ndata: [DONE]\n\ndata: 2\n\n")
    assert events == [SSEEvent(None, "1")] and parser.done and parser.events_seen == 1


@pytest.mark.parametrize("done", [b"data: [DONE] ", b"data:[DONE]", b"data:  [DONE]\t"])
def test_done_tolerates_stray_whitespace(done: bytes) -> None:
    events, parser = parse(b"data: 1\n\n" + done + b"\n\ndata: 2\n\n")
    assert events == [SSEEvent(None, "1")] and parser.done


def test_a_final_event_without_its_blank_line_still_counts() -> None:
    events, parser = parse(b"data: last")
    assert events == [SSEEvent(None, "last")] and not parser.done


def test_an_event_name_does_not_leak_into_the_next_event() -> None:
    events, _ = parse(b"event: ping\n\ndata: 1\n\n")
    assert events == [SSEEvent(None, "1")]


async def test_iter_sse_over_an_async_byte_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for piece in (b"data: a\n", b"\ndata: [DO", b"NE]\n\n", b"data: never\n\n"):
            yield piece

    assert [e.data async for e in iter_sse(chunks())] == ["a"]
