"""Anthropic Messages API adapter (streaming).

Mapping rules:

* Leading system inputs become the ``system`` blocks; later system inputs become user text.
* Tool calls are ``tool_use`` blocks (arguments that are not a JSON object are wrapped as
  ``{"value": ...}``, unparsable text as ``{"raw": ...}``); results are ``tool_result``
  blocks with ``is_error``, carrying image blocks when the model has vision.
* Files: PDFs (base64 or URL) and text documents become ``document`` blocks; other mime
  types, invalid UTF-8 text and non-PDF URLs raise ``UserError``.
* Thinking and ``redacted_thinking`` round-trip through ``ReasoningEntry`` (``provider=
  "anthropic"``, ``metadata={"signature": ...}`` or ``{"redacted": data}``); reasoning from
  other adapters or without a signature is dropped. On the official host, thinking blocks
  are sent back only when thinking is enabled in ``provider_options``.
* ``cache_system=True`` puts ephemeral cache breakpoints on the last system block and the
  last tool. ``pause_turn`` is passed through as the finish reason.
* ``temperature``/``top_p`` are sent to gateways only: the official API version this adapter
  targets has no sampling parameters.
* ``base_url`` (or ``ANTHROPIC_BASE_URL``) may be the host root, as the Anthropic SDK wants
  it, or end in ``/v1``, as gateways document it: both reach ``/v1/messages``.
* Gateways that send whole blocks (a ``tool_use`` with its ``input`` at block start, text in
  ``content_block_start``) are accepted.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from ..events import ReasoningDelta, TextDelta
from ..exceptions import UserError
from ..messages import Usage
from ..parts import ContentPart, FilePart, ImagePart, TextPart, project_parts, text_of
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
)
from ._http import (
    AdapterRules,
    ConnectionOptions,
    HTTPAdapter,
    count_of,
    merge_options,
    parse_json_event,
    stop_list,
    truncated,
)
from .base import (
    EntryCompletedDelta,
    FinishDelta,
    ModelDelta,
    ModelSettings,
    ToolCallDelta,
    UsageDelta,
)
from .errors import stream_error
from .sse import SSEEvent, SSEParser

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._http import Body, Entries, Tools

__all__ = [
    "ANTHROPIC_RULES",
    "AnthropicProvider",
    "DEFAULT_ANTHROPIC_BASE_URL",
    "MessagesStreamDecoder",
]

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Where ``AnthropicProvider`` goes without ``base_url=`` or ``ANTHROPIC_BASE_URL``."""

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
    "pause_turn": "pause_turn",
    "model_context_window_exceeded": "length",
}
_OFFICIAL_HOST = "api.anthropic.com"


ANTHROPIC_RULES = AdapterRules(
    base_url_env="ANTHROPIC_BASE_URL",
    default_base_url=DEFAULT_ANTHROPIC_BASE_URL,
    key_env="ANTHROPIC_API_KEY",
    key_header="x-api-key",
    key_prefix="",
    authorising=("x-api-key", "authorization"),
    missing_key_hint="set ANTHROPIC_API_KEY or pass api_key=; "
    "for a gateway set base_url= (or ANTHROPIC_BASE_URL)",
    example="AnthropicProvider('claude-sonnet-4-5')",
)


