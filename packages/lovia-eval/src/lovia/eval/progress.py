"""Progress reporting for ``evaluate()``: a seam and two implementations.

``evaluate(progress=None)`` reports nothing. ``auto_progress(stream)`` picks a live ``rich``
progress bar when ``stream`` is a terminal and ``PlainProgress`` (one line per finished
case) otherwise, so a CI log gets readable lines instead of carriage-return noise. The
``lovia eval`` command writes progress to stderr, which keeps stdout for the report.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from .report import CaseResult, SampleResult

__all__ = ["PlainProgress", "Progress", "RichProgress", "auto_progress"]


class Progress(Protocol):
    """What ``evaluate()`` tells a progress reporter; each method must return quickly."""

    def start(self, cases: int, samples: int) -> None:
        """The evaluation starts: ``cases`` cases, ``samples`` runs in total."""

    def sample_done(self, case_name: str, sample: SampleResult) -> None:
        """One sample finished (its checks included)."""

    def case_done(self, case: CaseResult) -> None:
        """Every sample of one case finished."""

    def finish(self) -> None:
        """The evaluation ended (also on cancellation or ``fail_fast``)."""


class PlainProgress:
    """One line per finished case: ``[3/10] ✓ name (5/5)``. Suits pipes and CI logs."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._cases = 0
        self._done = 0

    def start(self, cases: int, samples: int) -> None:
        self._cases = cases
        self._write(f"running {cases} case(s), {samples} sample(s)")

    def sample_done(self, case_name: str, sample: SampleResult) -> None:
        pass

    def case_done(self, case: CaseResult) -> None:
        self._done += 1
        mark = "✓" if case.passed else "✗"
        ratio = f"{case.successes}/{len(case.samples)}"
        self._write(f"[{self._done}/{self._cases}] {mark} {case.name} ({ratio})")

    def finish(self) -> None:
        pass

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


class RichProgress:
    """A live progress bar over samples, drawn with ``rich`` on a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        console = Console(file=stream if stream is not None else sys.stderr)
        self._bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None
        self._failed = 0

    def start(self, cases: int, samples: int) -> None:
        self._bar.start()
        self._task = self._bar.add_task("eval", total=samples)

    def sample_done(self, case_name: str, sample: SampleResult) -> None:
        self._failed += 0 if sample.passed else 1
        self._bar.update(self._task, advance=1, description=f"eval ({self._failed} failed)")

    def case_done(self, case: CaseResult) -> None:
        pass

    def finish(self) -> None:
        self._bar.stop()


def auto_progress(stream: TextIO | None = None) -> Progress:
    """``RichProgress`` when ``stream`` (default stderr) is a terminal, else ``PlainProgress``."""
    out = stream if stream is not None else sys.stderr
    isatty = getattr(out, "isatty", None)
    if callable(isatty) and isatty():
        return RichProgress(out)
    return PlainProgress(out)
