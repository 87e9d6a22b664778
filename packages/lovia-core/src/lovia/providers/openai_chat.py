"""OpenAI Chat Completions adapter (the official API and compatible servers).

Dialects are chosen by host. The official API (``api.openai.com`` and its regional hosts)
gets ``max_completion_tokens`` and a native ``response_format`` and needs a key; other
hosts (vLLM, llama.cpp, Ollama, OpenRouter, LiteLLM, DeepSeek, ...) get ``max_tokens`` and
the prompt fallback for structured output unless ``supports_json_schema=True``.
``official_dialect=`` overrides the dialect choice.

Reasoning (``reasoning_content``) is replayed only for entries this adapter produced, per
host: on for DeepSeek and other compatible hosts, off for the official API. Tool-call
arguments pass through byte for byte; images returned by tools ride one synthetic user
message after each turn's tool results. A tool-call turn replays ``reasoning_content`` even
when empty (DeepSeek's thinking mode requires it). ``openai_tool_schema`` is the function
tool shape (the neutral ``Tool`` knows no wire format).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from typing import TYPE_CHECKING, Any

from ..events import ReasoningDelta, TextDelta
from ..exceptions import ProviderError, UserError
from ..messages import Usage
from ..parts import ContentPart, FilePart, ImagePart, TextPart, project_parts
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
from .base import FinishDelta, ModelDelta, ModelSettings, ToolCallDelta, UsageDelta
from .discovery import is_official_openai_host
from .errors import stream_error
from .sse import SSEEvent, SSEParser

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..tools.base import Tool
    from ._http import Body, Entries, Tools

__all__ = [
    "ChatStreamDecoder",
    "DEFAULT_OPENAI_BASE_URL",
    "OPENAI_RULES",
    "OpenAIChatProvider",
    "openai_tool_schema",
]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where ``OpenAIChatProvider`` goes without ``base_url=`` or ``OPENAI_BASE_URL``."""

_FINISH = {"function_call": "tool_calls", "eos": "stop", "end_turn": "stop", "max_tokens": "length"}


def _data_url(part: ImagePart | FilePart) -> str:
    if part.url is not None:
        return part.url
    return f"data:{part.mime_type};base64,{part.data}"


OPENAI_RULES = AdapterRules(
    base_url_env="OPENAI_BASE_URL",
    default_base_url=DEFAULT_OPENAI_BASE_URL,
    key_env="OPENAI_API_KEY",
    key_header="authorization",
    key_prefix="Bearer ",
    authorising=("authorization",),
    missing_key_hint="set OPENAI_API_KEY or pass api_key=; "
    "for a compatible server set base_url= (or OPENAI_BASE_URL)",
    example="OpenAIChatProvider('gpt-4o-mini')",
)
"""The URL and key rules of both OpenAI adapters."""


def openai_tool_schema(tool: Tool) -> dict[str, Any]:
    """``tool`` as a Chat Completions ``tools`` item (``strict`` only when set)."""
    fn: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    if tool.strict:
        fn["strict"] = True
    return {"type": "function", "function": fn}


