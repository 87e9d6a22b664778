"""Token accounting: ``TokenCounter`` (memoised per-entry estimates) and ``TokenBudget``.

The estimate is UTF-8 bytes // 4 per text (one C-speed encode, so CJK weighs ~0.75 tokens
per character instead of being under-counted 4x), flat costs for images and files (never
their base64 length), and a small per-entry framing cost. Tool schemas are counted apart,
on their wire shape, so that fixed payload stays out of the calibration multiplier.

Counting is memoised by ``id()`` with the entry itself kept as a stale-guard (entries are
slotted and cannot be weak-referenced; holding the entry pins its id, so a hit is always
the same object). The memo is bounded (least recently used entries fall out).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from lovia.exceptions import UserError
from lovia.parts import ContentPart, FilePart, ImagePart, TextPart
from lovia.providers.base import TokenEstimator
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    TranscriptEntry,
)

__all__ = [
    "ContextConfigError",
    "TokenBudget",
    "TokenCounter",
    "check_count",
    "check_reserve",
    "check_watermark",
    "default_reserve",
    "resolve_watermark",
]

_log = logging.getLogger(__name__)

_ENTRY_OVERHEAD = 4
"""Role/framing tokens every entry costs on the wire."""
_MEMO_LIMIT = 65_536
_RESERVE_MAX = 16_384


class ContextConfigError(UserError, ValueError):
    """A lovia-context argument or configuration that cannot work (``.hint`` says what to
    change). Also a ``ValueError``, so callers that caught that keep working."""


def check_count(name: str, value: object, *, minimum: int = 0) -> int:
    """Validate a token or size count: an int (never a bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ContextConfigError(
            f"{name} must be an int >= {minimum}, got {value!r}",
            hint=f"pass {name} as a whole number of at least {minimum}",
        )
    return value


class TokenCounter:
    """Estimates tokens for entries, texts and tool schemas.

    ``image_tokens`` / ``file_tokens`` are the flat cost of one image / file part
    (``file_tokens=None`` uses ``image_tokens``). ``estimator`` is a provider implementing
    ``TokenEstimator``; its per-entry answers are used (and memoised) instead of the
    heuristic, falling back to the heuristic for good if it raises.

    Raises ``ContextConfigError`` (a ``ValueError``) for a negative or non-int cost.
    """

    def __init__(
        self,
        *,
        image_tokens: int = 1_600,
        file_tokens: int | None = None,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self.image_tokens = check_count("image_tokens", image_tokens)
        self.file_tokens = (
            self.image_tokens if file_tokens is None else check_count("file_tokens", file_tokens)
        )
        self._estimator = estimator
        self._memo: OrderedDict[int, tuple[TranscriptEntry, int]] = OrderedDict()
        self._tool_memo: dict[int, tuple[object, int]] = {}
        self._last_tools: tuple[object, int] = ((), 0)

    # -- texts and entries ---------------------------------------------------------------

    @staticmethod
    def count_text(text: str) -> int:
        """UTF-8 bytes // 4 (a lone surrogate counts without raising)."""
        return _text_tokens(text)

    def count_parts(self, parts: Iterable[ContentPart]) -> int:
        """Text parts by bytes, images and files at their flat cost."""
        total = 0
        for part in parts:
            if isinstance(part, TextPart):
                total += self.count_text(part.text)
            elif isinstance(part, ImagePart):
                total += self.image_tokens
            elif isinstance(part, FilePart):
                total += self.file_tokens
        return total

    def count_entry(self, entry: TranscriptEntry) -> int:
        """Tokens for one entry (memoised by identity)."""
        memo = self._memo
        key = id(entry)
        hit = memo.get(key)
        if hit is not None and hit[0] is entry:
            return hit[1]
        if self._estimator is None:
            tokens = _ENTRY_OVERHEAD + self._heuristic(entry)  # (the usual case, one call less)
        else:
            tokens = self._estimate(entry)
        memo[key] = (entry, tokens)
        if len(memo) > _MEMO_LIMIT:
            memo.popitem(last=False)
        return tokens

    def count(self, entries: Iterable[TranscriptEntry]) -> int:
        """The sum of ``count_entry`` over ``entries``."""
        count_entry = self.count_entry
        total = 0
        for e in entries:  # (not sum() over a generator: the policy counts new entries per call)
            total += count_entry(e)
        return total

    def _estimate(self, entry: TranscriptEntry) -> int:
        if self._estimator is not None:
            try:
                return int(self._estimator.estimate_tokens([entry]))
            except Exception:  # noqa: BLE001 - fail-open boundary: a broken provider estimator
                _log.warning("token estimator failed; using the heuristic", exc_info=True)
                self._estimator = None
        return _ENTRY_OVERHEAD + self._heuristic(entry)

    def _heuristic(self, entry: TranscriptEntry) -> int:
        if isinstance(entry, InputEntry):
            if isinstance(entry.content, str):
                return _text_tokens(entry.content)
            return self.count_parts(entry.content)
        if isinstance(entry, (AssistantTextEntry, ReasoningEntry)):
            return _text_tokens(entry.content)
        if isinstance(entry, ToolCallEntry):
            return _text_tokens(entry.name) + _text_tokens(entry.arguments) + 4
        tokens = _text_tokens(entry.output)
        if entry.parts is not None:
            # The text projection stands in for the binaries; charge their flat cost.
            tokens += sum(
                self.image_tokens if isinstance(p, ImagePart) else self.file_tokens
                for p in entry.parts
                if not isinstance(p, TextPart)
            )
        return tokens

    # -- tool schemas --------------------------------------------------------------------

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tokens of the tool schemas a request carries, measured on the wire shape.

        A ``Tool`` is counted through ``schema_json()``; a dict as JSON; anything else by
        its ``str()``. Memoised by tool identity.
        """
        if type(tools) is tuple and tools is self._last_tools[0]:
            return self._last_tools[1]  # the same offered tools as the last call (immutable)
        total = 0
        for tool in tools:
            hit = self._tool_memo.get(id(tool))
            if hit is not None and hit[0] is tool:
                total += hit[1]
                continue
            tokens = self.count_text(_wire_text(tool))
            self._tool_memo[id(tool)] = (tool, tokens)
            total += tokens
        if len(self._tool_memo) > 4_096:
            self._tool_memo.clear()
        if type(tools) is tuple:
            self._last_tools = (tools, total)
        return total


def _text_tokens(text: str) -> int:
    """``TokenCounter.count_text`` as a plain function (the per-entry path calls it)."""
    return len(text.encode("utf-8", "surrogatepass")) // 4


def _wire_text(tool: Any) -> str:
    schema_of = getattr(tool, "schema_json", None)
    try:
        if callable(schema_of):
            return str(schema_of())
        if isinstance(tool, dict):
            return json.dumps(tool, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        pass  # not serialisable: fall through to its text form
    return str(tool)


def resolve_watermark(value: float | int, usable: int) -> int:
    """A watermark in tokens: a float is a fraction of ``usable``, an int is absolute
    (capped at ``usable``)."""
    if isinstance(value, float):
        return int(usable * value)
    return min(int(value), usable)


def check_reserve(reserve: object, window: int | None) -> int:
    """Validate ``reserve_output_tokens`` against a known ``window``: a reserve that
    leaves no room for the prompt cannot work."""
    value = check_count("reserve_output_tokens", reserve)
    if window is not None and value >= window:
        raise ContextConfigError(
            f"reserve_output_tokens={value} leaves nothing of the {window}-token context window",
            hint=(
                "lower reserve_output_tokens, or leave it None to reserve "
                "min(16_384, window // 4) for the reply"
            ),
        )
    return value


def check_watermark(name: str, value: object) -> float | int:
    """Validate a watermark: a float in (0, 1] or a positive int (never a bool)."""
    hint = f"{name} is a fraction of the usable window (e.g. 0.85) or a token count (e.g. 150_000)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ContextConfigError(
            f"{name} must be a fraction (float) or tokens (int), got {value!r}", hint=hint
        )
    if isinstance(value, float) and not 0.0 < value <= 1.0:
        raise ContextConfigError(
            f"{name} as a fraction must be in (0, 1], got {value!r}", hint=hint
        )
    if isinstance(value, int) and value <= 0:
        raise ContextConfigError(f"{name} in tokens must be > 0, got {value!r}", hint=hint)
    return value


def default_reserve(window: int) -> int:
    """The reply reserve when ``reserve_output_tokens`` is ``None``: a quarter of the
    window, at most 16,384 tokens (a 4k window keeps 1,024; 64k and up keep 16,384)."""
    return min(_RESERVE_MAX, window // 4)


class TokenBudget:
    """The watermark math for one window, in the provider's (calibrated) tokens.

    ``usable`` = ``window - reserve_output_tokens`` (``None`` = ``default_reserve``; a
    reserve that leaves nothing raises ``ContextConfigError``). ``trigger_tokens`` is where
    compaction starts (``compact_at``), ``target_tokens`` where a burst stops
    (``compact_to``, kept below the trigger even when mixed fraction/absolute watermarks
    cross), ``tail_tokens`` the protected tail (``keep_recent_tokens``; ``None`` =
    usable // 5; an explicit value is capped at three quarters of usable, so the verbatim
    tail alone never fills the room a small window has for the prompt).
    """

    def __init__(
        self,
        window: int,
        *,
        reserve_output_tokens: int | None = None,
        compact_at: float | int = 0.85,
        compact_to: float | int = 0.60,
        keep_recent_tokens: int | None = None,
    ) -> None:
        self.window = check_count("window", window, minimum=1)
        if reserve_output_tokens is None:
            reserve = default_reserve(window)
        else:
            reserve = check_reserve(reserve_output_tokens, window)
        self.reserve = reserve
        self.usable = window - reserve
        self.trigger_tokens = max(
            1, resolve_watermark(check_watermark("compact_at", compact_at), self.usable)
        )
        target = resolve_watermark(check_watermark("compact_to", compact_to), self.usable)
        self.target_tokens = max(1, min(target, self.trigger_tokens - 1))
        if keep_recent_tokens is None:
            self.tail_tokens = self.usable // 5
        else:
            keep = check_count("keep_recent_tokens", keep_recent_tokens)
            self.tail_tokens = min(keep, self.usable * 3 // 4)

    def pressure(self, tokens: int) -> float:
        """``tokens`` as a fraction of the trigger (>= 1.0 means compact)."""
        return tokens / self.trigger_tokens

    def aggressive(self) -> TokenBudget:
        """The reactive budget: tail to 10% and target to 25% of usable."""
        out = TokenBudget.__new__(TokenBudget)
        out.window = self.window
        out.reserve = self.reserve
        out.usable = self.usable
        out.trigger_tokens = 1
        out.target_tokens = max(1, self.usable // 4)
        out.tail_tokens = self.usable // 10
        return out

    def __repr__(self) -> str:
        return (
            f"TokenBudget(window={self.window}, usable={self.usable}, "
            f"trigger={self.trigger_tokens}, target={self.target_tokens}, tail={self.tail_tokens})"
        )
