"""``Calibration``: lovia's token estimate mapped onto the provider's count.

The model is linear: ``real = overhead + ratio * estimate`` (the tool schemas the request
carries are counted apart and added on top, unmultiplied). ``ratio`` absorbs the
tokenizer's difference from UTF-8 bytes // 4; ``overhead`` is what the endpoint adds to
every prompt and lovia never sees (a vendor's tool-use system prompt, chat framing).
One sample cannot tell the two apart; two samples at different view sizes can, so the
fit is a least-squares line through the recent samples (each older sample weighs
``1 - ALPHA`` of the next), with ``ratio`` clamped to ``[RATIO_MIN, RATIO_MAX]`` and
``overhead`` to ``[0, OVERHEAD_MAX]``. While the views are all about one size the line is
undetermined and only ``ratio`` moves, with the last ``overhead`` kept.

Learning is guarded against poison. The first sample moves ``ratio`` half way only (a
lone sample mixes overhead into the multiplier). A report the model cannot explain is
dropped: zero or negative, below ``RATIO_MIN`` / ``SLACK`` of the estimate, or above
``RATIO_MAX * SLACK`` of it plus ``OVERHEAD_MAX`` (an absurd usage report). So is a
cumulative count (a counter of every prompt so far, not of this one), recognised by its
step from the previous report matching this whole view rather than the view's growth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

__all__ = ["ALPHA", "Calibration", "OVERHEAD_MAX", "RATIO_MAX", "RATIO_MIN"]

ALPHA = 0.2
"""How much of the fit's weight the newest sample takes from the older ones."""
RATIO_MIN = 0.5
RATIO_MAX = 2.5
OVERHEAD_MAX = 4_096
"""The largest fixed per-prompt overhead the model will attribute to an endpoint."""
SLACK = 1.5
"""How far past the model's reach a report may be before it is dropped as an outlier."""
_FIRST_STEP = 0.5
_MIN_SPREAD = 0.05
"""Views must differ by this share of their mean size before overhead and ratio split."""
_SUMS = ("sw", "sx", "sy", "sxx", "sxy")


@dataclass(slots=True, kw_only=True)
class Calibration:
    """The calibration model and the statistics it is fitted from (JSON-safe).

    ``ratio`` and ``overhead``: the fitted line. ``samples``: accepted samples so far.
    ``sw``..``sxy``: decayed weighted sums of the accepted (estimate, real) pairs.
    ``last_report``/``last_estimate``: the latest report and the estimate it answered,
    accepted or not (the cumulative-count check compares with them).
    """

    ratio: float = 1.0
    overhead: float = 0.0
    samples: int = 0
    sw: float = 0.0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0
    last_report: int | None = None
    last_estimate: int | None = None

    def tokens(self, estimate: int) -> int:
        """The provider's expected count for a view lovia estimates at ``estimate``."""
        return int(self.overhead + self.ratio * estimate)

    def fold(self, real: int, estimate: int) -> bool:
        """Learn from one report: the provider counted ``real`` tokens for a view lovia
        estimated at ``estimate`` (tool schemas already taken out). ``True`` when the
        sample was accepted."""
        previous, previous_estimate = self.last_report, self.last_estimate
        self.last_report, self.last_estimate = real, estimate
        if estimate <= 0 or not self._plausible(real, estimate):
            return False
        if (
            previous is not None
            and previous_estimate is not None
            and self._looks_cumulative(real - previous, estimate, previous_estimate)
        ):
            return False
        decay = 1.0 - ALPHA
        self.sw = self.sw * decay + 1.0
        self.sx = self.sx * decay + estimate
        self.sy = self.sy * decay + real
        self.sxx = self.sxx * decay + estimate * estimate
        self.sxy = self.sxy * decay + estimate * real
        self.samples += 1
        if self.samples == 1:
            target = (real - self.overhead) / estimate
            self.ratio = _clamp(self.ratio + _FIRST_STEP * (target - self.ratio))
        else:
            self._fit()
        return True

    def _plausible(self, real: int, estimate: int) -> bool:
        low = RATIO_MIN * estimate / SLACK
        high = RATIO_MAX * estimate * SLACK + OVERHEAD_MAX
        return real > 0 and low <= real <= high

    def _looks_cumulative(self, step: int, estimate: int, previous_estimate: int) -> bool:
        """A per-prompt count steps by the view's growth; a cumulative one by the whole
        view. The step is cumulative when it sits nearer the second and the view did not
        merely start from nothing."""
        if step <= 0 or previous_estimate <= 0:
            return False
        per_prompt = self.ratio * (estimate - previous_estimate)
        cumulative = self.tokens(estimate)
        return abs(step - cumulative) < abs(step - per_prompt)

    def _fit(self) -> None:
        mean_x, mean_y = self.sx / self.sw, self.sy / self.sw
        variance = self.sxx / self.sw - mean_x * mean_x
        if variance > (_MIN_SPREAD * mean_x) ** 2:
            slope = (self.sxy / self.sw - mean_x * mean_y) / variance
            ratio = _clamp(slope)
            overhead = min(OVERHEAD_MAX, max(0.0, mean_y - ratio * mean_x))
        else:
            overhead = min(self.overhead, max(0.0, mean_y - RATIO_MIN * mean_x))
        self.overhead = overhead
        self.ratio = _clamp((mean_y - overhead) / mean_x)

    # -- serialisation -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe form."""
        return {
            "ratio": self.ratio,
            "overhead": self.overhead,
            "samples": self.samples,
            **{k: getattr(self, k) for k in _SUMS},
            "last_report": self.last_report,
            "last_estimate": self.last_estimate,
        }

    @classmethod
    def from_dict(cls, data: object, *, ratio: object = None) -> Calibration:
        """Rebuild from ``to_dict`` output (anything malformed becomes a default);
        ``ratio`` seeds an older state that stored only a ratio."""
        out = cls()
        fields = data if isinstance(data, dict) else {"ratio": ratio}
        seeded = _float(fields.get("ratio"))
        if seeded is not None:
            out.ratio = _clamp(seeded)
        overhead = _float(fields.get("overhead"))
        if overhead is not None:
            out.overhead = min(float(OVERHEAD_MAX), max(0.0, overhead))
        samples = fields.get("samples")
        sums = [_float(fields.get(k)) for k in _SUMS]
        complete = all(v is not None for v in sums) and (sums[0] or 0.0) > 0
        if _is_count(samples) and samples > 0 and complete:
            out.samples = samples
            for k, v in zip(_SUMS, sums, strict=True):
                setattr(out, k, v)
        report, estimate = fields.get("last_report"), fields.get("last_estimate")
        if _is_count(report) and _is_count(estimate):
            out.last_report, out.last_estimate = report, estimate
        return out


def _clamp(value: float) -> float:
    return min(RATIO_MAX, max(RATIO_MIN, value))


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
