"""The ``Stage`` seam and the three cheap-first stages.

A stage *plans*: it records sticky decisions into ``ctx.state`` and returns ``True`` when
it decided something new. It never builds a view (``render_view`` does that) and never
undoes a decision. Every stage respects the protected tail (``ctx.tail_start``) and the
summary coverage; only on the aggressive (reactive) path may a single result bigger than
the whole target lose its tail immunity (``_oversized``), otherwise one giant output would
make overflow recovery impossible. No stage decides on a reused ``call_id``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lovia.context_policy import CompactionRequest
from lovia.parts import project_parts
from lovia.tools.recall import result_digest
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .prompts import FOLD_TEMPLATE, REQUIRED_SECTIONS
from .render import clear_marker, has_image, offload_marker, pair_safe_cuts, render_entry
from .state import CompactionState, OffloadRecord, SummaryState, fingerprint
from .stores import ResultStore
from .summarizer import (
    LLMSummarizer,
    SummarizationError,
    Summarizer,
    retry_reminder,
    transcript_to_text,
)
from .tokens import ContextConfigError, TokenBudget, TokenCounter, check_count

__all__ = [
    "ClearToolResults",
    "OffloadToolResults",
    "Stage",
    "StageContext",
    "SummarizeHistory",
]

_log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class StageContext:
    """What a stage plans with.

    ``request``: the compaction request. ``state``: the sticky decisions (record into it).
    ``counter``/``budget``: token math. ``tail_start``: index into the body where the
    protected tail starts. ``aggressive``: the reactive path (thresholds dropped).
    ``estimate``: the calibrated token estimate of the current view; stages lower it with
    ``note_saving`` as they decide, and the policy re-measures it after each stage.
    """

    request: CompactionRequest
    state: CompactionState
    counter: TokenCounter
    budget: TokenBudget
    tail_start: int
    aggressive: bool = False
    estimate: int = 0
    store: ResultStore | None = None
    recall: bool = True
    reused_ids: frozenset[str] = frozenset()
    detail: list[str] = field(default_factory=list)
    summary_text: str | None = None
    """Set by ``SummarizeHistory`` when it folded a new summary this pass."""
    window_known: bool = True
    """``False`` on a reactive pass with no window information: ``budget.window`` is then
    the size of the view that overflowed, an upper bound rather than the window."""

    @property
    def over_target(self) -> bool:
        """Whether the view is still above the budget's target."""
        return self.estimate > self.budget.target_tokens

    @property
    def covered(self) -> int:
        """How many body entries the running summary or a left-out span stand in for."""
        summary, omitted = self.state.summary, self.state.omitted
        return max(
            summary.covered if summary is not None else 0,
            omitted.covered if omitted is not None else 0,
        )

    def note_saving(self, raw_tokens: int) -> None:
        """Lower ``estimate`` by ``raw_tokens`` (uncalibrated) saved by a decision."""
        self.estimate -= int(raw_tokens * self.state.ratio)

    def rendered_cost(self, entry: TranscriptEntry) -> int:
        """Tokens of ``entry`` as the view currently renders it."""
        return self.counter.count_entry(render_entry(entry, self.state, recall=self.recall))

    def oversized(self, entry: TranscriptEntry) -> bool:
        """On the aggressive path: a single entry bigger than the whole target."""
        return self.aggressive and self.counter.count_entry(entry) > self.budget.target_tokens

    def candidate_results(self, body: Sequence[TranscriptEntry], keep_last: int) -> list[int]:
        """Indices of results a stage may decide on, oldest first: outside the summary and
        the tail, not among the newest ``keep_last`` results, not a reused id; plus, when
        aggressive, oversized results inside the tail."""
        newest: set[int] = set()
        if keep_last > 0:
            i = len(body) - 1
            while i >= 0 and len(newest) < keep_last:
                if isinstance(body[i], ToolResultEntry):
                    newest.add(i)
                i -= 1
        out: list[int] = []
        for i in range(self.covered, len(body)):
            e = body[i]
            if not isinstance(e, ToolResultEntry) or i in newest or e.call_id in self.reused_ids:
                continue
            if i < self.tail_start or self.oversized(e):
                out.append(i)
        return out


class Stage(Protocol):
    """One compaction step: ``plan`` records decisions; ``True`` when something is new."""

    name: str

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool: ...


