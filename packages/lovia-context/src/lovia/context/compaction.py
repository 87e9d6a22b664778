"""``Compaction``: the default context policy (watermarks, protected tail, sticky stages).

Per call: sync the rendered view with the transcript, calibrate, resolve the window, and,
only under pressure (above ``compact_at``, or on the reactive overflow path), run the
stages and re-render. When the stages cannot bring the view under the usable window (or,
reactive, cannot shrink it enough to retry), the last resort leaves the oldest pair-safe
span out of the view behind a marker. The transcript is never mutated; the view is
``render_view(transcript, state)``. Every budget is in the provider's (calibrated)
tokens; per-entry costs are lovia's estimate, so comparisons convert the budget once.

Per-turn cost: the transcript is append-only, so the policy keeps, per run, the rendered
view body and its running token total, and on each call renders and counts only the new
entries (identity of the first and last known body entries proves the prefix is the same;
the system head may be swapped on a handoff and is re-checked on its own). With no pressure
a call costs O(new entries) plus one list copy; a full re-render happens only when
decisions change or the transcript is not the one seen before.

State lives in ``req.scratch["compaction"]`` (JSON-safe; the loop checkpoints it and puts it
in the session segment meta) and in a bounded per-session cache, so the next run of a
session resumes the decisions even when the loop does not seed its scratch.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lovia.context_policy import CompactionRequest, ContextResult
from lovia.providers.base import TokenEstimator
from lovia.tools.base import Tool
from lovia.tools.recall import RECALL_TOOL_NAME, make_recall_tool
from lovia.transcript import ToolCallEntry, TranscriptEntry, leading_system_count

from .render import (
    omission_marker,
    pair_safe_cuts,
    protected_tail_start,
    render_entry,
    render_view,
    rendered_frontier,
)
from .stages import (
    ClearToolResults,
    OffloadToolResults,
    Stage,
    StageContext,
    SummarizeHistory,
)
from .state import CompactionState, OmissionState, SummaryState, fingerprint
from .stores import ResultStore
from .summarizer import Summarizer
from .tokens import (
    ContextConfigError,
    TokenBudget,
    TokenCounter,
    check_count,
    check_reserve,
    check_watermark,
)
from .window import WindowProbe, learn_window, resolve_window, window_key

if TYPE_CHECKING:
    from lovia.run_context import RunContext

__all__ = ["Compaction", "SCRATCH_KEY"]

_log = logging.getLogger(__name__)

SCRATCH_KEY = "compaction"
"""Where ``Compaction`` keeps its state in ``CompactionRequest.scratch``."""

_MEANINGFUL_SHRINK = 0.95
"""A reactive retry needs the view at or below this share of what overflowed."""
_TRACK_LIMIT = 64
_SESSION_LIMIT = 128


@dataclass(slots=True, eq=False)
class _Track:
    """In-process per-run cache: the state object and the incrementally rendered view."""

    state: CompactionState
    counter: TokenCounter
    scratch: dict[str, Any] | None = None
    blob: dict[str, Any] | None = None
    blob_version: int = -1
    dirty: bool = False
    calibrated: bool = False
    """The calibration folded a sample since the state was last written to the scratch."""
    checked: bool = False
    head: tuple[TranscriptEntry, ...] = ()
    head_tokens: int = 0
    body_len: int = 0
    first: TranscriptEntry | None = None
    last: TranscriptEntry | None = None
    rendered_at: int = -1
    recall: bool = True
    view_body: list[TranscriptEntry] = field(default_factory=list)
    view_tokens: int = 0
    covered: int = 0
    lead: int = 0
    tools_tokens: int = -1
    """Schema tokens of the last view's tools (-1: none seen yet in this process)."""
    probe: WindowProbe = field(default_factory=WindowProbe)
    warned_tail: bool = False

    @property
    def raw_view(self) -> int:
        return self.head_tokens + self.view_tokens


