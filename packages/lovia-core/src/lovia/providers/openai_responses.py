"""OpenAI Responses API adapter (``openai-responses:`` prefix), streaming.

Requests are stateless (``store: false``): the whole view is sent as ``input`` items each
turn. Reasoning items come back whole in ``response.output_item.done``; they are emitted as
``ReasoningEntry(provider="openai-responses")`` whose ``metadata`` keeps the item ``id`` and
its ``encrypted_content`` so the next request can hand them back verbatim. Tool calls are
``function_call`` items whose arguments stream as ``response.function_call_arguments.delta``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..events import ReasoningDelta, TextDelta
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
    ConnectionOptions,
    HTTPAdapter,
    count_of,
    merge_options,
    parse_json_event,
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
from .discovery import is_official_openai_host
from .errors import stream_error
from .openai_chat import OPENAI_RULES
from .sse import SSEEvent, SSEParser

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._http import Body, Entries, Tools

__all__ = ["OpenAIResponsesProvider", "ResponsesStreamDecoder"]


class OpenAIResponsesProvider(HTTPAdapter):
    """A model behind the OpenAI Responses API (or a server implementing it)."""

    name = "openai-responses"
    rules = replace(OPENAI_RULES, example="'openai-responses:gpt-5-mini'")
    path = "/responses"
    max_tokens_field = "max_output_tokens"
    is_official_host = staticmethod(is_official_openai_host)

    def __init__(
        self,
        model: str,
        *,
        supports_json_schema: bool | None = None,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(model, **options)
        self.supports_json_schema = True if supports_json_schema is None else supports_json_schema

    def decoder(self) -> ResponsesStreamDecoder:
        """A fresh decoder for one reply."""
        return ResponsesStreamDecoder(self.model)

    def _body(self, view: Entries, tools: Tools, fmt: Body | None, s: ModelSettings) -> Body:
        """The Responses API request body for this view."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": self._items(view),
            "stream": True,
            "store": False,
        }
        if tools:
            specs = []
            for t in tools:
                spec: dict[str, Any] = {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": t.strict,
                }
                specs.append(spec)
            body["tools"] = specs
        if fmt is not None and self.supports_json_schema:
            schema = fmt.get("json_schema") or {}
            text_format: dict[str, Any] = {
                "type": "json_schema",
                "name": schema.get("name", "output"),
                "schema": schema.get("schema", {}),
            }
            if "strict" in schema:
                text_format["strict"] = schema["strict"]
            body["text"] = {"format": text_format}
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.max_tokens is not None:
            body["max_output_tokens"] = s.max_tokens
        if s.parallel_tool_calls is not None and tools:
            body["parallel_tool_calls"] = s.parallel_tool_calls
        options = s.options_for("openai", "openai-responses")
        if "reasoning" in options and "include" not in options:
            body["include"] = ["reasoning.encrypted_content"]
        return merge_options(body, options)

    def _content(self, parts: tuple[ContentPart, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, TextPart):
                out.append({"type": "input_text", "text": part.text})
            elif isinstance(part, ImagePart) and self.supports_vision:
                url = part.url or f"data:{part.mime_type};base64,{part.data}"
                out.append(
                    {"type": "input_image", "image_url": url, "detail": part.detail or "auto"}
                )
            elif isinstance(part, FilePart) and part.data is not None:
                item: dict[str, Any] = {
                    "type": "input_file",
                    "file_data": f"data:{part.mime_type};base64,{part.data}",
                }
                item["filename"] = part.filename or "file"
                out.append(item)
            else:
                out.append({"type": "input_text", "text": project_parts([part])})
        return out

    def _items(self, entries: Entries) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for e in entries:
            if isinstance(e, InputEntry):
                if e.role == "system" or isinstance(e.content, str):
                    items.append({"role": e.role, "content": text_of(e.content)})
                else:
                    items.append({"role": "user", "content": self._content(e.content)})
            elif isinstance(e, AssistantTextEntry):
                if e.content:
                    items.append({"role": "assistant", "content": e.content})
            elif isinstance(e, ReasoningEntry):
                encrypted = e.metadata.get("encrypted_content")
                item_id = e.id or e.metadata.get("item_id")
                if e.provider == self.name and item_id and encrypted:
                    summary = [{"type": "summary_text", "text": e.content}] if e.content else []
                    items.append(
                        {
                            "type": "reasoning",
                            "id": item_id,
                            "summary": summary,
                            "encrypted_content": encrypted,
                        }
                    )
            elif isinstance(e, ToolCallEntry):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": e.call_id,
                        "name": e.name,
                        "arguments": e.arguments,
                    }
                )
            elif isinstance(e, ToolResultEntry):
                items.append(
                    {"type": "function_call_output", "call_id": e.call_id, "output": e.output}
                )
                images = [p for p in e.parts or () if isinstance(p, ImagePart)]
                if images and self.supports_vision:
                    content = [
                        {"type": "input_text", "text": f"Images returned by tool call {e.call_id}:"}
                    ]
                    items.append(
                        {"role": "user", "content": content + self._content(tuple(images))}
                    )
        return items


