"""The read-only workspace panel: listings, recent files, text pages and raw bytes.

``WorkspaceFiles`` serves one agent's ``LocalWorkspace`` to the UI, **read-only whatever the
agent's mode**: it has no write method at all. A panel path is workspace-relative and
checked twice:

1. syntactically (``panel_path``): no NUL, no absolute or ``~`` path, no ``..`` component,
   no hidden (dot) component;
2. where it lands: symlinks are followed and the real path must stay inside the root, have no
   hidden component either, and not be denied by the workspace policy (``denied_paths``,
   secret files, deny rules) under its lexical name or its real one; a regular file with
   several hard links is refused too (its other name may be a secret).

Bytes are then read through a ``LocalWorkspaceSession`` over the same policy with every
outside path denied, the workspace's single enforcement point (it re-judges the path and
refuses a symlink swapped in after the check); directories are listed through a descriptor
opened without following a link and re-checked the same way. Listings hide dotfiles and
junk (``__pycache__``, ``*.pyc``, ``.venv``/``venv``, ``node_modules``, ``tmp``) and denied
entries, and are paginated; every walk is bounded.
Errors are ``WebError``s whose messages name the workspace-relative path only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import hashlib
import heapq
import itertools
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lovia.workspace import (
    LocalWorkspace,
    LocalWorkspaceSession,
    PermissionDeniedError,
    WorkspaceError,
    WorkspaceSessionBinding,
)
from lovia.workspace.paths import is_proc_magic, relative_to_root

from .errors import NotFound, WebError

__all__ = [
    "BadPath",
    "FileEntry",
    "INLINE_MIMES",
    "Listing",
    "MAX_RAW_BYTES",
    "MAX_TEXT_BYTES",
    "PathDenied",
    "RawFile",
    "TextPage",
    "TooLarge",
    "WorkspaceFiles",
    "is_junk",
    "local_workspace",
    "panel_path",
]

MAX_RAW_BYTES = 25 * 1024 * 1024
"""``/raw`` refuses larger files (413)."""
MAX_TEXT_BYTES = 10 * 1024 * 1024
"""``/file`` reads at most this prefix of a text file (and says so)."""
MAX_PAGE_CHARS = 200_000
"""One ``/file`` page carries at most this many characters (the page ends early)."""
MAX_SCAN_ENTRIES = 50_000
"""Entries one listing or recent-files walk looks at before it stops (and says so)."""

JUNK_NAMES = frozenset({"__pycache__", "node_modules", "venv", "tmp"})
JUNK_SUFFIXES = (".pyc", ".pyo")

INLINE_MIMES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".bmp": "image/bmp",
    ".ico": "image/x-icon",
    ".pdf": "application/pdf",
}
"""Suffixes ``/raw`` serves inline, with an explicit type (never sniffed). SVG is absent on
purpose: it can carry script, so it is served as a download."""

_DOWNLOAD_MIMES = {".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8"}
_SNIFF_BYTES = 8192


class BadPath(WebError):
    """A panel path that is not a plain workspace-relative path."""

    status = 422


class PathDenied(WebError):
    """The workspace policy denies reading the path, or it lands outside the root."""

    status = 403


class TooLarge(WebError):
    """The file is over the size cap."""

    status = 413


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One listed file or directory; ``path`` is relative to the workspace root."""

    name: str
    path: str
    is_dir: bool
    size: int | None
    modified: float


@dataclass(frozen=True, slots=True)
class Listing:
    path: str
    entries: list[FileEntry]
    total: int
    offset: int
    limit: int
    truncated: bool
    """The directory holds more entries than one walk looks at; ``total`` counts the seen."""


@dataclass(frozen=True, slots=True)
class TextPage:
    path: str
    size: int
    binary: bool
    content: str | None
    offset: int
    lines: int
    total_lines: int | None
    next_offset: int | None
    truncated: bool
    """Only a prefix of the file was read (``MAX_TEXT_BYTES``)."""


@dataclass(frozen=True, slots=True)
class RawFile:
    path: str
    data: bytes
    mime: str
    inline: bool
    etag: str


def is_junk(name: str) -> bool:
    """Whether a listing hides ``name``: a dotfile, a cache, a venv, ``tmp``."""
    return name.startswith(".") or name in JUNK_NAMES or name.endswith(JUNK_SUFFIXES)


