"""Typed results of workspace operations, and ``WorkspaceLimits``.

Every truncation is announced: results carry a ``truncated`` flag or a ``note`` the tool
renderers show to the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CommandResult",
    "DirEntry",
    "DirListing",
    "EditResult",
    "FileBytes",
    "FileChange",
    "FileContent",
    "GrepMatch",
    "GrepResult",
    "ProcessOutput",
    "ProcessStart",
    "ProcessState",
    "ProcessStatus",
    "WorkspaceLimits",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceLimits:
    """Caps on what workspace operations return (all truncation is announced)."""

    max_file_read_chars: int = 50_000
    """Characters per ``read_file`` call; page with ``start``/``end``."""
    max_file_read_bytes: int = 10_000_000
    """Bytes read from one file; a larger file is read as a bounded prefix with a note."""
    max_shell_output_chars: int = 30_000
    """Characters kept per shell stream (head + tail) and per background read (newest)."""
    max_grep_file_bytes: int = 5_000_000
    """Files larger than this are skipped by grep (and counted as skipped)."""
    max_grep_line_chars: int = 400
    """A matching line longer than this is clipped."""
    max_list_results: int = 500
    """Entries returned by ``list_files``."""
    max_grep_matches: int = 100
    """Matches returned by ``grep``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileContent:
    """Lines ``start``..``end`` (1-based, inclusive) of a text file.

    ``total_lines`` counts the file (or the bounded prefix read, see ``note``); ``truncated``
    says the range was cut at ``max_file_read_chars``; an empty ``content`` past EOF.
    """

    path: str
    content: str
    start: int
    end: int
    total_lines: int
    truncated: bool = False
    note: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FileBytes:
    """Raw bytes of a file (``truncated`` when the file is larger than ``max_bytes``)."""

    path: str
    data: bytes
    size: int
    truncated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """A write: ``created`` is true when the file did not exist before."""

    path: str
    created: bool
    chars_written: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EditResult:
    """An edit: how many occurrences were replaced (0 means the text was already equal)."""

    path: str
    replacements: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DirEntry:
    """One entry of a listing: ``path`` is relative to the listed directory."""

    path: str
    is_dir: bool
    size: int | None = None
    symlink_target: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DirListing:
    """A listing (directories first); ``truncated`` when cut at ``max_list_results``.

    Iterating it yields the entries.
    """

    path: str
    entries: tuple[DirEntry, ...]
    truncated: bool = False
    note: str | None = None
    """Set when the walk itself was cut (a huge tree), not only the result list."""

    def __iter__(self) -> Iterator[DirEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepMatch:
    """A matching line: ``line_number`` is 1-based; ``line`` may be clipped."""

    path: str
    line_number: int
    line: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GrepResult:
    """Matches of a search; ``truncated`` when cut at ``max_grep_matches``.

    ``skipped`` counts files left out (binary, oversized, unreadable; denied files are
    left out silently). Iterating it yields the matches.
    """

    pattern: str
    matches: tuple[GrepMatch, ...]
    truncated: bool = False
    skipped: int = 0
    note: str | None = None
    """Set when the walk itself was cut (a huge tree): files beyond it were not searched."""

    def __iter__(self) -> Iterator[GrepMatch]:
        return iter(self.matches)

    def __len__(self) -> int:
        return len(self.matches)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """A finished shell command.

    ``exit_code`` is ``None`` when a signal (``signal``) ended it or the timeout fired
    (``timed_out``). ``truncated`` says output was clipped (head + tail kept, announced in
    the text); ``note`` carries any other announcement.
    """

    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    signal: int | None = None
    duration: float = 0.0
    truncated: bool = False
    note: str | None = None


ProcessState = Literal["running", "exited", "killed"]
"""The state of a background process."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessStart:
    """A background process was started; ``process_id`` addresses it."""

    process_id: str
    command: str
    pid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessOutput:
    """Output since the last read, plus status; ``dropped_chars`` were lost unread.

    A drop is also announced at the start of ``output``, the text the model reads.
    """

    process_id: str
    output: str
    state: ProcessState
    exit_code: int | None = None
    dropped_chars: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessStatus:
    """A passive status line (nothing consumed); ``delivered`` once a read reported the end."""

    process_id: str
    command: str
    state: ProcessState
    exit_code: int | None = None
    description: str | None = None
    delivered: bool = False
