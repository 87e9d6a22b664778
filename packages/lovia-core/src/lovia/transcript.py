"""The canonical transcript: a discriminated union of immutable entries.

Invariants this module owns:

* The transcript is append-only and is the source of truth; ``Message`` is a lossy view.
* Tool calls and results pair by ``call_id``, never by position. Every consumer (providers,
  the context policy, ``safe_window``) must keep each ``ToolResultEntry`` with its
  ``ToolCallEntry``; a view never holds an orphan result.
* (De)serialisation is strict: an unknown ``type`` or an unknown field raises
  ``ValueError`` instead of being guessed at.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import PurePath
from typing import Any, Literal, Union

from .messages import AssistantTurn, Message, ToolCall
from .parts import ContentPart, FilePart, ImagePart, TextPart, normalize_content, text_of

__all__ = [
    "AssistantTextEntry",
    "InputEntry",
    "ReasoningEntry",
    "ToolCallEntry",
    "ToolResultEntry",
    "TranscriptEntry",
    "assistant_to_entries",
    "drop_dangling_tool_calls",
    "dumps_entries",
    "entries_to_messages",
    "entry_from_dict",
    "entry_to_dict",
    "input_to_entries",
    "leading_system_count",
    "messages_to_entries",
    "safe_window",
    "split_system",
    "to_json_safe",
]

Content = Union[str, tuple[ContentPart, ...]]


@dataclass(frozen=True, slots=True)
class InputEntry:
    """A system or user input (``role``), text or typed parts."""

    role: Literal["system", "user"]
    content: Content
    type: Literal["input"] = "input"


@dataclass(frozen=True, slots=True)
class AssistantTextEntry:
    """Text the assistant produced. ``id`` is the provider's item id, when it has one."""

    content: str
    id: str | None = None
    type: Literal["assistant_text"] = "assistant_text"


@dataclass(frozen=True, slots=True)
class ReasoningEntry:
    """Reasoning (thinking) the provider returned.

    ``provider`` names the adapter that produced it, so it is replayed only to the same
    vendor; ``metadata`` holds what that vendor needs to accept it back (a thinking
    ``signature``, ``redacted`` data, an encrypted reasoning item).
    """

    content: str
    id: str | None = None
    provider: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallEntry:
    """A tool call; ``arguments`` is the model's JSON text, kept byte for byte."""

    call_id: str
    name: str
    arguments: str = "{}"
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultEntry:
    """The result of the call with the same ``call_id``.

    ``output`` is the string the model sees; ``raw`` is the tool's Python value (dropped for
    large or truncated outputs); ``parts`` carries images or files a tool returned, with
    ``output`` as their text projection.
    """

    call_id: str
    output: str
    raw: Any = None
    is_error: bool = False
    parts: tuple[ContentPart, ...] | None = None
    type: Literal["tool_result"] = "tool_result"
    metadata: dict[str, Any] | None = field(default=None, compare=False)
    """Not part of any view: for the developer (``{"error": {type, message, traceback}}``
    when the tool raised). Excluded from equality."""


TranscriptEntry = Union[
    InputEntry, AssistantTextEntry, ReasoningEntry, ToolCallEntry, ToolResultEntry
]
"""One entry of the canonical transcript."""

_ENTRY_TYPES: dict[str, type[Any]] = {
    "input": InputEntry,
    "assistant_text": AssistantTextEntry,
    "reasoning": ReasoningEntry,
    "tool_call": ToolCallEntry,
    "tool_result": ToolResultEntry,
}
_FIELDS: dict[str, frozenset[str]] = {
    name: frozenset(f.name for f in dataclasses.fields(cls)) for name, cls in _ENTRY_TYPES.items()
}
_PART_TYPES: dict[str, type[Any]] = {"text": TextPart, "image": ImagePart, "file": FilePart}


# -- serialisation -----------------------------------------------------------------------