class AnthropicProvider(HTTPAdapter):
    """A Claude model behind the Messages API (or a gateway speaking it).

    ``base_url`` is the host root or the same with ``/v1`` (both are accepted).
    """

    name = "anthropic"
    rules = ANTHROPIC_RULES
    api_root = "/v1"
    path = "/messages"
    vision_by_default = True  # Claude models all accept images; gateways in front of them too
    supports_json_schema = False

    def __init__(
        self,
        model: str,
        *,
        anthropic_version: str = "2023-06-01",
        default_max_tokens: int = 16_384,
        official_dialect: bool | None = None,
        cache_system: bool = False,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(model, fixed_headers={"anthropic-version": anthropic_version}, **options)
        official = self.official_host
        self.official_dialect = official if official_dialect is None else official_dialect
        self.default_max_tokens = default_max_tokens
        self.cache_system = cache_system

    @staticmethod
    def is_official_host(host: str) -> bool:
        """``api.anthropic.com``."""
        return host == _OFFICIAL_HOST

    # -- request -----------------------------------------------------------------------

    def decoder(self) -> MessagesStreamDecoder:
        """A fresh decoder for one reply."""
        return MessagesStreamDecoder(self.model)

    def _body(self, view: Entries, tools: Tools, fmt: Body | None, s: ModelSettings) -> Body:
        """The Messages API request body for this view (``response_format`` is not native)."""
        options = s.options_for("claude", "anthropic")
        thinking = options.get("thinking")
        keep_thinking = not self.official_dialect or (
            isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
        )
        system, messages = self._messages(view, keep_thinking=keep_thinking)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": s.max_tokens if s.max_tokens is not None else self.default_max_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            if self.cache_system:
                system[-1]["cache_control"] = {"type": "ephemeral"}
            body["system"] = system
        if tools:
            specs: list[dict[str, Any]] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
            if self.cache_system:
                specs[-1]["cache_control"] = {"type": "ephemeral"}
            body["tools"] = specs
            if s.parallel_tool_calls is False:
                body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        if not self.official_dialect:
            # The current Messages API has no sampling knobs (the SDK's request type lists
            # none); gateways in front of other models still take them.
            if s.temperature is not None:
                body["temperature"] = s.temperature
            if s.top_p is not None:
                body["top_p"] = s.top_p
        if s.stop is not None:
            body["stop_sequences"] = stop_list(s.stop)
        return merge_options(body, options)

    def _messages(
        self, entries: Entries, *, keep_thinking: bool
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        system: list[dict[str, Any]] = []
        messages: list[dict[str, Any]] = []
        leading = True

        def add(role: str, block: dict[str, Any]) -> None:
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": role, "content": [block]})

        pending_thinking: list[dict[str, Any]] = []
        for e in entries:
            if isinstance(e, InputEntry):
                pending_thinking.clear()
                if e.role == "system" and leading:
                    system.append({"type": "text", "text": text_of(e.content)})
                    continue
                if e.role == "system":
                    add("user", {"type": "text", "text": text_of(e.content)})
                else:
                    for block in self._blocks(e.content):
                        add("user", block)
                leading = False
                continue
            leading = False
            if isinstance(e, ReasoningEntry):
                thinking = _thinking_block(e) if keep_thinking else None
                if thinking is not None:
                    pending_thinking.append(thinking)
            elif isinstance(e, AssistantTextEntry):
                for block in pending_thinking:
                    add("assistant", block)
                pending_thinking.clear()
                if e.content:
                    add("assistant", {"type": "text", "text": e.content})
            elif isinstance(e, ToolCallEntry):
                for block in pending_thinking:
                    add("assistant", block)
                pending_thinking.clear()
                add(
                    "assistant",
                    {
                        "type": "tool_use",
                        "id": e.call_id,
                        "name": e.name,
                        "input": _tool_input(e.arguments),
                    },
                )
            else:
                pending_thinking.clear()  # thinking with nothing after it is an orphan
                add("user", self._tool_result(e))
        for message in messages:  # a lone text block is sent as a plain string
            content = message["content"]
            if len(content) == 1 and content[0]["type"] == "text" and len(content[0]) == 2:
                message["content"] = content[0]["text"]
        return system, messages

    def _tool_result(self, e: ToolResultEntry) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": e.call_id}
        images = [p for p in e.parts or () if isinstance(p, ImagePart)]
        if images and self.supports_vision:
            content: list[dict[str, Any]] = []
            for part in e.parts or ():
                if isinstance(part, ImagePart):
                    content.append(_image_block(part))
                else:
                    text = part.text if isinstance(part, TextPart) else project_parts([part])
                    if text:
                        content.append({"type": "text", "text": text})
            block["content"] = content
        else:
            block["content"] = e.output
        if e.is_error:
            block["is_error"] = True
        return block

    def _blocks(self, content: str | tuple[ContentPart, ...]) -> list[dict[str, Any]]:
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        out: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, TextPart):
                if part.text:
                    out.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                if self.supports_vision:
                    out.append(_image_block(part))
                else:
                    out.append({"type": "text", "text": project_parts([part])})
            else:
                out.append(_document_block(part))
        return out


def _thinking_block(e: ReasoningEntry) -> dict[str, Any] | None:
    if e.provider != "anthropic":
        return None
    redacted = e.metadata.get("redacted")
    if isinstance(redacted, str) and redacted:
        return {"type": "redacted_thinking", "data": redacted}
    signature = e.metadata.get("signature")
    if isinstance(signature, str) and signature:
        return {"type": "thinking", "thinking": e.content, "signature": signature}
    return None


def _text(value: Any) -> str:
    """A text field of a stream event; anything but a string (``null`` included) is empty."""
    return value if isinstance(value, str) else ""


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"raw": arguments}
    return value if isinstance(value, dict) else {"value": value}


