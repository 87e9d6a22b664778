"""The errors lovia-eval raises, all ``LoviaError`` subclasses with a ``hint``.

The tree::

    LoviaError
    └── EvalError                   anything lovia-eval refuses
        ├── ReportError             a report file or dict is corrupt or has an unknown version
        │   └── DuplicateCaseError  two cases share a name, so a baseline cannot be joined
        ├── RecordingError          a recording file is corrupt or has an unknown version
        │   └── RecordingMissError  a replayed run sent a request the recording does not hold
        └── SuiteError              a suite file cannot be loaded (bad path, attribute, type)

A failing check, a raising agent factory or a failed run is *not* an error: it is sample
data in the report, and the suite keeps going.
"""

from __future__ import annotations

from lovia.exceptions import LoviaError

__all__ = [
    "DuplicateCaseError",
    "EvalError",
    "RecordingError",
    "RecordingMissError",
    "ReportError",
    "SuiteError",
]


class EvalError(LoviaError):
    """Base class of lovia-eval's errors."""


class ReportError(EvalError):
    """A report could not be read: bad JSON, a missing or mistyped field, an unknown version."""


class DuplicateCaseError(ReportError):
    """Case names must be unique to compare reports; ``names`` lists the duplicates."""

    def __init__(self, message: str, *, names: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.names = names


class RecordingError(EvalError):
    """A recording file could not be read or written."""


class RecordingMissError(RecordingError):
    """A replayed run sent a request that is not in the recording.

    ``index`` is the 0-based position of the diverging request in this replay, ``key`` its
    hash, and ``diff`` a unified diff from the recorded request at that position (or the
    closest one) to the request that was sent.
    """

    def __init__(
        self, message: str, *, index: int, key: str, diff: str, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.index = index
        self.key = key
        self.diff = diff


class SuiteError(EvalError):
    """A suite could not be loaded: the file, the attribute or what it holds is wrong."""
