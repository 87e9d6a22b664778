"""A chat as a downloadable file: Markdown, plain text or JSON.

``export_session(meta, entries, fmt)`` renders a transcript and names the file:

* ``md``: a ``## User`` / ``## Assistant`` section per speaker. Reasoning is a blockquote
  (nothing when the chat has none); a tool call shows its name and JSON arguments, and its
  result is attributed to the tool that was called (paired by ``call_id``, never by
  position). Code fences grow longer than any backtick run inside them, so no content can
  close its fence early.
* ``txt``: the same, without markup.
* ``json``: an envelope ``{"session": {...metadata}, "entries": [...]}``, the entries as
  ``lovia.transcript.entry_to_dict`` writes them (images and files keep their data).

Whatever the transcript holds, the file is valid UTF-8: control characters other than tab and
newline become U+FFFD in the text formats, and unpaired surrogates are replaced in all three.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from lovia.parts import FilePart, ImagePart, TextPart
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    TranscriptEntry,
    entry_to_dict,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .store.base import ChatMeta

__all__ = ["ExportFormat", "ExportedFile", "export_filename", "export_session"]

ExportFormat = Literal["md", "json", "txt"]

_MEDIA_TYPES = {
    "md": "text/markdown; charset=utf-8",
    "txt": "text/plain; charset=utf-8",
    "json": "application/json",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BACKTICKS = re.compile(r"`+")


@dataclass(frozen=True, slots=True)
class ExportedFile:
    """A rendered export: its bytes, media type, download name and an ASCII fallback name."""

    body: bytes
    media_type: str
    filename: str
    ascii_filename: str

    @property
    def content_disposition(self) -> str:
        """``attachment`` with the ASCII ``filename`` and the RFC 5987 UTF-8 ``filename*``."""
        return (
            f'attachment; filename="{self.ascii_filename}"; '
            f"filename*=UTF-8''{quote(self.filename, safe='')}"
        )


def export_filename(meta: ChatMeta, fmt: str, *, ascii_only: bool = False) -> str:
    """A file name from the chat's title (letters of any script kept, or ASCII only; path
    characters and controls dropped; at most 60 characters); ``chat-<id>`` when nothing is
    left."""
    title = unicodedata.normalize("NFKD", meta.title) if ascii_only else meta.title
    kept = "".join(
        ch if (ch.isascii() or not ascii_only) and (ch.isalnum() or ch in "-_.") else " "
        for ch in title
        if not (ascii_only and unicodedata.combining(ch))
    )
    stem = "-".join(kept.split()).strip(".-_")[:60].rstrip(".-_")
    return f"{stem or 'chat-' + meta.id}.{fmt}"


def _clean(text: str) -> str:
    return _CONTROL.sub("\ufffd", text)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


def _fence(text: str, info: str = "") -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _content_text(content: str | tuple[object, ...], *, markdown: bool) -> str:
    if isinstance(content, str):
        return content
    pieces = []
    for part in content:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ImagePart):
            label = f"[image: {part.mime_type or part.url or 'image'}]"
            pieces.append(f"*{label}*" if markdown else label)
        elif isinstance(part, FilePart):
            label = f"[file: {part.filename or part.mime_type or 'file'}]"
            pieces.append(f"*{label}*" if markdown else label)
    return "\n\n".join(pieces)


def _arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except (ValueError, RecursionError):
        return arguments


def _speaker(entry: TranscriptEntry) -> str:
    if isinstance(entry, InputEntry):
        return "System" if entry.role == "system" else "User"
    return "Assistant"


def _render(meta: ChatMeta, entries: Sequence[TranscriptEntry], *, markdown: bool) -> str:
    tools = {e.call_id: e.name for e in entries if isinstance(e, ToolCallEntry)}
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(meta.created_at))
    title = _clean(" ".join(meta.title.split())) or meta.id
    if markdown:
        out = [f"# {title}", f"*Chat `{meta.id}` with `{meta.agent}`, started {when}.*"]
    else:
        out = [
            title,
            "=" * min(len(title), 60),
            f"Chat {meta.id} with {meta.agent}, started {when}.",
        ]
    speaker = None
    for entry in entries:
        if _speaker(entry) != speaker:
            speaker = _speaker(entry)
            out.append(f"## {speaker}" if markdown else f"--- {speaker} ---")
        if isinstance(entry, InputEntry):
            out.append(_clean(_content_text(entry.content, markdown=markdown)))
        elif isinstance(entry, AssistantTextEntry):
            out.append(_clean(entry.content))
        elif isinstance(entry, ReasoningEntry):
            text = _clean(entry.content).strip()
            if not text:
                continue
            if markdown:
                out.append(
                    "\n".join(["> **Reasoning**", ">"] + [f"> {ln}" for ln in text.splitlines()])
                )
            else:
                out.append("[reasoning]\n" + "\n".join(f"  {ln}" for ln in text.splitlines()))
        elif isinstance(entry, ToolCallEntry):
            args = _clean(_arguments(entry.arguments))
            if markdown:
                out.append(f"**Tool call:** `{_clean(entry.name)}`\n\n{_fence(args, 'json')}")
            else:
                out.append(f"[tool call: {_clean(entry.name)}]\n{args}")
        else:
            name = _clean(tools.get(entry.call_id, "unknown tool"))
            label = "Tool error" if entry.is_error else "Tool result"
            output = _clean(entry.output)
            images = sum(isinstance(p, ImagePart) for p in entry.parts or ())
            if images:
                output += f"\n[{images} image(s)]"
            if markdown:
                out.append(f"**{label}** from `{name}`:\n\n{_fence(output)}")
            else:
                out.append(f"[{label.lower()}: {name}]\n{output}")
    return "\n\n".join(out) + "\n"


def export_session(
    meta: ChatMeta, entries: Sequence[TranscriptEntry], fmt: ExportFormat
) -> ExportedFile:
    """Render the chat in ``fmt`` (see the module docstring)."""
    if fmt == "json":
        envelope = {"session": asdict(meta), "entries": [entry_to_dict(e) for e in entries]}
        body = _utf8(json.dumps(envelope, ensure_ascii=False, indent=2))
    else:
        body = _utf8(_render(meta, entries, markdown=fmt == "md"))
    return ExportedFile(
        body,
        _MEDIA_TYPES[fmt],
        export_filename(meta, fmt),
        export_filename(meta, fmt, ascii_only=True),
    )