class OpenAIChatProvider(HTTPAdapter):
    """A model behind an OpenAI Chat Completions endpoint (streaming).

    ``client`` is used as is and never closed by ``aclose()``; otherwise the adapter makes
    (and owns) one through ``lovia.http_config``. ``api_key`` and ``base_url`` default to
    ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``.
    """

    name = "openai"
    rules = OPENAI_RULES
    path = "/chat/completions"
    is_official_host = staticmethod(is_official_openai_host)

    def __init__(
        self,
        model: str,
        *,
        supports_json_schema: bool | None = None,
        replay_reasoning: bool | None = None,
        official_dialect: bool | None = None,
        **options: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(model, **options)
        official = self.official_host
        self.official_dialect = official if official_dialect is None else official_dialect
        if self.official_dialect:
            self.max_tokens_field = "max_completion_tokens"
        self.supports_json_schema = (
            self.official_dialect if supports_json_schema is None else supports_json_schema
        )
        self.replay_reasoning = (not official) if replay_reasoning is None else replay_reasoning

    # -- request -----------------------------------------------------------------------

    def decoder(self) -> ChatStreamDecoder:
        """A fresh decoder for one reply."""
        return ChatStreamDecoder(self.model)

    def _body(self, view: Entries, tools: Tools, fmt: Body | None, s: ModelSettings) -> Body:
        """The Chat Completions request body for this view."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(view),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = [openai_tool_schema(t) for t in tools]
        if fmt is not None and self.supports_json_schema:
            body["response_format"] = fmt
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.max_tokens is not None:
            body[self.max_tokens_field] = s.max_tokens
        if s.stop is not None:
            body["stop"] = stop_list(s.stop)
        if s.parallel_tool_calls is not None and tools:
            body["parallel_tool_calls"] = s.parallel_tool_calls
        return merge_options(body, s.options_for("openai", "openai-chat"))

    def _content(self, parts: tuple[ContentPart, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, TextPart):
                out.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart) and self.supports_vision:
                image: dict[str, Any] = {"url": _data_url(part)}
                if part.detail:
                    image["detail"] = part.detail
                out.append({"type": "image_url", "image_url": image})
            elif (
                isinstance(part, FilePart)
                and part.data is not None
                and (part.mime_type or "").startswith("text/")
            ):
                out.append({"type": "text", "text": _decode_text(part)})
            elif isinstance(part, FilePart) and part.data is not None and self.official_dialect:
                file: dict[str, Any] = {"file_data": _data_url(part)}
                if part.filename:
                    file["filename"] = part.filename
                out.append({"type": "file", "file": file})
            else:
                out.append({"type": "text", "text": project_parts([part])})
        return out

    def _messages(self, entries: Entries) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        images: list[dict[str, Any]] = []

        def flush_assistant() -> None:
            if text or calls:
                # content is null beside tool calls, as the API itself returns it
                content = "".join(text) if text else (None if calls else "")
                msg: dict[str, Any] = {"role": "assistant", "content": content}
                if calls:
                    msg["tool_calls"] = list(calls)
                # A tool-call turn carries it even when empty: DeepSeek's thinking mode
                # rejects one without ("Missing reasoning_content field").
                if self.replay_reasoning and (reasoning or calls):
                    msg["reasoning_content"] = "".join(reasoning)
                messages.append(msg)
            # reasoning with nothing after it is an orphan: dropped
            text.clear()
            reasoning.clear()
            calls.clear()

        def flush_images() -> None:
            if images:
                messages.append({"role": "user", "content": list(images)})
                images.clear()

        for e in entries:
            if isinstance(e, ReasoningEntry):
                if text or calls:
                    flush_assistant()
                if e.provider == self.name and e.content:
                    reasoning.append(e.content)
            elif isinstance(e, AssistantTextEntry):
                flush_images()
                if calls:
                    flush_assistant()
                text.append(e.content)
            elif isinstance(e, ToolCallEntry):
                flush_images()
                calls.append(
                    {
                        "id": e.call_id,
                        "type": "function",
                        "function": {"name": e.name, "arguments": e.arguments},
                    }
                )
            elif isinstance(e, ToolResultEntry):
                flush_assistant()
                messages.append({"role": "tool", "tool_call_id": e.call_id, "content": e.output})
                shown = [p for p in e.parts or () if isinstance(p, ImagePart)]
                if shown and self.supports_vision:
                    images.append(
                        {"type": "text", "text": f"Images returned by tool call {e.call_id}:"}
                    )
                    images.extend(self._content(tuple(shown)))
            else:
                flush_assistant()
                flush_images()
                messages.append(self._input(e))
        flush_assistant()
        flush_images()
        return messages

    def _input(self, e: InputEntry) -> dict[str, Any]:
        if isinstance(e.content, str):
            return {"role": e.role, "content": e.content}
        if e.role == "system":
            return {"role": "system", "content": project_parts(e.content)}
        return {"role": "user", "content": self._content(e.content)}


def _decode_text(part: FilePart) -> str:
    try:
        return base64.b64decode(part.data or "").decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise UserError(
            f"file {part.filename or ''!r} ({part.mime_type}) is not valid UTF-8 text",
            hint="send binary documents as PDF or convert them to text first",
        ) from exc


def _error_finish(model: str) -> ProviderError:
    return ProviderError(
        f'openai ended the stream with finish_reason "error" (model {model!r}): the '
        "provider behind the endpoint failed mid-reply",
        vendor="openai",
        model=model,
        retryable=True,
        hint="the partial turn is discarded and the call is retried",
    )


class ChatStreamDecoder:
    """Chat Completions chunks to deltas (shared with the benchmark)."""

    __slots__ = ("_given", "_model", "_names", "_slot_of", "_slots", "complete", "finish_reason")

    def __init__(self, model: str) -> None:
        self._model = model
        self.complete = False  # the stream ends with [DONE] (or the connection closing)
        self._slot_of: dict[int, int] = {}  # wire index -> the tool slot it currently feeds
        self._given: dict[int, str] = {}  # slot -> the call id the server gave it
        self._slots: set[int] = set()  # every slot handed out
        self._names: set[int] = set()
        self.finish_reason: str | None = None

    def handle(self, event: SSEEvent, out: list[ModelDelta]) -> None:
        """Append the deltas of one event to ``out``."""
        if event.event not in (None, "message", "error") and event.data[:1] not in ("{", "["):
            return  # a named keep-alive (``event: ping``): Chat Completions has no such events
        obj = parse_json_event(event.data, vendor="openai", model=self._model)
        if not isinstance(obj, dict):
            obj = {"error": {"message": f"unexpected chunk {event.data[:200]!r}"}}
        if obj.get("error") or obj.get("object") == "error":  # the latter: vLLM's shape
            raise stream_error(obj, vendor="openai", model=self._model)
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning and isinstance(reasoning, str):
                    out.append(ReasoningDelta(reasoning))
                content = delta.get("content")
                if content and isinstance(content, str):
                    out.append(TextDelta(content))
                tool_calls = delta.get("tool_calls")
                if tool_calls:
                    self._tool_calls(tool_calls, out)
            reason = choice.get("finish_reason")
            if reason == "error":  # gateways (OpenRouter) when the upstream failed mid-reply
                raise _error_finish(self._model)
            if reason:
                self.finish_reason = _FINISH.get(reason, reason)
        usage = obj.get("usage")
        if usage:
            details = usage.get("prompt_tokens_details") or {}
            out.append(
                UsageDelta(
                    Usage(
                        input_tokens=count_of(usage.get("prompt_tokens")),
                        output_tokens=count_of(usage.get("completion_tokens")),
                        cache_read_tokens=count_of(details.get("cached_tokens")),
                    )
                )
            )

    def _tool_calls(self, tool_calls: list[dict[str, Any]], out: list[ModelDelta]) -> None:
        for position, tc in enumerate(tool_calls):
            wire = tc.get("index")
            if not isinstance(wire, int):
                wire = position
            fn = tc.get("function") or {}
            given = tc.get("id") or None
            index = self._slot_of.get(wire)
            call_id = None
            # A new id on a known index is a new call: Ollama and some gateways number every
            # parallel call 0. The same id again (llama.cpp repeats it) continues the call.
            if index is None or (given and self._given.get(index, given) != given):
                index = wire if wire not in self._slots else max(self._slots) + 1
                self._slots.add(index)
                self._slot_of[wire] = index
                call_id = str(given) if given else f"call_{uuid.uuid4().hex[:24]}"
                if given:
                    self._given[index] = call_id
            name = None
            if index not in self._names and fn.get("name"):
                name = str(fn["name"])
                self._names.add(index)
            arguments = fn.get("arguments") or ""
            if not isinstance(arguments, str):  # some gateways send the object itself
                arguments = json.dumps(arguments, ensure_ascii=False)
            out.append(ToolCallDelta(index, call_id, name, arguments))

    def finish(self, parser: SSEParser) -> FinishDelta:
        """The final delta, or a retryable error when the stream was cut short."""
        if self.finish_reason is None and not parser.done:
            raise truncated("openai", self._model, empty=parser.events_seen == 0)
        return FinishDelta(self.finish_reason or "stop")
