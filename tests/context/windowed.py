"""``WindowedEndpoint``: a provider that behaves like a real endpoint with a hard window.

It counts a request the way an endpoint with a different tokenizer would: lovia's own
estimate times ``factor``, plus a fixed hidden ``overhead`` on every prompt (a vendor's
tool-use system prompt, chat framing), plus the reply budget (``max_tokens``, else the
reply it is about to send). A request over ``window`` raises the same
``ContextOverflowError`` the HTTP adapters raise, naming the window or not. Accepted main
calls report that count as ``Usage.input_tokens``, as a real endpoint does.

Summarisation requests (no tools, the summary system prompt) get a structured summary
sized to their ``max_tokens``; every other request gets the next reply of ``script``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lovia.context import REQUIRED_SECTIONS, SUMMARY_SYSTEM_PROMPT, TokenCounter
from lovia.events import TextDelta
from lovia.exceptions import ContextOverflowError
from lovia.messages import Usage
from lovia.providers.base import (
    FinishDelta,
    ModelDelta,
    ModelSettings,
    ToolCallDelta,
    UsageDelta,
)
from lovia.transcript import InputEntry, TranscriptEntry


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted reply: ``text``, or a tool call ``(name, arguments)``."""

    text: str = ""
    call: tuple[str, str] | None = None


@dataclass(slots=True)
class Rejection:
    """A request the endpoint refused: its size, and how many usage reports it had sent."""

    tokens: int
    reports_before: int
    summary: bool


@dataclass
class WindowedEndpoint:
    window: int
    factor: float
    overhead: int
    script: Callable[[int], Reply] = lambda n: Reply(text=f"reply {n}")
    """The reply to the n-th accepted main call (0-based)."""
    names_window: bool = True
    claims_window: bool = False
    filler: str = "fact "
    name: str = "windowed"
    model: str = "windowed-model"
    supports_json_schema: bool = False
    views: list[list[TranscriptEntry]] = field(default_factory=list)
    """Every accepted main view."""
    sizes: list[int] = field(default_factory=list)
    """The endpoint's count of every accepted request (main and summary)."""
    summary_sizes: list[int] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    reports: int = 0
    counter: TokenCounter = field(default_factory=TokenCounter)

    def context_window(self) -> int | None:
        return self.window if self.claims_window else None

    def tokens_of(self, text: str) -> int:
        """What this endpoint counts for ``text`` alone."""
        return int(self.factor * self.counter.count_text(text))

    def text_of(self, tokens: int, unit: str = "word ") -> str:
        """Text this endpoint counts as about ``tokens`` tokens (made of ``unit``)."""
        per_unit = self.factor * len(unit.encode()) / 4
        return unit * max(1, int(tokens / per_unit))

    def count(self, entries: Sequence[TranscriptEntry], tools: Sequence[Any] = ()) -> int:
        """What this endpoint counts for a prompt of ``entries`` and ``tools``."""
        estimate = self.counter.count(list(entries)) + self.counter.count_tools(tools)
        return int(self.factor * estimate) + self.overhead

    async def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Any] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        view = list(entries)
        summary = _is_summary_request(view, tools)
        budget = settings.max_tokens if settings is not None else None
        if summary:
            reply = Reply(text=self._summary(budget))
        else:
            reply = self.script(len(self.views))
        reply_tokens = self.tokens_of(reply.text) + (
            self.tokens_of(reply.call[1]) if reply.call else 0
        )
        prompt = self.count(view, tools)
        needed = prompt + (budget if budget is not None else reply_tokens)
        if needed > self.window:
            self.rejections.append(Rejection(needed, self.reports, summary))
            raise ContextOverflowError(
                f"prompt is too long: {needed} tokens > {self.window} maximum",
                reported_window=self.window if self.names_window else None,
                vendor="windowed",
                status_code=400,
            )
        self.sizes.append(needed)
        if summary:
            self.summary_sizes.append(needed)
        else:
            self.views.append(view)
            self.reports += 1
        if reply.text:
            yield TextDelta(reply.text)
        if reply.call is not None:
            name, arguments = reply.call
            yield ToolCallDelta(0, f"call_{len(self.views)}", name, arguments)
        yield UsageDelta(Usage(input_tokens=prompt, output_tokens=reply_tokens))
        yield FinishDelta("tool_calls" if reply.call else "stop")

    def _summary(self, max_tokens: int | None) -> str:
        """A summary with every required section, about half the reply budget (at most
        400 tokens), as a model asked for a short summary writes."""
        size = min(400, (max_tokens or 800) // 2)
        per_section = max(1, size // len(REQUIRED_SECTIONS))
        return "\n".join(
            f"## {s}\n{self.text_of(per_section, self.filler)}" for s in REQUIRED_SECTIONS
        )


def _is_summary_request(view: Sequence[TranscriptEntry], tools: Sequence[Any]) -> bool:
    head = view[0] if view else None
    return (
        not tools
        and isinstance(head, InputEntry)
        and isinstance(head.content, str)
        and head.content.startswith(SUMMARY_SYSTEM_PROMPT[:60])
    )
