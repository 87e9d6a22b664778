"""``CompactionState``: the sticky decisions a view is rendered from, and ``fingerprint``.

Invariant: decisions are monotonic. Stages only add (a cleared id, an offload record, a
summary that covers more, a left-out span that reaches further); nothing here removes a
decision that still applies, because an
undone decision would change the rendered prefix and cold the provider's prompt cache.
Three things are dropped on purpose: records whose ``call_id`` no longer appears in the
transcript (stale, they render nothing), records whose ``call_id`` a later call reused
(ambiguous: applied by id they would hide the fresh result too), and a summary whose
covered prefix no longer matches its ``fingerprint`` (the history was rewritten, e.g.
trimmed offline), and a left-out span likewise; the ``call_id``-keyed decisions survive
that reset.

State is JSON-safe (``to_dict``/``from_dict``) so it rides in the checkpoint scratch and the
session segment meta. Loading tolerates garbage: malformed fields fall back to defaults,
the calibration is clamped (see ``Calibration.from_dict``), bad learned windows are
dropped, and scratch from before offload records carried a digest is discarded wholesale.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from lovia.parts import ContentPart, TextPart
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .calibration import Calibration

__all__ = [
    "CompactionState",
    "OffloadRecord",
    "OmissionState",
    "STATE_VERSION",
    "SummaryState",
    "fingerprint",
]

STATE_VERSION = 2
"""Version of the serialised state; version 1 (offload records without a digest) is discarded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadRecord:
    """An offloaded tool result: its ``preview``, original length and content ``digest``."""

    preview: str
    chars: int
    digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryState:
    """The running summary: its ``text``, how many body entries it ``covered`` (entries
    after the leading system inputs) and the ``fingerprint`` of that covered prefix."""

    text: str
    covered: int
    fingerprint: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OmissionState:
    """The last resort's decision: the first ``covered`` body entries are left out of the
    view (a marker stands in for them; the record keeps them), with the ``fingerprint``
    of that prefix."""

    covered: int
    fingerprint: str


@dataclass(slots=True, kw_only=True)
class CompactionState:
    """Sticky decisions plus calibration, learned windows and the summary breaker.

    ``cleared``: call_ids whose results render as clear markers. ``offloaded``: call_id ->
    ``OffloadRecord``. ``summary``: the running summary or ``None``. ``omitted``: body
    entries the last resort leaves out of the view (``OmissionState`` or ``None``).
    ``calibration``: the estimate-to-provider model (``ratio`` is its multiplier,
    ``overhead`` its fixed part; see ``Calibration``). ``last_view_estimate``:
    the uncalibrated estimate of the last view sent (the next calibration sample's
    denominator). ``summary_failures``: consecutive summariser failures in ``failures_run``.
    ``learned_windows``: ``window_key`` -> the window an endpoint named.
    """

    cleared: set[str] = field(default_factory=set)
    offloaded: dict[str, OffloadRecord] = field(default_factory=dict)
    summary: SummaryState | None = None
    omitted: OmissionState | None = None
    calibration: Calibration = field(default_factory=Calibration)
    last_view_estimate: int | None = None
    summary_failures: int = 0
    failures_run: str | None = None
    learned_windows: dict[str, int] = field(default_factory=dict)
    version: int = 0
    """In-process only: bumped on every new decision (render caches key on it)."""

    def decide_clear(self, call_id: str) -> bool:
        """Record a clear decision; ``True`` when it is new."""
        if call_id in self.cleared:
            return False
        self.cleared.add(call_id)
        self.version += 1
        return True

    def decide_offload(self, call_id: str, record: OffloadRecord) -> bool:
        """Record an offload decision; ``True`` when it is new."""
        if call_id in self.offloaded:
            return False
        self.offloaded[call_id] = record
        self.version += 1
        return True

    def set_summary(self, summary: SummaryState | None) -> None:
        """Replace the running summary (a fold only ever extends coverage)."""
        self.summary = summary
        self.version += 1

    def set_omitted(self, omitted: OmissionState | None) -> None:
        """Replace the left-out span (the last resort only ever extends it)."""
        self.omitted = omitted
        self.version += 1

    @property
    def ratio(self) -> float:
        """The calibration multiplier (``calibration.ratio``)."""
        return self.calibration.ratio

    @property
    def has_decisions(self) -> bool:
        """Whether anything would render differently from the transcript."""
        return bool(
            self.cleared or self.offloaded or self.summary is not None or self.omitted is not None
        )

    # -- serialisation -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe form (sorted ids, so equal states serialise equally)."""
        return {
            "v": STATE_VERSION,
            "cleared": sorted(self.cleared),
            "offloaded": {
                cid: {"preview": r.preview, "chars": r.chars, "digest": r.digest}
                for cid, r in sorted(self.offloaded.items())
            },
            "summary": None
            if self.summary is None
            else {
                "text": self.summary.text,
                "covered": self.summary.covered,
                "fingerprint": self.summary.fingerprint,
            },
            "omitted": None
            if self.omitted is None
            else {"covered": self.omitted.covered, "fingerprint": self.omitted.fingerprint},
            "calibration": self.calibration.to_dict(),
            "last_view_estimate": self.last_view_estimate,
            "summary_failures": self.summary_failures,
            "failures_run": self.failures_run,
            "learned_windows": dict(sorted(self.learned_windows.items())),
        }

    @classmethod
    def from_dict(cls, data: object) -> CompactionState:
        """Rebuild from ``to_dict`` output; anything malformed becomes a default."""
        state = cls()
        if not isinstance(data, dict) or data.get("v") != STATE_VERSION:
            return state  # garbage or pre-digest scratch: start over
        cleared = data.get("cleared")
        if isinstance(cleared, list):
            state.cleared = {c for c in cleared if isinstance(c, str)}
        offloaded = data.get("offloaded")
        if isinstance(offloaded, dict):
            for cid, rec in offloaded.items():
                parsed = _offload_from(rec)
                if isinstance(cid, str) and parsed is not None:
                    state.offloaded[cid] = parsed
        state.summary = _summary_from(data.get("summary"))
        state.omitted = _omission_from(data.get("omitted"))
        state.calibration = Calibration.from_dict(data.get("calibration"), ratio=data.get("ratio"))
        estimate = data.get("last_view_estimate")
        if _is_count(estimate):
            state.last_view_estimate = estimate
        failures = data.get("summary_failures")
        if _is_count(failures):
            state.summary_failures = failures
        run = data.get("failures_run")
        state.failures_run = run if isinstance(run, str) else None
        windows = data.get("learned_windows")
        if isinstance(windows, dict):
            state.learned_windows = {
                k: v for k, v in windows.items() if isinstance(k, str) and _is_count(v) and v > 0
            }
        return state

    def prune_stale(self, present_ids: set[str], reused_ids: Set[str] = frozenset()) -> bool:
        """Drop id-keyed records whose call_id is absent from the transcript (stale) or
        used by more than one call (ambiguous: the record cannot say which result it
        meant, and applying it to every one would hide a fresh result). ``True`` when
        anything was dropped."""
        before = (len(self.cleared), len(self.offloaded))
        self.cleared = {c for c in self.cleared if c in present_ids and c not in reused_ids}
        for cid in [c for c in self.offloaded if c not in present_ids or c in reused_ids]:
            del self.offloaded[cid]
        return (len(self.cleared), len(self.offloaded)) != before


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _offload_from(rec: object) -> OffloadRecord | None:
    if not isinstance(rec, dict):
        return None
    preview, chars, digest = rec.get("preview"), rec.get("chars"), rec.get("digest")
    if isinstance(preview, str) and _is_count(chars) and isinstance(digest, str) and digest:
        return OffloadRecord(preview=preview, chars=chars, digest=digest)
    return None


