"""The ``Summarizer`` seam and ``LLMSummarizer`` (structured sections, temperature 0).

``LLMSummarizer`` calls the run's own provider (``SummarizeHistory`` passes it) with the
summary system prompt and one fold: the previous summary plus the new span rendered as
text by ``transcript_to_text`` (reasoning is skipped). A reply missing a required section
is retried once with a reminder where the caller says the retry fits, then shipped as is;
an empty or truncated reply raises ``SummarizationError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from lovia.events import TextDelta
from lovia.exceptions import LoviaError
from lovia.parts import project_parts
from lovia.providers.base import FinishDelta, ModelSettings, Provider
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    TranscriptEntry,
)

from .prompts import FOLD_TEMPLATE, REQUIRED_SECTIONS, SUMMARY_SYSTEM_PROMPT
from .tokens import check_count

__all__ = [
    "LLMSummarizer",
    "SummarizationError",
    "Summarizer",
    "missing_sections",
    "retry_reminder",
    "transcript_to_text",
]


class SummarizationError(LoviaError):
    """The summariser returned nothing usable (empty, truncated or oversized)."""


class Summarizer(Protocol):
    """Folds a span of entries into the running summary.

    ``previous`` is the current summary (``None`` on the first fold); ``provider`` is the
    run's provider. Implementations may declare ``context_window`` (their own window in
    tokens, ``None`` = the run's) and ``max_output_tokens``; ``SummarizeHistory`` sizes
    each fold so the request fits both windows. An implementation whose ``summarize``
    also takes ``max_output_tokens`` and ``retry`` keywords (as ``LLMSummarizer`` does)
    gets a reply budget scaled to the window and is told whether a retry fits; otherwise
    its declared ``max_output_tokens`` is reserved as is.
    """

    async def summarize(
        self, entries: Sequence[TranscriptEntry], *, previous: str | None, provider: Any
    ) -> str: ...


def transcript_to_text(
    entries: Sequence[TranscriptEntry], *, max_entry_chars: int | None = None
) -> str:
    """Entries as plain text for a summariser; reasoning is skipped.

    ``max_entry_chars`` caps each entry's text (head kept, the cut is marked), so one huge
    tool result cannot push a fold past the summariser's window.
    """
    lines: list[str] = []
    for e in entries:
        if isinstance(e, ReasoningEntry):
            continue
        if isinstance(e, InputEntry):
            body = e.content if isinstance(e.content, str) else project_parts(e.content)
            label = "User" if e.role == "user" else "System"
        elif isinstance(e, AssistantTextEntry):
            label, body = "Assistant", e.content
        elif isinstance(e, ToolCallEntry):
            label, body = f"Tool call {e.name} [{e.call_id}]", e.arguments
        else:
            label = f"Tool result [{e.call_id}]" + (" (error)" if e.is_error else "")
            body = e.output
        if max_entry_chars is not None and len(body) > max_entry_chars:
            body = body[:max_entry_chars] + f"... [{len(body) - max_entry_chars} chars cut]"
        lines.append(f"{label}: {body}")
    return "\n".join(lines)


def _fold_request(
    prompt: str, entries: Sequence[TranscriptEntry], previous: str | None
) -> list[TranscriptEntry]:
    """The request of one fold: the system ``prompt``, then the previous summary (if any)
    and ``entries`` as text."""
    previous_block = f"Current summary:\n<summary>\n{previous}\n</summary>\n\n" if previous else ""
    fold = FOLD_TEMPLATE.format(
        previous_block=previous_block, conversation=transcript_to_text(entries)
    )
    return [InputEntry("system", prompt), InputEntry("user", fold)]


def retry_reminder(missing: Sequence[str]) -> str:
    """The user message that asks for the sections a reply left out."""
    return (
        "Your summary is missing these sections: "
        + ", ".join(missing)
        + ". Return the complete summary with every required section."
    )


def missing_sections(text: str, sections: Sequence[str]) -> list[str]:
    """The required sections ``text`` has no ``## <name>`` heading for."""
    lowered = text.lower()
    return [s for s in sections if f"## {s.lower()}" not in lowered]


class LLMSummarizer:
    """The default summariser: one LLM call per fold on the run's provider.

    ``prompt``: the system prompt (``None`` = ``SUMMARY_SYSTEM_PROMPT``; a ``{sections}``
    placeholder is filled with the headings). ``required_sections``: headings the summary
    must contain. ``provider``: a provider to use instead of the run's (``None`` = the
    run's). ``context_window``: this summariser's window in tokens (``None`` = the run's).
    ``max_output_tokens``: the ceiling of a fold's reply budget (a fold on a small window
    gets less; see ``SummarizeHistory``).
    """

    def __init__(
        self,
        *,
        prompt: str | None = None,
        required_sections: Sequence[str] = REQUIRED_SECTIONS,
        provider: Provider | None = None,
        context_window: int | None = None,
        max_output_tokens: int = 4_096,
    ) -> None:
        if context_window is not None:
            check_count("context_window", context_window, minimum=1)
        check_count("max_output_tokens", max_output_tokens, minimum=1)
        self.required_sections = tuple(required_sections)
        headings = "\n".join(f"## {s}" for s in self.required_sections)
        template = SUMMARY_SYSTEM_PROMPT if prompt is None else prompt
        self.prompt = template.replace("{sections}", headings)
        self.provider = provider
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens

    async def summarize(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        previous: str | None,
        provider: Any,
        max_output_tokens: int | None = None,
        retry: bool = True,
    ) -> str:
        """Fold ``entries`` into ``previous``; raises ``SummarizationError`` on an empty or
        truncated reply (provider errors propagate).

        ``max_output_tokens``: this fold's reply budget (``SummarizeHistory`` scales it to
        the window; ``None`` = the constructor's, which is also the ceiling). ``retry``:
        whether a reply missing a section may be retried (the caller knows if it fits).
        """
        target = self.provider if self.provider is not None else provider
        if target is None:
            raise SummarizationError(
                "no provider to summarise with", hint="pass LLMSummarizer(provider=...)"
            )
        budget = self.max_output_tokens
        if max_output_tokens is not None:
            budget = min(budget, check_count("max_output_tokens", max_output_tokens, minimum=1))
        view = _fold_request(self.prompt, entries, previous)
        text = await self._call(target, view, budget)
        missing = missing_sections(text, self.required_sections)
        if missing and retry:
            view += [AssistantTextEntry(text), InputEntry("user", retry_reminder(missing))]
            again = await self._call(target, view, budget)
            # Ship the incomplete summary rather than lose the fold.
            if len(missing_sections(again, self.required_sections)) < len(missing):
                text = again
        return text

    async def _call(self, provider: Any, view: list[TranscriptEntry], max_tokens: int) -> str:
        settings = ModelSettings(temperature=0, max_tokens=max_tokens)
        pieces: list[str] = []
        finish: str | None = None
        stream = provider.stream(view, tools=(), settings=settings)
        try:
            async for delta in stream:
                if isinstance(delta, TextDelta):
                    pieces.append(delta.delta)
                elif isinstance(delta, FinishDelta):
                    finish = delta.reason
        finally:
            # A cancelled or failed fold still releases the provider's connection.
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        text = "".join(pieces).strip()
        if finish == "length":
            raise SummarizationError(
                "the summary was truncated at the output limit",
                hint="raise LLMSummarizer(max_output_tokens=...)",
            )
        if not text:
            raise SummarizationError(
                "the summariser returned an empty summary",
                hint="check that the summarising model answers plain-text requests",
            )
        return text