def local_workspace(workspace: object) -> LocalWorkspace | None:
    """The ``LocalWorkspace`` behind an agent's workspace (bound or not), else ``None``."""
    if isinstance(workspace, WorkspaceSessionBinding):
        workspace = workspace.workspace
    return workspace if isinstance(workspace, LocalWorkspace) else None


def panel_path(raw: str) -> str:
    """``raw`` as a normalised workspace-relative POSIX path (``"."`` for the root).

    Raises ``BadPath`` for NUL, an absolute or ``~`` path, a backslash or a ``..``
    component, and ``NotFound`` for a hidden (dot) component: the panel does not show them.
    """
    if "\0" in raw:
        raise BadPath("path: contains a NUL byte", hint="pass a workspace-relative path")
    if raw.startswith(("/", "~")) or "\\" in raw or (len(raw) > 1 and raw[1] == ":"):
        raise BadPath(
            "path: must be relative to the workspace root", hint="e.g. 'src/app.py' or '.'"
        )
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BadPath("path: must not contain '..'", hint="paths are relative to the root")
    if any(p.startswith(".") for p in parts):
        raise NotFound(f"no such file or directory: {raw!r}")
    if any(len(os.fsencode(p)) > 255 for p in parts):
        raise BadPath("path: a component is longer than 255 bytes")
    return "/".join(parts) or "."