def _summary_from(data: object) -> SummaryState | None:
    if not isinstance(data, dict):
        return None
    text, covered, fp = data.get("text"), data.get("covered"), data.get("fingerprint")
    if isinstance(text, str) and text and _is_count(covered) and isinstance(fp, str):
        return SummaryState(text=text, covered=covered, fingerprint=fp)
    return None


def _omission_from(data: object) -> OmissionState | None:
    if not isinstance(data, dict):
        return None
    covered, fp = data.get("covered"), data.get("fingerprint")
    if _is_count(covered) and covered > 0 and isinstance(fp, str):
        return OmissionState(covered=covered, fingerprint=fp)
    return None


# -- fingerprint -------------------------------------------------------------------------


def fingerprint(entries: Sequence[TranscriptEntry]) -> str:
    """A structural hash of ``entries``.

    It covers entry kinds, roles, input text (every part of a multipart input), assistant
    text, call ids, tool names and arguments, and result error flags, but not a tool
    result's output, so trimming stored outputs does not count as a rewrite.
    """
    h = hashlib.sha256()
    for e in entries:
        h.update(_structure(e).encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.hexdigest()[:32]


def _structure(e: TranscriptEntry) -> str:
    if isinstance(e, InputEntry):
        if isinstance(e.content, str):
            return f"i|{e.role}|{_h(e.content)}"
        return f"i|{e.role}|" + ",".join(_part_key(p) for p in e.content)
    if isinstance(e, AssistantTextEntry):
        return f"a|{_h(e.content)}"
    if isinstance(e, ReasoningEntry):
        return "r"
    if isinstance(e, ToolCallEntry):
        return f"c|{e.call_id}|{e.name}|{_h(e.arguments)}"
    assert isinstance(e, ToolResultEntry)
    return f"t|{e.call_id}|{int(e.is_error)}"


def _part_key(p: ContentPart) -> str:
    if isinstance(p, TextPart):
        return f"text:{_h(p.text)}"
    return f"{p.type}:{_h(p.url or '')}:{_h(p.data or '')}"


def _h(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