class OffloadToolResults:
    """Stage 1: huge results become a preview marker; the full output goes to the store.

    ``min_chars``: only results at least this long. ``keep_last``: the newest results that
    always stay verbatim. ``preview_chars``: preview length. The store key is the content
    digest; a store failure is logged and the decision still stands (recall then falls
    back to the transcript).
    """

    name = "offload"

    def __init__(
        self, min_chars: int = 4_000, keep_last: int = 2, preview_chars: int = 400
    ) -> None:
        self.min_chars = check_count("min_chars", min_chars, minimum=1)
        self.keep_last = check_count("keep_last", keep_last, minimum=0)
        self.preview_chars = check_count("preview_chars", preview_chars, minimum=0)

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
        state = ctx.state
        offloaded = 0
        for i in ctx.candidate_results(body, 0 if ctx.aggressive else self.keep_last):
            if not ctx.over_target:
                break
            e = body[i]
            assert isinstance(e, ToolResultEntry)
            if e.call_id in state.cleared or e.call_id in state.offloaded:
                continue
            if len(e.output) < self.min_chars:
                continue
            digest = result_digest(e.output)
            record = OffloadRecord(
                preview=e.output[: self.preview_chars], chars=len(e.output), digest=digest
            )
            saved = ctx.counter.count_entry(e) - ctx.counter.count_entry(
                offload_marker(e, record, recall=ctx.recall)
            )
            if saved <= 0:
                continue
            if ctx.store is not None:
                try:
                    await asyncio.to_thread(ctx.store.put, digest, e.output)
                except Exception:  # noqa: BLE001 - fail-open boundary: the decision stands without the archive
                    _log.warning("result store put failed for %r", e.call_id, exc_info=True)
            state.decide_offload(e.call_id, record)
            ctx.note_saving(saved)
            offloaded += 1
        if offloaded:
            ctx.detail.append(f"offloaded {offloaded} large tool result(s)")
        return offloaded > 0


class ClearToolResults:
    """Stage 2: older results become a short recall marker, oldest first, until the view
    is under target.

    ``keep_last``: the newest results that stay verbatim. ``min_chars``: smaller results
    are skipped (results with images are taken anyway: their projection is tiny but their
    wire cost is not). The aggressive path drops both thresholds.
    """

    name = "clear"

    def __init__(self, keep_last: int = 3, min_chars: int = 200) -> None:
        self.keep_last = check_count("keep_last", keep_last, minimum=0)
        self.min_chars = check_count("min_chars", min_chars, minimum=0)

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
        state = ctx.state
        min_chars = 0 if ctx.aggressive else self.min_chars
        cleared = 0
        for i in ctx.candidate_results(body, 0 if ctx.aggressive else self.keep_last):
            if not ctx.over_target:
                break
            e = body[i]
            assert isinstance(e, ToolResultEntry)
            if e.call_id in state.cleared:
                continue
            if len(e.output) < min_chars and not has_image(e):
                continue
            saved = ctx.rendered_cost(e) - ctx.counter.count_entry(
                clear_marker(e, recall=ctx.recall)
            )
            if saved <= 0:
                continue
            state.decide_clear(e.call_id)
            ctx.note_saving(saved)
            cleared += 1
        if cleared:
            ctx.detail.append(f"cleared {cleared} older tool result(s)")
        return cleared > 0


