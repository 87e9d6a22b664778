"""The provider seam: a structural ``Provider`` protocol and the deltas it streams.

A provider receives canonical entries (never ``Message`` values) and yields ``ModelDelta``
values. The run loop reassembles them into one turn: text and reasoning accumulate, tool
calls are rebuilt from their ``index`` slots (fragments may interleave), and an
``EntryCompletedDelta`` (a finished entry the vendor sent whole, e.g. a signed thinking
block) wins over what was accumulated for the same slot. A stream must end with a
``FinishDelta``; one that ends without it is a truncation, which adapters raise as a
retryable ``ProviderError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from ..events import ReasoningDelta, TextDelta
from ..messages import Usage
from ..transcript import TranscriptEntry

if TYPE_CHECKING:
    from ..tools.base import Tool

__all__ = [
    "ContextWindowDiscovery",
    "ContextWindowProvider",
    "EntryCompletedDelta",
    "FinishDelta",
    "ModelDelta",
    "ModelSettings",
    "Provider",
    "ReasoningDelta",
    "TextDelta",
    "TokenEstimator",
    "ToolCallDelta",
    "UsageDelta",
    "VisionCapable",
    "supports_vision",
]


@dataclass(slots=True)
class ToolCallDelta:
    """A fragment of tool call number ``index`` in this turn.

    ``call_id`` and ``name`` arrive once (usually first); ``arguments`` fragments are
    concatenated in order, byte for byte.
    """

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class UsageDelta:
    """Token usage for the call (may arrive more than once; the last value of each field wins)."""

    usage: Usage


@dataclass(slots=True)
class FinishDelta:
    """The stream finished normally; ``reason`` is the vendor's normalised finish reason
    (``stop``, ``tool_calls``, ``length``, ``content_filter``, ``pause_turn``, ...)."""

    reason: str | None = None


@dataclass(slots=True)
class EntryCompletedDelta:
    """A complete entry the vendor sent whole (reasoning with its signature, a tool call).

    ``index`` is the tool-call slot it completes, for tool calls; completed entries win over
    deltas accumulated for the same content.
    """

    entry: TranscriptEntry
    index: int | None = None


ModelDelta = Union[
    TextDelta, ReasoningDelta, ToolCallDelta, UsageDelta, FinishDelta, EntryCompletedDelta
]
"""One piece of a provider stream."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Sampling settings; ``None`` means the field is not sent.

    ``provider_options`` is keyed by vendor (``"openai"``, ``"anthropic"``, ...) and merged
    verbatim into that vendor's request body, overriding adapter defaults; a ``None`` value
    removes a field.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    parallel_tool_calls: bool | None = None
    provider_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def options_for(self, *keys: str) -> dict[str, Any]:
        """Merge ``provider_options`` for ``keys`` in order (later keys win)."""
        merged: dict[str, Any] = {}
        for key in keys:
            merged.update(self.provider_options.get(key, {}))
        return merged


class Provider(Protocol):
    """A model endpoint. Structural: any object with these members is a provider."""

    name: str
    """The vendor/adapter name (``"openai"``, ``"anthropic"``, ``"scripted"``, ...)."""
    model: str
    supports_json_schema: bool
    """Whether structured output can use a native JSON Schema ``response_format``."""

    def stream(
        self,
        entries: Sequence[TranscriptEntry],
        *,
        tools: Sequence[Tool] = (),
        response_format: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[ModelDelta]:
        """Stream one model reply for the view ``entries``."""
        ...


@runtime_checkable
class ContextWindowProvider(Protocol):
    """A provider that knows its model's context window (in tokens), or ``None``."""

    def context_window(self) -> int | None: ...


@runtime_checkable
class ContextWindowDiscovery(Protocol):
    """A provider that can ask its endpoint for the context window (fail-open, memoised)."""

    async def discover_context_window(self) -> int | None: ...


@runtime_checkable
class TokenEstimator(Protocol):
    """A provider with its own token estimate for a view."""

    def estimate_tokens(self, entries: Sequence[TranscriptEntry]) -> int: ...


@runtime_checkable
class VisionCapable(Protocol):
    """A provider that says whether its model accepts images (see ``supports_vision``)."""

    supports_vision: bool


def supports_vision(provider: object) -> bool:
    """Whether ``provider`` accepts images (``False`` when it does not say)."""
    return bool(getattr(provider, "supports_vision", False))