class Compaction:
    """The default ``ContextPolicy``: view-only compaction with recall.

    ``context_window``: tokens (``None`` = ask the provider; see window resolution).
    ``compact_at``/``compact_to``: trigger and target watermarks, a fraction of the usable
    window (float) or tokens (int); usable = window - ``reserve_output_tokens``.
    ``keep_recent_tokens``: the protected tail (``None`` = usable // 5). ``stages``: your
    pipeline (``None`` = offload, clear, summarise). ``summarizer``: for the default
    pipeline (``None`` = ``LLMSummarizer()``). ``image_tokens``: flat cost per image part.
    ``store``: a ``ResultStore`` for offloaded outputs (``None`` = recall uses the
    transcript).

    ``reserve_output_tokens``: room kept for the reply (``None`` = min(16_384,
    window // 4), so small windows keep most of their room for the prompt).

    Raises ``ContextConfigError`` (a ``UserError`` and a ``ValueError``) for invalid
    arguments: ``compact_to >= compact_at`` when both are the same kind, or a reserve that
    leaves nothing of the window, here when ``context_window`` is given, else on the first
    call that knows the window.
    """

    def __init__(
        self,
        context_window: int | None = None,
        compact_at: float | int = 0.85,
        compact_to: float | int = 0.60,
        keep_recent_tokens: int | None = None,
        reserve_output_tokens: int | None = None,
        stages: Sequence[Stage] | None = None,
        summarizer: Summarizer | None = None,
        image_tokens: int = 1_600,
        store: ResultStore | None = None,
    ) -> None:
        if context_window is not None:
            check_count("context_window", context_window, minimum=1)
        self.compact_at = check_watermark("compact_at", compact_at)
        self.compact_to = check_watermark("compact_to", compact_to)
        if type(compact_at) is type(compact_to) and compact_to >= compact_at:
            raise ContextConfigError(
                f"compact_to ({compact_to!r}) must be below compact_at ({compact_at!r})",
                hint="compaction starts at compact_at and shrinks the view to compact_to",
            )
        if keep_recent_tokens is not None:
            check_count("keep_recent_tokens", keep_recent_tokens)
        if reserve_output_tokens is not None:
            check_reserve(reserve_output_tokens, context_window)
        check_count("image_tokens", image_tokens)
        self.context_window = context_window
        self.keep_recent_tokens = keep_recent_tokens
        self.reserve_output_tokens = reserve_output_tokens
        self.image_tokens = image_tokens
        self.store = store
        self.summarizer = summarizer
        self.stages: tuple[Stage, ...] = (
            tuple(stages)
            if stages is not None
            else (OffloadToolResults(), ClearToolResults(), SummarizeHistory(summarizer))
        )
        self._recall: Tool | None = None
        self._budget_cache: tuple[tuple[object, ...], TokenBudget] | None = None
        self._tracks: OrderedDict[tuple[str, object], _Track] = OrderedDict()
        self._sessions: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def tools(self) -> list[Tool]:
        """The tools this policy ships: ``recall_tool_result`` over ``store``."""
        if self._recall is None:
            self._recall = make_recall_tool(self.store, archived=self._archived_digest)
        return [self._recall]

    def _archived_digest(self, call_id: str, ctx: RunContext[Any]) -> str | None:
        """The digest ``call_id``'s output was offloaded under, from the run's decisions
        (carried from the session, so it outlives a ``trim_tool_results``)."""
        track = self._tracks.get(("run", ctx.run_id))
        record = track.state.offloaded.get(call_id) if track is not None else None
        return record.digest if record is not None else None

    def __repr__(self) -> str:
        return (
            f"Compaction(context_window={self.context_window!r}, compact_at={self.compact_at!r}, "
            f"compact_to={self.compact_to!r}, stages={[s.name for s in self.stages]!r})"
        )

    # -- the seam ------------------------------------------------------------------------

    async def compact(self, req: CompactionRequest) -> ContextResult:
        """Build the view for one call (proactive, or reactive when ``req.overflow``)."""
        track = self._track_for(req)
        entries = req.entries
        recall = RECALL_TOOL_NAME in req.tool_names
        head_n = self._sync(track, entries, recall)
        tools_tokens = track.counter.count_tools(req.tools)
        state = track.state
        if not req.overflow:
            self._calibrate(req, track, tools_tokens)
        if self.context_window is None and not track.probe.probed:
            await track.probe.claimed_by(req.provider)  # once per run: the only wait here
        window = self._window(req, track)
        before = self._calibrated(track.raw_view, state, tools_tokens)
        budget = self._budget(window, before, overflow=req.overflow)
        if budget is not None and (req.overflow or before > budget.trigger_tokens):
            result = await self._burst(
                req, track, head_n, budget, before, tools_tokens, recall, window is not None
            )
        else:
            result = self._plain(entries, track, before)
        state.last_view_estimate = track.raw_view
        track.tools_tokens = tools_tokens
        self._persist(req, track)
        return result

    # -- incremental view ----------------------------------------------------------------

    def _sync(self, track: _Track, entries: Sequence[TranscriptEntry], recall: bool) -> int:
        """Bring the cached view up to date with ``entries``; returns the head length."""
        if self._sync_appended(track, entries, recall):
            return len(track.head)
        head_n = leading_system_count(entries)
        head = tuple(entries[:head_n])
        if len(head) != len(track.head) or any(
            a is not b for a, b in zip(head, track.head, strict=True)
        ):
            track.head = head
            track.head_tokens = track.counter.count(head)
        n_body = len(entries) - head_n
        known = track.body_len
        same_prefix = known <= n_body and (
            known == 0
            or (entries[head_n] is track.first and entries[head_n + known - 1] is track.last)
        )
        if not same_prefix:
            track.checked = False
        if not track.checked:
            self._verify(track, entries, head_n)
        new = entries[head_n + known :] if same_prefix else ()
        if any(_reuses_decided_id(e, track.state) for e in new):
            # A new call reuses a decided id: that decision is now ambiguous (prune it).
            self._verify(track, entries, head_n)
        if same_prefix and track.rendered_at == track.state.version and track.recall == recall:
            if new:
                state, counter = track.state, track.counter
                for e in new:
                    r = render_entry(e, state, recall=recall)
                    track.view_body.append(r)
                    track.view_tokens += counter.count_entry(r)
        else:
            self._render_all(track, entries, head_n, recall)
        track.body_len = n_body
        track.first = entries[head_n] if n_body else None
        track.last = entries[-1] if n_body else None
        return head_n

    @staticmethod
    def _sync_appended(track: _Track, entries: Sequence[TranscriptEntry], recall: bool) -> bool:
        """The per-call fast path of ``_sync``: ``True`` when ``entries`` is the transcript of
        the last call plus appended entries, which are then rendered and counted.

        It is the loop's every-turn case, so it proves the same facts as the general path
        with fewer steps: the same head objects, then the first known body entry (not a
        system input, so the head did not grow) and the last one, by identity. Anything
        else (a first call, a swapped head, a rewritten body, a new decision, an appended
        call that reuses a decided id) takes the general path.
        """
        known = track.body_len
        state = track.state
        if not known or not track.checked:
            return False
        if track.rendered_at != state.version or track.recall != recall:
            return False
        head = track.head
        h = len(head)
        if len(entries) < h + known or entries[h] is not track.first:
            return False
        for i, entry in enumerate(head):
            if entries[i] is not entry:
                return False
        tail = entries[h + known - 1 :]  # the last known entry, then the new ones
        if tail[0] is not track.last:
            return False
        if len(tail) == 1:
            return True
        new = tail[1:]
        if state.cleared or state.offloaded:
            if any(_reuses_decided_id(e, state) for e in new):
                return False
            new = [render_entry(e, state, recall=recall) for e in new]
        # (With no id-keyed decision every entry renders as itself.)
        track.view_body.extend(new)
        track.view_tokens += track.counter.count(new)
        track.body_len = known + len(new)
        track.last = tail[-1]
        return True

    def _render_all(
        self, track: _Track, entries: Sequence[TranscriptEntry], head_n: int, recall: bool
    ) -> None:
        view = render_view(entries, track.state, recall=recall)
        track.view_body = view[head_n:]
        track.view_tokens = track.counter.count(track.view_body)
        track.covered, track.lead = rendered_frontier(track.state, len(entries) - head_n)
        track.rendered_at = track.state.version
        track.recall = recall

    def _verify(self, track: _Track, entries: Sequence[TranscriptEntry], head_n: int) -> None:
        """Check decisions against this transcript: drop stale or ambiguous (reused id)
        records and a summary whose covered prefix was rewritten (rewinding a frontier that
        splits a pair)."""
        state = track.state
        body = entries[head_n:]
        calls = Counter(e.call_id for e in body if isinstance(e, ToolCallEntry))
        reused = {cid for cid, n in calls.items() if n > 1}
        if state.prune_stale(set(calls), reused):
            state.version += 1
        summary = state.summary
        if summary is not None:
            covered = _still_valid(body, summary.covered, summary.fingerprint)
            if covered is None:
                _log.info("history before the summary frontier changed; resetting the summary")
                state.set_summary(None)
            elif covered != summary.covered:
                state.set_summary(
                    SummaryState(
                        text=summary.text, covered=covered, fingerprint=fingerprint(body[:covered])
                    )
                )
        omitted = state.omitted
        if omitted is not None:
            covered = _still_valid(body, omitted.covered, omitted.fingerprint)
            if covered != omitted.covered:
                state.set_omitted(
                    None
                    if covered is None
                    else OmissionState(covered=covered, fingerprint=fingerprint(body[:covered]))
                )
        track.checked = True

    # -- calibration and window ----------------------------------------------------------

    def _calibrate(self, req: CompactionRequest, track: _Track, tools_now: int) -> None:
        state = track.state
        real, estimated = req.last_input_tokens, state.last_view_estimate
        if real is None or isinstance(real, bool) or estimated is None or estimated <= 0:
            return
        # The tools of the call that produced `real`, not today's (a handoff swaps them).
        previous_tools = track.tools_tokens if track.tools_tokens >= 0 else tools_now
        state.calibration.fold(real - previous_tools, estimated)
        track.calibrated = True
        state.last_view_estimate = None  # one sample per view

    @staticmethod
    def _calibrated(raw: int, state: CompactionState, tools_tokens: int) -> int:
        return state.calibration.tokens(raw) + tools_tokens

    def _window(self, req: CompactionRequest, track: _Track) -> int | None:
        """The window this call is sized against (the provider was asked already)."""
        state = track.state
        learned = None
        if req.reported_window is not None or state.learned_windows:
            # (Otherwise there is nothing to learn or look up: the usual call skips the key.)
            key = window_key(req.provider, req.model)
            if learn_window(
                state,
                key,
                reported=req.reported_window,
                last_input_tokens=req.last_input_tokens,
                overflow=req.overflow,
            ):
                track.dirty = True
            learned = state.learned_windows.get(key)
        base = self.context_window
        if base is None:
            base = track.probe.claimed
        return resolve_window(base, learned)

    def _budget(self, window: int | None, before: int, *, overflow: bool) -> TokenBudget | None:
        if window is None:
            if not overflow:
                return None  # no window information: only the reactive path runs
            return TokenBudget(max(2, before), reserve_output_tokens=0).aggressive()
        config = (
            window,
            self.reserve_output_tokens,
            self.compact_at,
            self.compact_to,
            self.keep_recent_tokens,
        )
        cached = self._budget_cache
        if cached is not None and cached[0] == config:
            budget = cached[1]  # validated and resolved already (a per-call saving)
        else:
            budget = TokenBudget(
                window,
                reserve_output_tokens=self.reserve_output_tokens,
                compact_at=self.compact_at,
                compact_to=self.compact_to,
                keep_recent_tokens=self.keep_recent_tokens,
            )
            self._budget_cache = (config, budget)
        return budget.aggressive() if overflow else budget

    # -- results -------------------------------------------------------------------------

    def _view(self, entries: Sequence[TranscriptEntry], track: _Track) -> Sequence[TranscriptEntry]:
        if not track.state.has_decisions:
            return entries  # nothing decided: the transcript itself, no copy
        return [*track.head, *track.view_body]

    @staticmethod
    def _plain(entries: Sequence[TranscriptEntry], track: _Track, before: int) -> ContextResult:
        changed = track.state.has_decisions
        return ContextResult(
            # Nothing decided: the transcript itself, no copy.
            entries=[*track.head, *track.view_body] if changed else entries,
            changed=changed,
            tokens_before=before,
            tokens_after=before,
        )

    async def _burst(
        self,
        req: CompactionRequest,
        track: _Track,
        head_n: int,
        budget: TokenBudget,
        before: int,
        tools_tokens: int,
        recall: bool,
        window_known: bool,
    ) -> ContextResult:
        """Run the stages until the view is under target, then re-render."""
        entries, state, counter = req.entries, track.state, track.counter
        body = list(entries[head_n:])

        def cost(i: int) -> int:
            if i < track.covered:
                return 0
            return counter.count_entry(track.view_body[track.lead + i - track.covered])

        # Budgets are in the provider's tokens, per-entry costs in lovia's estimate: every
        # comparison converts the budget once (ratio = provider tokens per estimated one).
        ratio = state.ratio
        shared = before - int(ratio * track.view_tokens)  # head, overhead and tool schemas
        tail_start = protected_tail_start(
            body,
            cost,
            int(budget.tail_tokens / ratio),
            anchor_limit=max(0, int((budget.target_tokens - shared) / ratio)),
        )
        if tail_start <= track.covered and not track.warned_tail:
            track.warned_tail = True
            _log.warning(
                "the protected tail covers the whole view (%d tokens kept); lower "
                "keep_recent_tokens or raise the window",
                budget.tail_tokens,
            )
        calls = Counter(e.call_id for e in body if isinstance(e, ToolCallEntry))
        ctx = StageContext(
            request=req,
            state=state,
            counter=counter,
            budget=budget,
            tail_start=tail_start,
            aggressive=req.overflow,
            estimate=before,
            store=self.store,
            recall=recall,
            reused_ids=frozenset(cid for cid, n in calls.items() if n > 1),
            window_known=window_known,
        )
        start_version = state.version
        for stage in self.stages:
            if not ctx.over_target:
                break
            try:
                new = await stage.plan(body, ctx)
            except Exception:  # noqa: BLE001 - fail-open boundary: a broken stage keeps earlier decisions
                _log.warning(
                    "compaction stage %r failed", getattr(stage, "name", stage), exc_info=True
                )
                new = False
            if new or state.version != track.rendered_at:
                self._render_all(track, entries, head_n, recall)
                ctx.estimate = self._calibrated(track.raw_view, state, tools_tokens)
        after = self._calibrated(track.raw_view, state, tools_tokens)
        # The last resort: what the stages left still does not fit (or, reactive, did not
        # shrink enough to be worth a retry), so the oldest span leaves the view.
        limit = budget.usable
        if req.overflow:
            limit = min(limit, int(before * _MEANINGFUL_SHRINK))
        target = budget.target_tokens
        if after > limit and self._leave_out(body, track, cost, after, (target, limit), ctx):
            self._render_all(track, entries, head_n, recall)
            after = self._calibrated(track.raw_view, state, tools_tokens)
        decided = state.version != start_version
        compacted = decided and (not req.overflow or after <= before * _MEANINGFUL_SHRINK)
        reason = "overflow" if req.overflow else "threshold"
        detail = (*ctx.detail, f"view {before} -> {after} tokens (window {budget.window})")
        return ContextResult(
            entries=self._view(entries, track),
            changed=state.has_decisions,
            compacted=compacted,
            reason=reason if decided else None,
            summary=ctx.summary_text,
            tokens_before=before,
            tokens_after=after,
            detail=detail,
        )

    @staticmethod
    def _leave_out(
        body: Sequence[TranscriptEntry],
        track: _Track,
        cost: Callable[[int], int],
        after: int,
        budget: tuple[int, int],
        ctx: StageContext,
    ) -> bool:
        """Leave the oldest pair-safe span out of the view: the shortest one that brings
        the view to the target without reaching into the protected tail, else the
        shortest that brings it under the limit (``budget`` is ``(target, limit)``). Never
        the last block, and nothing when even that would not fit. ``True`` when a span
        was decided (a marker in the view stands in for it; the record keeps it)."""
        target, limit = budget
        start = track.covered
        cuts = [c for c in pair_safe_cuts(body) if start < c < len(body)]
        if not cuts:
            return False
        ratio = ctx.state.ratio
        marker = int(ratio * ctx.counter.count_entry(omission_marker(body[start : cuts[0]])))
        removed, i = 0, start
        fits: int | None = None
        reaches: int | None = None
        for cut in cuts:
            removed += sum(cost(j) for j in range(i, cut))
            i = cut
            projected = after - int(ratio * removed) + marker
            if projected <= limit and fits is None:
                fits = cut
            if projected <= target:
                reaches = cut
                break
        fitting = reaches if reaches is not None and reaches <= ctx.tail_start else fits
        if fitting is None:
            return False
        ctx.state.set_omitted(
            OmissionState(covered=fitting, fingerprint=fingerprint(body[:fitting]))
        )
        ctx.detail.append(
            f"left the oldest {fitting - start} entries out of the view to fit the window "
            "(the record still holds them)"
        )
        return True

    def release(self, run_id: str | None) -> None:
        """Forget the per-run view state of ``run_id`` (the loop calls this when a run ends).

        An instance shared by many runs would otherwise keep recent runs' rendered views,
        full tool outputs included, until they age out of its bounded cache. Decisions that
        matter later live in the run's scratch and the session meta, not here.
        """
        if run_id is not None:
            self._tracks.pop(("run", run_id), None)

    # -- state ---------------------------------------------------------------------------

    def _track_for(self, req: CompactionRequest) -> _Track:
        key: tuple[str, object] = (
            ("run", req.run_id) if req.run_id else ("scratch", id(req.scratch))
        )
        track = self._tracks.get(key)
        blob = req.scratch.get(SCRATCH_KEY)
        if track is not None and (
            blob is track.blob or (blob is None and track.scratch is req.scratch)
        ):
            self._tracks.move_to_end(key)
            return track
        state = self._load_state(req, blob)
        if state.failures_run != req.run_id:
            state.summary_failures = 0  # the breaker is per run
            state.failures_run = req.run_id
        estimator = req.provider if isinstance(req.provider, TokenEstimator) else None
        track = _Track(
            state=state,
            counter=TokenCounter(image_tokens=self.image_tokens, estimator=estimator),
            scratch=req.scratch,
        )
        self._tracks[key] = track
        while len(self._tracks) > _TRACK_LIMIT:
            self._tracks.popitem(last=False)
        return track

    def _load_state(self, req: CompactionRequest, blob: object) -> CompactionState:
        if blob is not None:
            return CompactionState.from_dict(blob)
        if req.session_id is not None and req.session_id in self._sessions:
            return CompactionState.from_dict(self._sessions[req.session_id])
        return CompactionState()

    def _persist(self, req: CompactionRequest, track: _Track) -> None:
        """Write the state into the scratch; O(1) unless decisions changed."""
        state = track.state
        if track.blob is None or track.blob_version != state.version or track.dirty:
            track.blob = state.to_dict()
            track.blob_version = state.version
            track.dirty = False
        else:
            blob = track.blob
            if track.calibrated:  # (only a fold changes it: most calls skip the copy)
                blob["calibration"] = state.calibration.to_dict()
            blob["last_view_estimate"] = state.last_view_estimate
            blob["summary_failures"] = state.summary_failures
            blob["failures_run"] = state.failures_run
        track.calibrated = False
        req.scratch[SCRATCH_KEY] = track.blob
        if req.session_id is not None:
            self._sessions[req.session_id] = track.blob
            self._sessions.move_to_end(req.session_id)
            while len(self._sessions) > _SESSION_LIMIT:
                self._sessions.popitem(last=False)


def _still_valid(body: Sequence[TranscriptEntry], covered: int, digest: str) -> int | None:
    """A frontier checked against ``body``: ``covered`` itself, a pair-safe cut rewound
    from it, or ``None`` when the covered prefix was rewritten (or no cut is left)."""
    if covered > len(body) or fingerprint(body[:covered]) != digest:
        return None
    cuts = [c for c in pair_safe_cuts(body) if 0 < c <= covered]
    return cuts[-1] if cuts else None


def _reuses_decided_id(entry: TranscriptEntry, state: CompactionState) -> bool:
    return isinstance(entry, ToolCallEntry) and (
        entry.call_id in state.cleared or entry.call_id in state.offloaded
    )