class WorkspaceFiles:
    """The panel over one ``LocalWorkspace`` (see the module docstring)."""

    def __init__(self, workspace: LocalWorkspace) -> None:
        self.workspace = workspace
        self.root = workspace.root
        self.policy = workspace.policy
        # Reads only: this session never runs a command, so it owns nothing to close. It
        # denies every path outside the root, whatever the agent's mode: a directory swapped
        # for a link after ``locate`` must not make it read outside (the agent's policy may
        # allow or ask outside reads; the panel never does).
        inside_only = dataclasses.replace(
            workspace.policy,
            read_outside="deny",
            path_rules=tuple(r for r in workspace.policy.path_rules if r.action == "deny"),
        )
        self._reader = LocalWorkspaceSession(
            workspace.root, policy=inside_only, limits=workspace.limits
        )

    # -- checks ------------------------------------------------------------------------

    def _denied(self, rel: str | None, path: Path) -> bool:
        return is_proc_magic(path) or self.policy.decide_path(rel, path, "read") == "deny"

    def locate(self, raw: str) -> tuple[str, Path]:
        """The checked relative path and the real path it lands on (see the module
        docstring); raises ``BadPath``, ``NotFound`` or ``PathDenied``."""
        rel = panel_path(raw)
        lexical = self.root / rel if rel != "." else self.root
        real = Path(os.path.realpath(lexical))
        real_rel = relative_to_root(real, self.root)
        if real_rel is None:
            raise PathDenied(f"{rel!r} points outside the workspace", hint="symlinks stay inside")
        if real_rel != "." and any(p.startswith(".") for p in real_rel.split("/")):
            raise NotFound(f"no such file or directory: {rel!r}")
        if self._denied(rel, lexical) or self._denied(real_rel, real):
            raise PathDenied(f"reading {rel!r} is denied by the workspace policy")
        if not os.path.lexists(real):
            raise NotFound(f"no such file or directory: {rel!r}")
        if _hard_linked(real):
            raise PathDenied(
                f"{rel!r} has several hard links", hint="its other name may be a secret file"
            )
        return rel, real

    def _entry(self, item: os.DirEntry[str], rel_dir: str, directory: Path) -> FileEntry | None:
        """A listed entry, or ``None`` when it is hidden, denied or escapes the root."""
        if is_junk(item.name):
            return None
        rel = item.name if rel_dir == "." else f"{rel_dir}/{item.name}"
        lexical = directory / item.name
        try:
            if item.is_symlink():
                real = Path(os.path.realpath(lexical))
                real_rel = relative_to_root(real, self.root)
                if real_rel is None or any(p.startswith(".") for p in real_rel.split("/")):
                    return None
                if self._denied(real_rel, real):
                    return None
            if self._denied(rel, lexical):
                return None
            # Listed through a symlinked directory: judge the name where it really is too.
            real_dir = relative_to_root(directory, self.root)
            if real_dir is not None and real_dir != rel_dir:
                name = item.name if real_dir == "." else f"{real_dir}/{item.name}"
                if self._denied(name, lexical):
                    return None
            st = item.stat()  # relative to the opened directory, following a link
        except OSError:  # a dangling link, a loop, a file gone mid-listing
            return None
        is_dir = stat.S_ISDIR(st.st_mode)
        return FileEntry(
            name=_printable(item.name),
            path=_printable(rel),
            is_dir=is_dir,
            size=None if is_dir else st.st_size,
            modified=st.st_mtime,
        )

    # -- operations --------------------------------------------------------------------

    async def listing(self, path: str = ".", *, offset: int = 0, limit: int = 200) -> Listing:
        """One directory, directories first then by name, ``limit`` entries from ``offset``."""
        rel, real = self.locate(path)
        if not real.is_dir():
            raise BadPath(f"path: {rel!r} is not a directory")
        return await asyncio.to_thread(self._list, rel, real, offset, limit)

    def _list(self, rel: str, real: Path, offset: int, limit: int) -> Listing:
        entries: list[FileEntry] = []
        seen = 0
        truncated = False
        try:
            with _scan(real) as it:
                for item in it:
                    seen += 1
                    if seen > MAX_SCAN_ENTRIES:
                        truncated = True
                        break
                    entry = self._entry(item, rel, real)
                    if entry is not None:
                        entries.append(entry)
        except OSError:
            raise NotFound(f"cannot list {rel!r}") from None
        entries.sort(key=lambda e: (not e.is_dir, e.name.casefold(), e.name))
        page = entries[offset : offset + limit]
        return Listing(rel, page, len(entries), offset, limit, truncated)

    async def recent(self, *, limit: int = 20) -> list[FileEntry]:
        """The most recently modified files of the tree (hidden and junk directories are
        not entered, symlinked directories not followed), newest first."""
        return await asyncio.to_thread(self._recent, limit)

    def _recent(self, limit: int) -> list[FileEntry]:
        best: list[tuple[float, str, FileEntry]] = []
        stack: list[tuple[Path, str]] = [(self.root, ".")]
        budget = MAX_SCAN_ENTRIES
        while stack and budget > 0:
            current, rel_dir = stack.pop()
            try:
                with _scan(current) as it:  # entries are stat-ed while the directory is open
                    items = list(itertools.islice(it, budget))
                    found = [(item, self._entry(item, rel_dir, current)) for item in items]
            except OSError:
                continue
            budget -= len(items)
            for item, entry in found:
                if entry is None:
                    continue
                if entry.is_dir:
                    if not item.is_symlink():
                        stack.append((current / item.name, entry.path))
                    continue
                key = (entry.modified, entry.path, entry)
                if len(best) < limit:
                    heapq.heappush(best, key)
                elif key[:2] > best[0][:2]:
                    heapq.heapreplace(best, key)
        return [e for _, _, e in sorted(best, key=lambda k: k[:2], reverse=True)]

    async def _read(self, rel: str, real: Path, cap: int) -> tuple[bytes, int]:
        if _is_dir(real):
            raise BadPath(f"path: {rel!r} is a directory")
        real_rel = relative_to_root(real, self.root) or rel
        try:
            data = await self._reader.read_bytes(real_rel, cap)
        except PermissionDeniedError:
            raise PathDenied(f"reading {rel!r} is denied by the workspace policy") from None
        except WorkspaceError:  # not a regular file, vanished, unreadable: never echo paths
            raise NotFound(f"{rel!r} is not a readable file") from None
        if _hard_linked(real):  # linked while it was being read
            raise PathDenied(f"{rel!r} has several hard links")
        return data.data, data.size

    async def read_bytes(self, path: str, max_bytes: int) -> bytes | None:
        """The file's bytes, or ``None`` when it is larger than ``max_bytes``."""
        rel, real = self.locate(path)
        data, size = await self._read(rel, real, max_bytes)
        return None if size > len(data) else data

    async def text(self, path: str, *, offset: int = 0, limit: int = 500) -> TextPage:
        """Lines ``offset`` (0-based) to ``offset + limit`` of a text file; a binary file is
        flagged (``binary``) with no content."""
        rel, real = self.locate(path)
        data, size = await self._read(rel, real, MAX_TEXT_BYTES)
        partial = size > len(data)
        if _looks_binary(data):
            return TextPage(rel, size, True, None, offset, 0, None, None, partial)
        # Off the event loop: decoding and walking 10 MB of lines takes a while.
        content, lines, total = await asyncio.to_thread(_page, data, partial, offset, limit)
        end = offset + lines
        next_offset = end if end < total else None
        return TextPage(rel, size, False, content, offset, lines, total, next_offset, partial)

    async def raw(self, path: str) -> RawFile:
        """The file's bytes for ``/raw`` with its type, whether it may be shown inline, and
        an ETag of its content; raises ``TooLarge`` over ``MAX_RAW_BYTES``."""
        rel, real = self.locate(path)
        data, size = await self._read(rel, real, MAX_RAW_BYTES)
        if size > len(data):
            raise TooLarge(
                f"{rel!r} is {size} bytes, over the {MAX_RAW_BYTES}-byte limit",
                hint="open it with another tool",
            )
        suffix = Path(rel).suffix.lower()
        mime = INLINE_MIMES.get(suffix)
        inline = mime is not None
        if mime is None:
            mime = _DOWNLOAD_MIMES.get(suffix, "application/octet-stream")
        etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
        return RawFile(rel, data, mime, inline, etag)

    @property
    def mode(self) -> Literal["readonly", "coding", "trusted"]:
        """The agent's mode as the panel shows it (the panel itself is always read-only)."""
        if not self.policy.can_write:
            return "readonly"
        return "trusted" if self.policy.read_outside == "allow" else "coding"