def _image_block(part: ImagePart) -> dict[str, Any]:
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
    }


def _document_block(part: FilePart) -> dict[str, Any]:
    mime = (part.mime_type or "").lower()
    if part.url is not None:
        if mime == "application/pdf" or (
            not mime and part.url.lower().split("?", 1)[0].endswith(".pdf")
        ):
            block: dict[str, Any] = {"type": "document", "source": {"type": "url", "url": part.url}}
        else:
            raise UserError(
                f"Anthropic accepts only PDF documents by URL, got {part.url!r}",
                hint="download the file and pass it as FilePart data, or link a PDF",
            )
    elif mime == "application/pdf":
        block = {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": part.data},
        }
    elif mime.startswith("text/"):
        try:
            text = base64.b64decode(part.data or "").decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise UserError(
                f"document {part.filename or ''!r} ({mime}) is not valid UTF-8 text",
                hint="send binary documents as PDF or convert them to text first",
            ) from exc
        block = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
        }
    else:
        raise UserError(
            f"Anthropic does not accept {mime or 'untyped'!r} documents",
            hint="send PDFs or text/* files, or convert the document to text",
        )
    if part.filename:
        block["title"] = part.filename
    return block


class MessagesStreamDecoder:
    """Messages API events to deltas (shared with the benchmark)."""

    __slots__ = ("_blocks", "_model", "_slots", "complete", "finish_reason", "usage")

    def __init__(self, model: str) -> None:
        self._model = model
        # per content-block index: [kind, text or json buffer, signature, tool slot, had deltas]
        self._blocks: dict[int, list[Any]] = {}
        self._slots = 0
        self.usage = Usage()
        self.finish_reason: str | None = None
        self.complete = False

    def handle(self, event: SSEEvent, out: list[ModelDelta]) -> None:
        """Append the deltas of one event to ``out``."""
        obj = parse_json_event(event.data, vendor="anthropic", model=self._model)
        if not isinstance(obj, dict):
            return
        kind = obj.get("type") or event.event
        if kind == "content_block_delta":
            self._delta(obj, out)
        elif kind == "content_block_start":
            self._start(obj, out)
        elif kind == "content_block_stop":
            self._stop(obj, out)
        elif kind == "message_start":
            self._usage((obj.get("message") or {}).get("usage"), out)
        elif kind == "message_delta":
            reason = (obj.get("delta") or {}).get("stop_reason")
            if reason:
                self.finish_reason = _FINISH.get(reason, reason)
            self._usage(obj.get("usage"), out)
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            raise stream_error(obj, vendor="anthropic", model=self._model)
        # ping and unknown event types are ignored, as the API documents

    def _usage(self, usage: Any, out: list[ModelDelta]) -> None:
        if not isinstance(usage, dict):
            return
        u = self.usage
        read = usage.get("cache_read_input_tokens")
        write = usage.get("cache_creation_input_tokens")
        if read is not None:
            u.cache_read_tokens = count_of(read)
        if write is not None:
            u.cache_write_tokens = count_of(write)
        if usage.get("input_tokens") is not None:
            # input_tokens excludes cached tokens; Usage.input_tokens is the full prompt
            u.input_tokens = (
                count_of(usage["input_tokens"]) + u.cache_read_tokens + u.cache_write_tokens
            )
        if usage.get("output_tokens") is not None:
            u.output_tokens = count_of(usage["output_tokens"])
        out.append(UsageDelta(u.copy()))

    def _start(self, obj: dict[str, Any], out: list[ModelDelta]) -> None:
        index = obj.get("index", len(self._blocks))
        block = obj.get("content_block") or {}
        kind = block.get("type")
        if kind == "text":
            self._blocks[index] = ["text", "", "", None, False]
            text = _text(block.get("text"))
            if text:
                out.append(TextDelta(text))
        elif kind == "thinking":
            thinking = _text(block.get("thinking"))
            self._blocks[index] = ["thinking", thinking, _text(block.get("signature")), None, False]
            if thinking:
                out.append(ReasoningDelta(thinking))
        elif kind == "redacted_thinking":
            self._blocks[index] = ["redacted", "", "", None, False]
            entry = ReasoningEntry(
                "", provider="anthropic", metadata={"redacted": _text(block.get("data"))}
            )
            out.append(EntryCompletedDelta(entry))
        elif kind == "tool_use":
            slot = self._slots
            self._slots += 1
            initial = block.get("input")
            start = json.dumps(initial, ensure_ascii=False) if initial else ""
            self._blocks[index] = ["tool", start, "", slot, False]
            out.append(ToolCallDelta(slot, block.get("id"), block.get("name")))
        else:
            self._blocks[index] = ["other", "", "", None, False]

    def _delta(self, obj: dict[str, Any], out: list[ModelDelta]) -> None:
        delta = obj.get("delta") or {}
        kind = delta.get("type")
        state = self._blocks.get(obj.get("index", -1))
        if kind == "text_delta":
            text = _text(delta.get("text"))
            if text:
                out.append(TextDelta(text))
        elif kind == "input_json_delta":
            if state is not None and state[0] == "tool":
                state[4] = True
                fragment = _text(delta.get("partial_json"))
                if fragment:
                    out.append(ToolCallDelta(state[3], arguments=fragment))
        elif kind == "thinking_delta":
            text = _text(delta.get("thinking"))
            if state is not None:
                state[1] += text
            if text:
                out.append(ReasoningDelta(text))
        elif kind == "signature_delta" and state is not None:
            state[2] += _text(delta.get("signature"))

    def _stop(self, obj: dict[str, Any], out: list[ModelDelta]) -> None:
        state = self._blocks.get(obj.get("index", -1))
        if state is None:
            return
        if state[0] == "thinking":
            metadata = {"signature": state[2]} if state[2] else {}
            out.append(
                EntryCompletedDelta(
                    ReasoningEntry(state[1], provider="anthropic", metadata=metadata)
                )
            )
        elif state[0] == "tool" and not state[4]:
            # a complete block (gateway style) or a call without arguments
            out.append(ToolCallDelta(state[3], arguments=state[1] or "{}"))

    def finish(self, parser: SSEParser) -> FinishDelta:
        """The final delta, or a retryable error when ``message_stop`` never came."""
        if not self.complete:
            raise truncated("anthropic", self._model, empty=parser.events_seen == 0)
        return FinishDelta(self.finish_reason or "stop")