class SummarizeHistory:
    """Stage 3: fold the older span (summary frontier to the tail) into the running summary.

    ``summarizer``: ``None`` = ``LLMSummarizer()``. ``min_savings_ratio``: skip when the
    projected saving is below this share of the view (anti-thrash; ignored when
    aggressive). ``max_failures``: consecutive failures in a run before the breaker trips
    (the aggressive path still probes).

    The fold is incremental and fit-checked: the span is cut into chunks at pair-safe cuts
    so every summarisation request (prompt, previous summary, chunk, reply budget, in the
    endpoint's calibrated tokens) fits both the run's window and the summariser's own
    (``context_window``); an entry too large for a chunk is clipped in the copy sent to the
    summariser. The reply budget scales with that window (``window // 8``, at least 256,
    at most the summariser's ``max_output_tokens``) for a summariser that accepts it, and
    the retry for a missing section is asked for only where it fits. A failure after some
    chunks keeps the coverage folded so far.
    """

    name = "summarize"

    def __init__(
        self,
        summarizer: Summarizer | None = None,
        min_savings_ratio: float = 0.10,
        max_failures: int = 3,
    ) -> None:
        if (
            isinstance(min_savings_ratio, bool)
            or not isinstance(min_savings_ratio, (int, float))
            or not 0.0 <= min_savings_ratio < 1.0
        ):
            raise ContextConfigError(
                f"min_savings_ratio must be in [0, 1), got {min_savings_ratio!r}",
                hint="a share of the view, e.g. 0.10 (0 never skips a summary)",
            )
        self.summarizer: Summarizer = summarizer if summarizer is not None else LLMSummarizer()
        self._sized = _takes_fold_budget(self.summarizer)
        self.min_savings_ratio = float(min_savings_ratio)
        self.max_failures = check_count("max_failures", max_failures, minimum=1)

    async def plan(self, body: Sequence[TranscriptEntry], ctx: StageContext) -> bool:
        state = ctx.state
        if state.summary_failures >= self.max_failures and not ctx.aggressive:
            return False
        covered = ctx.covered
        cuts = [c for c in pair_safe_cuts(body) if covered < c <= ctx.tail_start]
        if not cuts:
            return False
        span_cost = sum(ctx.rendered_cost(e) for e in body[covered : cuts[-1]])
        previous = state.summary.text if state.summary is not None else None
        prev_cost = ctx.counter.count_text(previous or "")
        size = self._fold_size(ctx)
        projected = span_cost - max(size.reply // 2, prev_cost)
        if not ctx.aggressive and projected * state.ratio < self.min_savings_ratio * ctx.estimate:
            ctx.detail.append("summary skipped: projected saving under the anti-thrash threshold")
            return False
        chunk_budget = size.chunk_budget(prev_cost)
        if chunk_budget <= 0:
            _log.warning(
                "the summariser's window (%d tokens) has no room for a fold; summary skipped",
                size.room,
            )
            ctx.detail.append("summary skipped: no room for a fold in the summariser's window")
            return False
        changed = False
        for start, end, chunk in _chunks(body, covered, cuts, chunk_budget, ctx.counter):
            if not ctx.over_target and changed:
                break
            chunk_cost = sum(ctx.rendered_cost(e) for e in body[start:end])
            try:
                text = await self._fold(chunk, previous, ctx, size, prev_cost)
                new_cost = ctx.counter.count_text(text)
                if new_cost >= chunk_cost + prev_cost:
                    raise SummarizationError(
                        "the summary is larger than what it replaces",
                        hint="lower LLMSummarizer(max_output_tokens=...) or tighten its prompt",
                    )
            except Exception:  # noqa: BLE001 - fail-open boundary: summariser failures never fail the run
                state.summary_failures += 1
                _log.warning(
                    "summarisation failed (%d in a row)", state.summary_failures, exc_info=True
                )
                ctx.detail.append("summary failed; older history kept verbatim")
                break
            state.summary_failures = 0
            state.set_summary(
                SummaryState(text=text, covered=end, fingerprint=fingerprint(body[:end]))
            )
            ctx.note_saving(chunk_cost + prev_cost - new_cost)
            previous, prev_cost = text, new_cost
            ctx.summary_text = text
            changed = True
        if changed:
            assert state.summary is not None
            ctx.detail.append(f"summarised the first {state.summary.covered} entries of history")
        return changed

    async def _fold(
        self,
        chunk: list[TranscriptEntry],
        previous: str | None,
        ctx: StageContext,
        size: _FoldSize,
        prev_cost: int,
    ) -> str:
        provider = ctx.request.provider
        if self._sized:
            retry = size.retry_fits(_text_cost(chunk, ctx.counter) + prev_cost)
            text = await self.summarizer.summarize(  # type: ignore[call-arg]  # checked: _sized
                chunk,
                previous=previous,
                provider=provider,
                max_output_tokens=size.reply,
                retry=retry,
            )
        else:
            text = await self.summarizer.summarize(chunk, previous=previous, provider=provider)
        text = text.strip()
        if not text:
            raise SummarizationError(
                "the summariser returned an empty summary",
                hint="check the Summarizer passed to SummarizeHistory",
            )
        return text

    def _fold_size(self, ctx: StageContext) -> _FoldSize:
        """How one fold is sized: the window it must fit, its reply budget, and what the
        request costs besides the conversation text."""
        window = ctx.budget.window
        if not ctx.window_known:
            window //= 2  # only known to be below the view that overflowed
        own = getattr(self.summarizer, "context_window", None)
        if isinstance(own, int) and own > 0:
            window = min(window, own)
        ceiling = _output_tokens(self.summarizer)
        reply = min(ceiling, max(_REPLY_FLOOR, window // _REPLY_SHARE)) if self._sized else ceiling
        prompt = getattr(self.summarizer, "prompt", "")
        frame = ctx.counter.count_text(prompt if isinstance(prompt, str) else "")
        frame += ctx.counter.count_text(FOLD_TEMPLATE) + _FRAME_TOKENS
        sections = getattr(self.summarizer, "required_sections", REQUIRED_SECTIONS)
        reminder = ctx.counter.count_text(retry_reminder(sections)) + _FRAME_TOKENS
        return _FoldSize(
            room=int(window * _MARGIN),
            reply=reply,
            frame=frame,
            reminder=reminder,
            ratio=ctx.state.ratio,
            overhead=int(ctx.state.calibration.overhead),
        )


_MARGIN = 0.9
"""A fold uses at most this share of the summariser's window (estimates are estimates)."""
_REPLY_SHARE = 8
_REPLY_FLOOR = 256
"""A fold's reply budget: window // _REPLY_SHARE, at least _REPLY_FLOOR, at most the
summariser's ``max_output_tokens``."""
_FRAME_TOKENS = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class _FoldSize:
    """The arithmetic of one fold request, in the provider's tokens: ``overhead`` +
    ``ratio`` * (estimated text) + the reply budget must stay within ``room``."""

    room: int
    reply: int
    frame: int
    """Estimated tokens of the system prompt and the fold template."""
    reminder: int
    """Estimated tokens of the retry's reminder."""
    ratio: float
    overhead: int

    def _provider_tokens(self, estimated: int) -> int:
        return self.overhead + int(self.ratio * estimated)

    def chunk_budget(self, prev_cost: int) -> int:
        """Estimated tokens of conversation text one fold may carry. Room for the retry
        (the first reply re-sent, a reminder, a second reply) is kept when that still
        leaves at least half the room a fold would have without it."""
        single = self.room - self.reply - self._provider_tokens(self.frame + prev_cost)
        with_retry = single - self.reply - int(self.ratio * self.reminder)
        chosen = with_retry if with_retry >= single // 2 else single
        return int(chosen / self.ratio)

    def retry_fits(self, text_cost: int) -> bool:
        """Whether the retry of a fold carrying ``text_cost`` estimated tokens (the chunk
        plus the previous summary) fits the room."""
        first = self._provider_tokens(self.frame + text_cost)
        return first + 2 * self.reply + int(self.ratio * self.reminder) <= self.room


def _takes_fold_budget(summarizer: Summarizer) -> bool:
    """Whether ``summarizer.summarize`` takes the ``max_output_tokens`` and ``retry``
    keywords (then its reply budget scales with the window)."""
    try:
        params = inspect.signature(summarizer.summarize).parameters
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return True
    return "max_output_tokens" in params and "retry" in params


def _output_tokens(summarizer: Summarizer) -> int:
    value = getattr(summarizer, "max_output_tokens", 4_096)
    return value if isinstance(value, int) and value > 0 else 4_096


def _chunks(
    body: Sequence[TranscriptEntry],
    covered: int,
    cuts: list[int],
    budget: int,
    counter: TokenCounter,
) -> list[tuple[int, int, list[TranscriptEntry]]]:
    """Split ``body[covered:cuts[-1]]`` at pair-safe cuts into chunks whose text fits
    ``budget`` tokens; a block (between two cuts) too big on its own is clipped, and the
    chunks stop before a block that does not fit even clipped."""
    chunks: list[tuple[int, int, list[TranscriptEntry]]] = []
    start, cost = covered, 0
    current: list[TranscriptEntry] = []
    prev_cut = covered
    for cut in cuts:
        block = list(body[prev_cut:cut])
        block_cost = _text_cost(block, counter)
        cap = max(8, budget // (2 * len(block)))
        original = block
        while block_cost > budget and cap >= 8:
            block = [_clip(e, cap) for e in original]
            block_cost = _text_cost(block, counter)
            cap //= 2
        if block_cost > budget:
            # Too many entries to fit even clipped (a huge parallel group): the fold stops
            # before it rather than send a request the summariser cannot take.
            _log.info(
                "a %d-entry block does not fit one fold; the summary stops before it", len(block)
            )
            break
        if current and cost + block_cost > budget:
            chunks.append((start, prev_cut, current))
            start, cost, current = prev_cut, 0, []
        current.extend(block)
        cost += block_cost
        prev_cut = cut
    if current:
        chunks.append((start, prev_cut, current))
    return chunks


def _text_cost(entries: Sequence[TranscriptEntry], counter: TokenCounter) -> int:
    return counter.count_text(transcript_to_text(entries)) + len(entries)


def _clip(entry: TranscriptEntry, max_chars: int) -> TranscriptEntry:
    """A copy of ``entry`` with its text cut to ``max_chars`` (the transcript is untouched)."""

    def cut(text: str) -> str:
        if len(text) <= max_chars:
            return text
        return text[:max_chars] + f"... [{len(text) - max_chars} chars cut]"

    if isinstance(entry, ToolResultEntry):
        return ToolResultEntry(
            call_id=entry.call_id, output=cut(entry.output), is_error=entry.is_error
        )
    if isinstance(entry, AssistantTextEntry):
        return AssistantTextEntry(cut(entry.content))
    if isinstance(entry, ToolCallEntry):
        return ToolCallEntry(entry.call_id, entry.name, cut(entry.arguments))
    if isinstance(entry, InputEntry):
        text = entry.content if isinstance(entry.content, str) else project_parts(entry.content)
        return InputEntry(entry.role, cut(text))
    return entry
