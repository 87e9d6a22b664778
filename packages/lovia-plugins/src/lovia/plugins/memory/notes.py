"""The hot tier: a short list of dated facts, always in the prompt.

On disk it is ``MEMORY.md``, one fact per line as ``- [YYYY-MM] fact``. People edit the file
by hand, so reading is tolerant: any other line (a heading, prose, a blank) is ignored, an
undated bullet is kept (and gets the current month on the next save), and ``*`` bullets
work too. Writing is strict and atomic (a temp file renamed over the old one), so a reader
never sees half a file.

``NotesStore`` is the seam: ``load()`` and ``save(notes)``. A store may also offer
``lock()``, a context manager held across a load-modify-save; ``FileNotesStore`` takes an
exclusive ``flock`` on a side file, so two *processes* adding at once both keep their fact.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ._db import storable

__all__ = [
    "FileNotesStore",
    "Note",
    "NotesStore",
    "decode_hand_edited",
    "dedupe_notes",
    "normalise_fact",
    "parse_notes",
    "render_notes",
    "this_month",
    "write_atomic",
]

_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f]")
"""Control characters that are not whitespace (``str.split`` turns the others to spaces)."""
_LINE = re.compile(r"^\s*[-*]\s+(?:\[(\d{4}-\d{2})\](?=\s|$))?\s*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class Note:
    """One fact and the month (``YYYY-MM``) it was noted; ``month`` is ``""`` if unknown."""

    fact: str
    month: str = ""


@runtime_checkable
class NotesStore(Protocol):
    """Loads and saves the whole list of notes (blocking calls)."""

    def load(self) -> list[Note]: ...

    def save(self, notes: list[Note]) -> None: ...


def this_month() -> str:
    return datetime.date.today().strftime("%Y-%m")


def normalise_fact(fact: str) -> str:
    """One printable line, single spaces, no bullet or trailing full stop."""
    text = " ".join(storable(_CONTROL.sub("", fact)).split())
    text = re.sub(r"^[-*]\s+", "", text)
    return text.rstrip(".").strip()


def _key(fact: str) -> str:
    return normalise_fact(fact).casefold()


def dedupe_notes(notes: Iterable[Note]) -> list[Note]:
    """Normalised, empty facts dropped, and the first of each fact kept (across months)."""
    seen: set[str] = set()
    out = []
    for note in notes:
        fact = normalise_fact(note.fact)
        if fact and _key(fact) not in seen:
            seen.add(_key(fact))
            out.append(Note(fact, note.month))
    return out


def parse_notes(text: str) -> list[Note]:
    """The bullet lines of ``text`` as notes; every other line is ignored."""
    notes = []
    for line in text.removeprefix("\ufeff").splitlines():  # editors on Windows add a BOM
        match = _LINE.match(line)
        if match:
            notes.append(Note(match.group(2), match.group(1) or ""))
    return dedupe_notes(notes)


def render_notes(notes: Iterable[Note]) -> str:
    """The ``MEMORY.md`` text: one ``- [YYYY-MM] fact`` line per note."""
    month = this_month()
    return "".join(f"- [{n.month or month}] {n.fact}\n" for n in dedupe_notes(notes))


class FileNotesStore:
    """Notes in a Markdown file (``MEMORY.md``), written atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"FileNotesStore({str(self.path)!r})"

    def load(self) -> list[Note]:
        try:
            return parse_notes(decode_hand_edited(self.path.read_bytes()))
        except FileNotFoundError:
            return []

    def save(self, notes: list[Note]) -> None:
        write_atomic(self.path, render_notes(notes))

    def read_body(self) -> str:
        """The file as it is on disk (``""`` when absent)."""
        try:
            return decode_hand_edited(self.path.read_bytes())
        except FileNotFoundError:
            return ""

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive across processes (``flock`` on ``MEMORY.md.lock``) while held."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def decode_hand_edited(raw: bytes) -> str:
    """UTF-8, with any line that is not UTF-8 read as Windows-1252 (what a legacy editor on
    Windows writes), so a hand edit's accents survive the next save instead of turning
    into U+FFFD for good."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "\n".join(_decode_line(line) for line in raw.split(b"\n"))


def _decode_line(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return line.decode("cp1252", errors="replace")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
