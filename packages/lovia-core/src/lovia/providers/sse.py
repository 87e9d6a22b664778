"""A small, fast Server-Sent Events parser for provider streams.

``SSEParser.feed(bytes)`` returns the events completed by that chunk. It follows the SSE
framing rules that matter for model APIs: lines end in LF, CRLF or CR; ``data:`` lines of
one event are joined with ``\\n``; ``event:`` names the event; comments (``:``), unknown
fields and stray noise lines are skipped; an event is dispatched on a blank line. A
``data: [DONE]`` sentinel sets ``done`` and everything after it is ignored.

One field beyond the standard: llama.cpp's server reports a failure inside a 200 stream as
an ``error: {...}`` line. It is read as ``event: error`` with that data, so the failure is
an event like any vendor's ``event: error`` rather than an ignored line.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEParser", "iter_sse"]


@dataclass(slots=True)
class SSEEvent:
    """One dispatched event: its ``event`` name (``None`` when unnamed) and ``data``."""

    event: str | None
    data: str


class SSEParser:
    """Incremental SSE parser; see the module docstring."""

    __slots__ = ("_buf", "_data", "_event", "_pieces", "done", "events_seen")

    def __init__(self) -> None:
        self._buf = b""
        self._pieces: list[bytes] = []
        """Chunks of a line still open, joined once its end arrives: a long line (a
        base64 image in one event) then costs linear time, not a copy per chunk."""
        self._data: list[bytes] = []
        self._event: str | None = None
        self.done = False
        """Whether ``[DONE]`` arrived."""
        self.events_seen = 0
        """How many events were dispatched (``[DONE]`` excluded)."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk``; return the events it completed."""
        if self.done:
            return []
        if b"\n" not in chunk and b"\r" not in chunk and not self._buf.endswith(b"\r"):
            self._pieces.append(chunk)  # no line ends here (a kept CR might end one)
            return []
        if self._pieces:
            self._buf += b"".join(self._pieces)
            self._pieces.clear()
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            # Normalise CRLF and lone CR, keeping a trailing CR that may start a CRLF.
            tail = b""
            if buf.endswith(b"\r"):
                buf, tail = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = buf.split(b"\n")
            self._buf = lines.pop() + tail
        else:
            lines = buf.split(b"\n")
            self._buf = lines.pop()
        out: list[SSEEvent] = []
        data = self._data
        for line in lines:
            if not line:
                if not data:
                    self._event = None
                    continue
                # dispatch (inlined: this loop runs once per streamed chunk)
                raw = data[0] if len(data) == 1 else b"\n".join(data)
                data.clear()
                event, self._event = self._event, None
                if len(raw) < 16 and raw.strip() == b"[DONE]":  # stray spaces happen
                    self.done = True
                    self.events_seen += len(out)
                    return out
                out.append(SSEEvent(event, raw.decode("utf-8", "replace")))
            elif line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line[:6] == b"event:":
                self._event = line[6:].strip().decode("utf-8", "replace") or None
            elif line[:6] == b"error:":  # llama.cpp (see the module docstring)
                self._event = "error"
                data.append(line[7:] if line[6:7] == b" " else line[6:])
            # comments (":"), id:, retry: and noise lines are ignored
        self.events_seen += len(out)
        return out

    @property
    def pending(self) -> bool:
        """Whether part of an event has arrived and waits for the rest (a comment or a
        keep-alive leaves nothing pending)."""
        return bool(self._buf or self._pieces or self._data)

    def close(self) -> list[SSEEvent]:
        """Flush at end of stream: a final event without its blank line still counts."""
        if self.done:
            return []
        open_line = bool(self._buf or self._pieces)
        tail = b"\n" if open_line else b""
        return self.feed(tail + b"\n") if (open_line or self._data) else []


async def iter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[SSEEvent]:
    """The events of a byte stream, stopping at ``[DONE]``."""
    parser = SSEParser()
    async for chunk in chunks:
        for event in parser.feed(chunk):
            yield event
        if parser.done:
            return
    for event in parser.close():
        yield event
