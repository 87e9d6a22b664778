"""Bulk reads (list, grep) for the session; blocking, run on a worker thread.

Bulk operations never ask mid-walk: a symlinked entry is kept only when its target is
allowed outright, any other entry only when it is not denied (the operation's own target
was judged, and approved if it asked, before the walk started).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ._files import is_binary, read_prefix
from .errors import WorkspaceError
from .paths import ResolvedPath, is_proc_magic, relative_to_root
from .results import DirEntry, DirListing, GrepMatch, GrepResult

if TYPE_CHECKING:
    from .local import LocalWorkspaceSession

__all__: list[str] = []

MAX_WALK_ENTRIES = 200_000
"""Entries one list/grep walk looks at before it stops (and says so): a walk of ``/``
must not run for minutes on a worker thread nobody can cancel."""


class _Budget:
    """How many more entries a walk may look at; ``cut`` once it ran out."""

    def __init__(self) -> None:
        self.left = MAX_WALK_ENTRIES
        self.cut = False

    def note(self) -> str | None:
        if not self.cut:
            return None
        return f"the walk stopped after {MAX_WALK_ENTRIES} entries; narrow the path"


def _printable(name: str) -> str:
    """A non-UTF-8 file name (surrogate-escaped by the OS layer) made safe for the wire."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _judged(session: LocalWorkspaceSession, full: Path) -> Path | None:
    """The real path ``full`` was judged as, or ``None`` when it is left out."""
    if full.is_symlink():
        target = session.resolve(full)
        return target.path if session._judge(target, "read") == "allow" else None
    resolved = ResolvedPath(full, relative_to_root(full, session.root))
    return full if session._judge(resolved, "read") != "deny" else None


def _walk(
    session: LocalWorkspaceSession,
    base: Path,
    budget: _Budget,
    *,
    recursive: bool,
    include_hidden: bool,
) -> Iterator[tuple[Path, Path, bool]]:
    """(path, judged real path, is_dir) below ``base``; hidden and left-out entries
    skipped; symlinked dirs are not followed."""
    stack = [base]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for item in items:
            if budget.left == 0:
                budget.cut = True
                return
            budget.left -= 1
            if not include_hidden and item.name.startswith("."):
                continue
            full = Path(item.path)
            real = _judged(session, full)
            if real is None:
                continue
            try:
                is_dir = item.is_dir(follow_symlinks=True)
            except OSError:  # a symlink loop
                is_dir = False
            yield full, real, is_dir
            if recursive and is_dir and not item.is_symlink():
                stack.append(full)


def _matches(pattern: str | None, rel: str) -> bool:
    if pattern is None:
        return True
    return fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern)


def list_dir(
    session: LocalWorkspaceSession,
    target: ResolvedPath,
    pattern: str | None,
    include_hidden: bool,
) -> DirListing:
    cap = session.limits.max_list_results
    found: list[DirEntry] = []
    truncated = False
    budget = _Budget()
    recursive = pattern is not None
    walk = _walk(session, target.path, budget, recursive=recursive, include_hidden=include_hidden)
    for full, _real, is_dir in walk:
        rel = full.relative_to(target.path).as_posix()
        if not _matches(pattern, rel):
            continue
        if len(found) == cap:
            truncated = True
            break
        link = os.readlink(full) if full.is_symlink() else None
        try:
            size = None if is_dir else full.stat().st_size
        except OSError:  # a dangling symlink
            size = None
        found.append(
            DirEntry(
                path=_printable(rel),
                is_dir=is_dir,
                size=size,
                symlink_target=None if link is None else _printable(link),
            )  # fmt: skip
        )
    found.sort(key=lambda e: (not e.is_dir, e.path))
    return DirListing(
        path=session.display(target),
        entries=tuple(found),
        truncated=truncated or budget.cut,
        note=budget.note(),
    )


def grep(
    session: LocalWorkspaceSession,
    target: ResolvedPath,
    regex: re.Pattern[str],
    glob: str | None,
) -> GrepResult:
    limits = session.limits
    matches: list[GrepMatch] = []
    skipped = 0
    budget = _Budget()
    if target.path.is_dir():
        files: Iterator[tuple[Path, Path, bool]] = _walk(
            session, target.path, budget, recursive=True, include_hidden=False
        )
    else:
        files = iter([(target.path, target.path, False)])
    for full, real, is_dir in files:
        if is_dir:
            continue
        if target.path.is_dir() and not _matches(glob, full.relative_to(target.path).as_posix()):
            continue
        # Read the judged path itself (a symlink's resolved target), through the same
        # swap-checked open as read_file: a symlink swapped in mid-walk is skipped.
        try:
            info = real.stat()
            if not stat.S_ISREG(info.st_mode) or info.st_size > limits.max_grep_file_bytes:
                skipped += 1
                continue
            data, size = read_prefix(real, limits.max_grep_file_bytes)
        except (OSError, WorkspaceError):
            skipped += 1
            continue
        if size > len(data):  # grew past the cap since the stat
            skipped += 1
            continue
        if is_binary(data):
            skipped += 1
            continue
        shown = _printable(
            session.display(ResolvedPath(full, relative_to_root(full, session.root)))
        )
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line) is None:
                continue
            if len(matches) == limits.max_grep_matches:
                return GrepResult(
                    pattern=regex.pattern, matches=tuple(matches), truncated=True, skipped=skipped
                )
            if len(line) > limits.max_grep_line_chars:
                line = line[: limits.max_grep_line_chars] + " [... line clipped]"
            matches.append(GrepMatch(path=shown, line_number=number, line=line))
    return GrepResult(
        pattern=regex.pattern, matches=tuple(matches), skipped=skipped, note=budget.note()
    )


MAX_TREE_CHECK_ENTRIES = 50_000
"""Entries the guard looks at below a recursively read directory: the check runs twice
per command (approval predicate, session), so it is kept well under a second."""


def tree_verdict(session: LocalWorkspaceSession, base: Path) -> Literal["allow", "ask", "deny"]:
    """How a command reading every file under the directory ``base`` is judged: ``deny``
    when a denied entry (a secret, ``denied_paths``) lies beneath, ``ask`` when the tree
    is too big to check (``MAX_TREE_CHECK_ENTRIES``), else ``allow``.

    Breadth first, so a secret near the top (a root ``.env``) is found at once. Symlinks
    are judged by their targets (``grep -R`` and ``tar -h`` follow them) but never
    entered.
    """
    queue, seen, root, policy, rel = [base], 0, session.root, session.policy, relative_to_root
    while queue:
        current = queue.pop(0)
        try:
            with os.scandir(current) as it:
                items = list(it)
        except OSError:
            continue
        for item in items:
            seen += 1
            if seen > MAX_TREE_CHECK_ENTRIES:
                return "ask"
            full = Path(item.path)
            if item.is_symlink():
                if session._judge(session.resolve(full), "read") == "deny":
                    return "deny"
            elif is_proc_magic(full) or policy.decide_path(rel(full, root), full, "read") == "deny":
                return "deny"
            if item.is_dir(follow_symlinks=False):
                queue.append(full)
    return "allow"