class ResponsesStreamDecoder:
    """Responses API events to deltas (shared with the benchmark)."""

    __slots__ = ("_args_seen", "_model", "_slots", "finish_reason")

    @property
    def complete(self) -> bool:
        """``response.completed`` (or ``incomplete``) arrived."""
        return self.finish_reason is not None

    def __init__(self, model: str) -> None:
        self._model = model
        self._slots: dict[str, int] = {}  # function_call item id -> tool slot
        self._args_seen: set[int] = set()
        self.finish_reason: str | None = None

    def _slot(self, item: Mapping[str, Any], output_index: Any) -> int:
        key = str(item.get("id") or item.get("call_id") or output_index)
        if key not in self._slots:
            self._slots[key] = len(self._slots)
        return self._slots[key]

    def handle(self, event: SSEEvent, out: list[ModelDelta]) -> None:
        """Append the deltas of one event to ``out``."""
        obj = parse_json_event(event.data, vendor="openai-responses", model=self._model)
        if not isinstance(obj, dict):
            return
        kind = obj.get("type") or event.event
        delta = obj.get("delta")
        if kind == "response.output_text.delta":
            if delta and isinstance(delta, str):
                out.append(TextDelta(delta))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if delta and isinstance(delta, str):
                out.append(ReasoningDelta(delta))
        elif kind == "response.function_call_arguments.delta":
            slot = self._slots.get(str(obj.get("item_id")))
            if slot is not None and delta and isinstance(delta, str):
                self._args_seen.add(slot)
                out.append(ToolCallDelta(slot, arguments=delta))
        elif kind == "response.output_item.added":
            item = obj.get("item") or {}
            if item.get("type") == "function_call":
                slot = self._slot(item, obj.get("output_index"))
                out.append(
                    ToolCallDelta(slot, item.get("call_id") or item.get("id"), item.get("name"))
                )
        elif kind == "response.output_item.done":
            self._item_done(obj.get("item") or {}, obj.get("output_index"), out)
        elif kind in ("response.completed", "response.incomplete"):
            self._completed(obj.get("response") or {}, out)
        elif kind in ("response.failed", "error"):
            payload = (obj.get("response") or {}).get("error") if kind == "response.failed" else obj
            raise stream_error(
                {"error": payload or obj}, vendor="openai-responses", model=self._model
            )
        # other events (created, in_progress, content_part.*, *.done duplicates) carry nothing new

    def _item_done(self, item: Mapping[str, Any], output_index: Any, out: list[ModelDelta]) -> None:
        kind = item.get("type")
        if kind == "function_call":
            slot = self._slot(item, output_index)
            if slot not in self._args_seen:
                self._args_seen.add(slot)
                out.append(ToolCallDelta(slot, arguments=item.get("arguments") or "{}"))
        elif kind == "reasoning":
            summary = item.get("summary") or []
            text = "".join(s.get("text", "") for s in summary if isinstance(s, dict))
            if not text:
                text = "".join(
                    c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)
                )
            metadata: dict[str, Any] = {"item_id": item.get("id")}
            if item.get("encrypted_content"):
                metadata["encrypted_content"] = item["encrypted_content"]
            entry = ReasoningEntry(
                text, id=item.get("id"), provider="openai-responses", metadata=metadata
            )
            out.append(EntryCompletedDelta(entry))

    def _completed(self, response: Mapping[str, Any], out: list[ModelDelta]) -> None:
        usage = response.get("usage")
        if isinstance(usage, dict):
            details = usage.get("input_tokens_details") or {}
            out.append(
                UsageDelta(
                    Usage(
                        input_tokens=count_of(usage.get("input_tokens")),
                        output_tokens=count_of(usage.get("output_tokens")),
                        cache_read_tokens=count_of(details.get("cached_tokens")),
                    )
                )
            )
        if response.get("status") == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            self.finish_reason = "content_filter" if reason == "content_filter" else "length"
        else:
            self.finish_reason = "tool_calls" if self._slots else "stop"

    def finish(self, parser: SSEParser) -> FinishDelta:
        """The final delta, or a retryable error when ``response.completed`` never came."""
        if self.finish_reason is None:
            raise truncated("openai-responses", self._model, empty=parser.events_seen == 0)
        return FinishDelta(self.finish_reason)