def to_json_safe(value: Any) -> Any:
    """``value`` as JSON-compatible data (pydantic models, dataclasses, enums, dates, paths).

    Raises ``TypeError`` for anything it cannot represent.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): to_json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json_safe(v) for v in value]
    if isinstance(value, enum.Enum):
        return to_json_safe(value.value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, bytes):
        raise TypeError("bytes are not JSON-safe")
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_safe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON-safe")


def _part_to_dict(part: ContentPart) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(part).items() if v is not None}


def _part_from_dict(data: Any) -> ContentPart:
    if not isinstance(data, dict):
        raise ValueError(f"a content part must be an object, got {type(data).__name__}")
    kind = data.get("type")
    cls = _PART_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown content part type {kind!r}")
    allowed = {f.name for f in dataclasses.fields(cls)}
    extra = set(data) - allowed
    if extra:
        raise ValueError(f"unknown fields for a {kind} part: {sorted(extra)}")
    part: ContentPart = cls(**data)
    return part


def entry_to_dict(entry: TranscriptEntry) -> dict[str, Any]:
    """A JSON-safe dict with a ``type`` discriminator.

    A tool result's ``raw`` is kept only when it is JSON-safe, and ``parts`` only when present.
    """
    if isinstance(entry, InputEntry):
        content: Any = (
            entry.content
            if isinstance(entry.content, str)
            else [_part_to_dict(p) for p in entry.content]
        )
        return {"type": "input", "role": entry.role, "content": content}
    if isinstance(entry, AssistantTextEntry):
        out: dict[str, Any] = {"type": "assistant_text", "content": entry.content}
        if entry.id is not None:
            out["id"] = entry.id
        return out
    if isinstance(entry, ReasoningEntry):
        out = {"type": "reasoning", "content": entry.content}
        if entry.id is not None:
            out["id"] = entry.id
        if entry.provider is not None:
            out["provider"] = entry.provider
        if entry.metadata:
            out["metadata"] = to_json_safe(entry.metadata)
        return out
    if isinstance(entry, ToolCallEntry):
        return {
            "type": "tool_call",
            "call_id": entry.call_id,
            "name": entry.name,
            "arguments": entry.arguments,
        }
    out = {"type": "tool_result", "call_id": entry.call_id, "output": entry.output}
    if entry.is_error:
        out["is_error"] = True
    if entry.raw is not None:
        try:
            out["raw"] = to_json_safe(entry.raw)
        except TypeError:
            pass  # raw is a convenience copy; the output string is the record
    if entry.parts is not None:
        out["parts"] = [_part_to_dict(p) for p in entry.parts]
    if entry.metadata:
        out["metadata"] = to_json_safe(entry.metadata)
    return out


def entry_from_dict(data: Any) -> TranscriptEntry:
    """Rebuild an entry; raises ``ValueError`` for an unknown type or field."""
    if not isinstance(data, dict):
        raise ValueError(f"an entry must be an object, got {type(data).__name__}")
    kind = data.get("type")
    cls = _ENTRY_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown transcript entry type {kind!r}")
    extra = set(data) - _FIELDS[kind]  # type: ignore[index]  # kind is a str key here
    if extra:
        raise ValueError(f"unknown fields for a {kind} entry: {sorted(extra)}")
    kwargs = {k: v for k, v in data.items() if k != "type"}
    try:
        if cls is InputEntry:
            content = kwargs.get("content")
            if isinstance(content, list):
                kwargs["content"] = tuple(_part_from_dict(p) for p in content)
            elif not isinstance(content, str):
                raise ValueError("input content must be a string or a list of parts")
            if kwargs.get("role") not in ("system", "user"):
                raise ValueError(f"unknown input role {kwargs.get('role')!r}")
        elif cls is ToolResultEntry and kwargs.get("parts") is not None:
            kwargs["parts"] = tuple(_part_from_dict(p) for p in kwargs["parts"])
        entry: TranscriptEntry = cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"malformed {kind} entry: {exc}") from exc
    _check_field_types(entry)
    return entry


def _check_field_types(entry: TranscriptEntry) -> None:
    if isinstance(entry, ToolCallEntry):
        ok = (
            isinstance(entry.call_id, str)
            and isinstance(entry.name, str)
            and isinstance(entry.arguments, str)
        )
    elif isinstance(entry, ToolResultEntry):
        ok = (
            isinstance(entry.call_id, str)
            and isinstance(entry.output, str)
            and isinstance(entry.is_error, bool)
        )
    elif isinstance(entry, (AssistantTextEntry, ReasoningEntry)):
        ok = isinstance(entry.content, str)
    else:
        ok = True
    if not ok:
        raise ValueError(f"malformed {entry.type} entry: a field has the wrong type")


# -- conversions -------------------------------------------------------------------------


def input_to_entries(
    value: str | Sequence[Message | TranscriptEntry],
) -> list[TranscriptEntry]:
    """Run input as entries: a string is one user entry; messages convert; entries pass."""
    if isinstance(value, str):
        return [InputEntry("user", value)]
    out: list[TranscriptEntry] = []
    for item in value:
        if isinstance(item, Message):
            out.extend(messages_to_entries([item]))
        elif isinstance(item, tuple(_ENTRY_TYPES.values())):
            out.append(item)
        else:
            raise TypeError(f"cannot use {type(item).__name__} as run input")
    return out


def messages_to_entries(messages: Iterable[Message]) -> list[TranscriptEntry]:
    """Chat messages as canonical entries."""
    out: list[TranscriptEntry] = []
    for m in messages:
        if m.role == "system" or m.role == "user":
            content = m.content if isinstance(m.content, str) else normalize_content(m.content)
            out.append(InputEntry(m.role, content))
        elif m.role == "assistant":
            if m.reasoning:
                out.append(ReasoningEntry(m.reasoning))
            text = text_of(m.content)
            if text:
                out.append(AssistantTextEntry(text))
            out.extend(ToolCallEntry(c.id, c.name, c.arguments) for c in m.tool_calls)
        else:
            out.append(ToolResultEntry(m.tool_call_id or "", text_of(m.content)))
    return out


def assistant_to_entries(
    turn: AssistantTurn, *, provider: str | None = None
) -> list[TranscriptEntry]:
    """A complete assistant turn as entries: reasoning, then text, then tool calls."""
    out: list[TranscriptEntry] = []
    if turn.reasoning:
        out.append(ReasoningEntry(turn.reasoning, provider=provider))
    if turn.content:
        out.append(AssistantTextEntry(turn.content))
    out.extend(ToolCallEntry(c.id, c.name, c.arguments) for c in turn.tool_calls)
    return out


def entries_to_messages(entries: Iterable[TranscriptEntry]) -> list[Message]:
    """The lossy chat view: consecutive assistant pieces fold into one message."""
    out: list[Message] = []
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []

    def flush() -> None:
        if text or reasoning or calls:
            out.append(
                Message(
                    "assistant",
                    "".join(text),
                    reasoning="".join(reasoning) or None,
                    tool_calls=tuple(calls),
                )
            )
            text.clear()
            reasoning.clear()
            calls.clear()

    for e in entries:
        if isinstance(e, ReasoningEntry):
            if text or calls:
                flush()
            reasoning.append(e.content)
        elif isinstance(e, AssistantTextEntry):
            if calls:
                flush()
            text.append(e.content)
        elif isinstance(e, ToolCallEntry):
            calls.append(ToolCall(e.call_id, e.name, e.arguments))
        else:
            flush()
            if isinstance(e, InputEntry):
                out.append(Message(e.role, e.content))
            else:
                out.append(Message("tool", e.output, tool_call_id=e.call_id))
    flush()
    return out


def leading_system_count(entries: Sequence[TranscriptEntry]) -> int:
    """How many system inputs open the transcript (the system head)."""
    n = 0
    for e in entries:
        if isinstance(e, InputEntry) and e.role == "system":
            n += 1
        else:
            break
    return n


def split_system(
    entries: Sequence[TranscriptEntry],
) -> tuple[list[InputEntry], list[TranscriptEntry]]:
    """The leading system inputs and the rest."""
    n = leading_system_count(entries)
    head = [e for e in entries[:n] if isinstance(e, InputEntry)]
    return head, list(entries[n:])


# -- pair-safe slicing -------------------------------------------------------------------


def safe_window(
    entries: Sequence[TranscriptEntry], *, head: int = 0, tail: int
) -> list[TranscriptEntry]:
    """Keep the first ``head`` and last ``tail`` entries without orphaning a tool result.

    The tail's cut walks back until every result in the tail has its call in the kept
    entries (a fixed point); results whose call is gone entirely are dropped. Negative and
    oversized arguments are clamped.
    """
    n = len(entries)
    head = max(0, min(head, n))
    tail = max(0, min(tail, n - head))
    start = max(n - tail, head)
    call_pos: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        if isinstance(e, ToolCallEntry):
            call_pos.setdefault(e.call_id, []).append(i)
    while True:
        needed = start
        for i in range(start, n):
            e = entries[i]
            if isinstance(e, ToolResultEntry):
                positions = [p for p in call_pos.get(e.call_id, ()) if p < i]
                if positions and positions[-1] < needed and positions[-1] >= head:
                    needed = positions[-1]
        if needed == start:
            break
        start = needed
    kept = list(entries[:head]) + list(entries[start:])
    present = {e.call_id for e in kept if isinstance(e, ToolCallEntry)}
    return [e for e in kept if not (isinstance(e, ToolResultEntry) and e.call_id not in present)]


def drop_dangling_tool_calls(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """Drop trailing tool calls that have no result; resolved pairs are kept."""
    out = list(entries)
    resolved = {e.call_id for e in out if isinstance(e, ToolResultEntry)}
    while out and isinstance(out[-1], ToolCallEntry) and out[-1].call_id not in resolved:
        out.pop()
    # Calls of the last assistant turn may be followed by some of their results; drop the
    # unresolved ones among that trailing group too.
    i = len(out)
    while i > 0 and isinstance(out[i - 1], (ToolCallEntry, ToolResultEntry)):
        i -= 1
    tail = [e for e in out[i:] if not (isinstance(e, ToolCallEntry) and e.call_id not in resolved)]
    return out[:i] + tail


def dumps_entries(entries: Iterable[TranscriptEntry]) -> str:
    """Entries as a JSON array (internal helper for stores)."""
    return json.dumps(
        [entry_to_dict(e) for e in entries], ensure_ascii=False, separators=(",", ":")
    )