_LINE_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""Where ``str.splitlines`` ends a line (``\\r\\n`` is one end)."""
_LINE_END = re.compile(f"\r\n|[{_LINE_ENDS}]")


def _page(data: bytes, partial: bool, offset: int, limit: int) -> tuple[str, int, int]:
    """The page's text, its line count and the file's total line count. Never a list of
    every line: a file of tiny lines would take dozens of times its size in memory."""
    text = data.decode("utf-8", "replace")
    if partial:  # a character cut at the end of the prefix
        text = text.rstrip("\ufffd")
    chosen: list[str] = []
    used = 0
    for line in itertools.islice(_lines_from(text, offset), limit):
        if chosen and used + len(line) > MAX_PAGE_CHARS:
            break
        chosen.append(line[:MAX_PAGE_CHARS])
        used += len(chosen[-1])
    return "".join(chosen), len(chosen), _count_lines(text)


def _count_lines(text: str) -> int:
    """``len(text.splitlines())`` without building the lines."""
    ends = sum(text.count(ch) for ch in _LINE_ENDS) - text.count("\r\n")
    return ends + (1 if text and text[-1] not in _LINE_ENDS else 0)


def _lines_from(text: str, offset: int) -> Iterator[str]:
    """``text.splitlines(keepends=True)[offset:]``, lazily (skipped lines are not built)."""
    start = 0
    index = 0
    for match in _LINE_END.finditer(text):
        if index >= offset:
            yield text[start : match.end()]
        start = match.end()
        index += 1
    if start < len(text) and index >= offset:
        yield text[start:]


def _hard_linked(path: Path) -> bool:
    """Whether ``path`` is a regular file with another name somewhere: a hard link to a
    secret (``.env``, a key) looks like any file, so the panel refuses them all."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


@contextlib.contextmanager
def _scan(directory: Path) -> Iterator[Iterator[os.DirEntry[str]]]:
    """``os.scandir`` of exactly ``directory``: opened without following a final link and
    re-checked through ``/proc/self/fd``, so a directory swapped for a link after the check
    lists nothing (``OSError``)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            actual = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # no procfs: the O_NOFOLLOW open is the only check left
            actual = str(directory)
        if actual != str(directory):
            raise PermissionError(errno.EACCES, "the directory changed after the check")
        with os.scandir(fd) as it:
            yield it
    finally:
        os.close(fd)


def _is_dir(path: Path) -> bool:
    return path.is_dir()


def _looks_binary(data: bytes) -> bool:
    head = data[:_SNIFF_BYTES]
    boms = (b"\xff\xfe", b"\xfe\xff")
    return b"\x00" in head or head.startswith(boms)


def _printable(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
