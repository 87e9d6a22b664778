from __future__ import annotations

import json

from lovia.context import Calibration, CompactionState, OffloadRecord, SummaryState, fingerprint
from lovia.parts import ImagePart, TextPart
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

from .ctx_support import transcript


def _state() -> CompactionState:
    return CompactionState(
        cleared={"b", "a"},
        offloaded={"c": OffloadRecord(preview="pre", chars=9_000, digest="d" * 64)},
        summary=SummaryState(text="## Key facts\nx", covered=4, fingerprint="f"),
        calibration=Calibration(ratio=1.3, overhead=120.0),
        last_view_estimate=1234,
        summary_failures=2,
        failures_run="run-1",
        learned_windows={"host|m": 32_000},
    )


def test_state_round_trips_through_json() -> None:
    state = _state()
    again = CompactionState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again.to_dict() == state.to_dict()
    assert again.cleared == {"a", "b"} and again.offloaded == state.offloaded
    assert again.summary == state.summary


def test_loading_tolerates_garbage_clamps_ratio_and_drops_bad_windows() -> None:
    assert CompactionState.from_dict("nope").to_dict() == CompactionState().to_dict()
    data = _state().to_dict()
    data.update(
        calibration={"ratio": 99.0, "overhead": -4, "samples": 3, "sw": "x"},
        cleared=["ok", 3, None],
        summary={"text": 1},
        learned_windows={"a": 1000, "b": -5, "c": "big", "d": True},
        offloaded={"x": {"preview": "p"}, "y": 5},
        summary_failures=-1,
    )
    state = CompactionState.from_dict(data)
    assert state.ratio == 2.5 and state.calibration.overhead == 0.0
    assert state.calibration.samples == 0  # malformed statistics start over
    assert state.cleared == {"ok"}
    assert state.summary is None and state.offloaded == {}
    assert state.learned_windows == {"a": 1000}
    assert state.summary_failures == 0


def test_pre_digest_scratch_is_discarded_wholesale() -> None:
    old = _state().to_dict()
    old["v"] = 1
    assert CompactionState.from_dict(old).to_dict() == CompactionState().to_dict()


def test_fingerprint_ignores_result_length_but_not_structure() -> None:
    base = transcript(3, 50)
    trimmed = [
        ToolResultEntry(e.call_id, e.output[:5]) if isinstance(e, ToolResultEntry) else e
        for e in base
    ]
    assert fingerprint(base) == fingerprint(trimmed)
    renamed = [
        ToolCallEntry("other", "lookup") if isinstance(e, ToolCallEntry) else e for e in base
    ]
    assert fingerprint(base) != fingerprint(renamed)
    errored = [
        ToolResultEntry(e.call_id, e.output, is_error=True) if isinstance(e, ToolResultEntry) else e
        for e in base
    ]
    assert fingerprint(base) != fingerprint(errored)


def test_fingerprint_covers_every_part_of_a_multipart_input() -> None:
    a = InputEntry("user", (TextPart("look"), ImagePart(url="https://x/1.png")))
    b = InputEntry("user", (TextPart("look"), ImagePart(url="https://x/2.png")))
    assert fingerprint([a]) != fingerprint([b])


def test_decisions_only_grow_and_version_tracks_them() -> None:
    state = CompactionState()
    assert state.decide_clear("a") and not state.decide_clear("a")
    rec = OffloadRecord(preview="", chars=1, digest="d")
    assert state.decide_offload("b", rec) and not state.decide_offload("b", rec)
    assert state.version == 2 and state.has_decisions
