"""OpenAI Chat Completions adapter (the official API and compatible servers).

Dialects are chosen by host. The official API (``api.openai.com`` and its regional hosts)
gets ``max_completion_tokens`` and a native ``response_format`` and needs a key; other
hosts (vLLM, llama.cpp, Ollama, OpenRouter, LiteLLM, DeepSeek, ...) get ``max_tokens`` and
the prompt fallback for structured output unless ``supports_json_schema=True``.
``official_dialect=`` overrides the dialect choice.

Reasoning (``reasoning_content``) is replayed only for entries this adapter produced, per
host: on for DeepSeek and other compatible hosts, off for the official API. Tool-call
arguments pass through byte for byte; images returned by tools ride one synthetic user
message after each turn's tool results.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..events import ReasoningDelta, TextDelta
from ..exceptions import UserError
from ..messages import Usage
from ..parts import ContentPart, FilePart, ImagePart, TextPart, project_parts
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)
from ._http import (
    ClientSlot,
    count_of,
    host_of,
    merge_options,
    parse_json_event,
    stop_list,
    stream_deltas,
    truncated,
)
from ._openai_auth import openai_headers
from .base import FinishDelta, ModelDelta, ModelSettings, ToolCallDelta, UsageDelta
from .discovery import discover_window, is_official_openai_host, table_window
from .errors import stream_error
from .sse import SSEEvent, SSEParser

if TYPE_CHECKING:
    import httpx

    from ..tools.base import Tool

__all__ = ["ChatStreamDecoder", "DEFAULT_OPENAI_BASE_URL", "OpenAIChatProvider"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where ``OpenAIChatProvider`` goes without ``base_url=`` or ``OPENAI_BASE_URL``."""

_FINISH = {"function_call": "tool_calls", "eos": "stop", "end_turn": "stop", "max_tokens": "length"}


def _data_url(part: ImagePart | FilePart) -> str:
    if part.url is not None:
        return part.url
    return f"data:{part.mime_type};base64,{part.data}"


class OpenAIChatProvider:
    """A model behind an OpenAI Chat Completions endpoint (streaming).

    ``client`` is used as is and never closed by ``aclose()``; otherwise the adapter makes
    (and owns) one through ``lovia.http_config``. ``api_key`` and ``base_url`` default to
    ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        supports_json_schema: bool | None = None,
        trust_env: bool | None = None,
        replay_reasoning: bool | None = None,
        official_dialect: bool | None = None,
        supports_vision: bool | None = None,
    ) -> None:
        if not model:
            raise UserError(
                "OpenAIChatProvider needs a model name",
                hint="e.g. OpenAIChatProvider('gpt-4o-mini')",
            )
        self.model = model
        self.base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        ).rstrip("/")
        self.host = host_of(self.base_url)
        official_host = is_official_openai_host(self.host)
        self.official_dialect = official_host if official_dialect is None else official_dialect
        self._headers = openai_headers(
            api_key,
            default_headers,
            host=self.host,
            official=official_host,
            missing_key_hint="set OPENAI_API_KEY or pass api_key=; "
            "for a compatible server set base_url= (or OPENAI_BASE_URL)",
        )
        self.supports_json_schema = (
            self.official_dialect if supports_json_schema is None else supports_json_schema
        )
        self.replay_reasoning = (
            (not official_host) if replay_reasoning is None else replay_reasoning
        )
        self.supports_vision = official_host if supports_vision is None else supports_vision
        self._client = ClientSlot(client, timeout=timeout, trust_env=trust_env)

    def __repr__(self) -> str:
        return f"OpenAIChatProvider(model={self.model!r}, base_url={self.base_url!r})"

    # -- lifecycle ---------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        return self._client.get()

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        await self._client.aclose()

    # -- optional protocols ------------------------------------------------------------

    def context_window(self) -> int | None:
        """The bundled window for this host and model, if known."""
        return table_window(self.host, self.model)

    async def discover_context_window(self) -> int | None:
        """Ask the endpoint's ``/models`` (never on the official API); fail-open, memoised."""
        return await discover_window(self.base_url, self.model, self._headers)

    # -- request -----------------------------------------------------------------------

    def build_request(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> dict[str, Any]:
        """The Chat Completions request body for this view."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(entries),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = [t.openai_schema() for t in tools]
        if response_format is not None and self.supports_json_schema:
            body["response_format"] = response_format
        s = settings or ModelSettings()
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.max_tokens is not None:
            body["max_completion_tokens" if self.official_dialect else "max_tokens"] = s.max_tokens
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

    def _messages(self, entries: Sequence[TranscriptEntry]) -> list[dict[str, Any]]:
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
                if reasoning and self.replay_reasoning:
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

    # -- streaming ---------------------------------------------------------------------

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream one reply; a stream that ends before its finish raises a retryable error."""
        body = self.build_request(
            entries, tools=tools, response_format=response_format, settings=settings
        )
        deltas = stream_deltas(
            await self._client.ready(),
            self.base_url + "/chat/completions",
            body,
            self._headers,
            vendor=self.name,
            model=self.model,
            decoder=ChatStreamDecoder(self.model),
        )
        async with aclosing(deltas):
            async for delta in deltas:
                yield delta


def _decode_text(part: FilePart) -> str:
    try:
        return base64.b64decode(part.data or "").decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise UserError(
            f"file {part.filename or ''!r} ({part.mime_type}) is not valid UTF-8 text",
            hint="send binary documents as PDF or convert them to text first",
        ) from exc


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
