"""``LocalWorkspaceSession``: the single enforcement point of the workspace policy.

Invariant: every file operation and command, whoever calls it (built-in tools, custom
tools via ``ctx.workspace``, library code), resolves its path(s) here and is judged by
``WorkspacePolicy``; a ``deny`` raises ``PermissionDeniedError`` here and nowhere else.
``ask`` is not resolved here: the tools' ``needs_approval`` predicates call
``decide_path``/``decide_command`` first, so by the time a call reaches the session an ask
has been approved and passes. Commands are judged on their static rules merged, most
restrictive first, with the path claims of the command guard (anchored at the command's
cwd and at any ``cd`` target; the cwd is itself judged as a read; globs are judged by what
they expand to; a command reading a directory tree, ``grep -r`` or ``rg``, is denied when
a denied entry lies beneath; a bare word that names a ``denied_paths`` entry or a secret
file is denied even before the file exists). Per-process ``/proc`` paths are always
refused.

Observers (``add_observer``) receive every decision the session makes for a caller, with
the rule that decided (``PermissionDecision``): ``decide_path``/``decide_command`` (the
checks ahead of an operation) and the gate of each file operation and command. Walks
inside an operation (a listing, a grep, a tree check) are not reported one by one. With
no observer nothing is built. An observer that raises is logged and skipped: the
operation it watched goes on as if it were not there.
"""

from __future__ import annotations

import asyncio
import glob
import itertools
import logging
import os
import re
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from . import _listing, _shell
from ._files import decode_text, read_prefix, write_atomic
from .command_guard import parse_command
from .errors import FileTooLargeError, PermissionDeniedError, WorkspaceClosedError, WorkspaceError
from .paths import ResolvedPath, is_proc_magic, relative_to_root, resolve_path
from .policy import (
    Decision,
    FileOp,
    PermissionDecision,
    RuleTuple,
    WorkspacePolicy,
    strictest,
)
from .protocol import SandboxLauncher, ShellExecutor
from .results import (
    CommandResult,
    DirListing,
    EditResult,
    FileBytes,
    FileChange,
    FileContent,
    GrepResult,
    ProcessOutput,
    ProcessStart,
    ProcessStatus,
    WorkspaceLimits,
)

__all__ = ["DecisionObserver", "LocalWorkspaceSession"]

DecisionObserver = Callable[[PermissionDecision], None]
"""Called synchronously with each decision (keep it cheap; it must not raise)."""

_DENY_HINT = (
    "the workspace policy forbids this; denied_paths, secret files and path rules beat "
    "grants. Work with another path, or ask the user to change the workspace policy"
)
_COMMAND_DENY_HINT = (
    "the workspace policy forbids this command, or a path it names, or a secret file "
    "(such as .env) in a directory it reads recursively (grep -r, rg, tar, find | xargs). "
    "Name the files or directories you need, or use grep_files / list_files, which skip "
    "denied files"
)


_log = logging.getLogger("lovia.workspace")


class LocalWorkspaceSession:
    """An open local workspace rooted at ``root`` (see the module docstring for the gate).

    Built by ``LocalWorkspace.open()``; usable directly as a library. Raises
    ``WorkspaceClosedError`` after ``close()``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        policy: WorkspacePolicy | None = None,
        limits: WorkspaceLimits | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        shell_timeout: float = 300.0,
        executor: ShellExecutor | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.policy = policy if policy is not None else WorkspacePolicy.coding()
        self.limits = limits if limits is not None else WorkspaceLimits()
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.shell_timeout = shell_timeout
        self.executor = executor
        # Checked once: a launcher's argv is run (and owned) by this session.
        self._launcher = executor if isinstance(executor, SandboxLauncher) else None
        self._closed = False
        self._locks: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()
        self._foreground: dict[int, asyncio.subprocess.Process | None] = {}
        self._processes: dict[str, _shell.BackgroundProcess] = {}
        self._spawned = 0
        self._observers: tuple[DecisionObserver, ...] = ()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    # -- decisions ---------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str], *, base: Path | None = None) -> ResolvedPath:
        """Resolve ``path`` against the root (or ``base``), following symlinks.

        Raises ``WorkspaceError`` for a path no OS call could take: one with a NUL byte, a
        component longer than ``NAME_MAX`` or a resolved path longer than ``PATH_MAX``.
        """
        raw = os.fspath(path)
        if "\0" in raw:
            raise WorkspaceError("the path contains a NUL byte", hint="pass a real file path")
        if _too_long_component(raw):
            raise WorkspaceError(
                f"a component of {raw[:80]!r}... is longer than {_NAME_MAX} bytes",
                hint="no file can have such a name; use a shorter one",
            )
        resolved = resolve_path(raw, self.root, base=base)
        if len(os.fsencode(resolved.path)) >= _PATH_MAX:
            raise WorkspaceError(
                f"the path {raw[:80]!r}... is longer than {_PATH_MAX - 1} bytes once resolved",
                hint="use a shorter path",
            )
        return resolved

    def _claim_target(self, word: str, base: Path) -> ResolvedPath | None:
        """A command word resolved at ``base``; ``None`` when no file can have that name
        (the shell's own open fails on it), so a long token is never an error."""
        try:
            return self.resolve(word, base=base)
        except WorkspaceError:
            return None

    def display(self, resolved: ResolvedPath) -> str:
        """How a path is shown: relative inside the root, absolute outside."""
        return resolved.rel if resolved.rel is not None else str(resolved.path)

    # -- observers ---------------------------------------------------------------------

    def add_observer(self, observer: DecisionObserver) -> Callable[[], None]:
        """Call ``observer`` with every decision from now on; returns its remover."""
        self._observers = (*self._observers, observer)

        def remove() -> None:
            self._observers = tuple(o for o in self._observers if o is not observer)

        return remove

    def _notify(
        self,
        kind: Literal["path", "command"],
        subject: str,
        op: Literal["read", "write", "run"],
        ruling: RuleTuple,
        *,
        enforced: bool,
    ) -> None:
        decision = PermissionDecision(
            kind=kind,
            subject=subject,
            op=op,
            decision=ruling[0],
            rule=ruling[1],
            pattern=ruling[2],
            enforced=enforced,
        )
        for observer in self._observers:
            try:
                observer(decision)
            except Exception:  # noqa: BLE001 - a bystander: its bug must not fail the operation
                _log.exception("workspace decision observer %r failed", observer)

    # -- decisions ---------------------------------------------------------------------

    def _judge(self, resolved: ResolvedPath, op: FileOp) -> Decision:
        return self._ruling(resolved, op)[0]

    def _ruling(self, resolved: ResolvedPath, op: FileOp) -> RuleTuple:
        if is_proc_magic(resolved.path):
            return ("deny", "proc", None)
        ruling = self.policy.path_ruling(resolved.rel, resolved.path, op)
        if op == "write" and ruling[0] != "deny":
            alias = self._venv_alias(resolved.path)
            if alias is not None:  # judged as the .venv/bin path commands run it from too
                alias_rel = relative_to_root(alias, self.root)
                ruling = strictest((ruling, self.policy.path_ruling(alias_rel, alias, op)))
        return ruling

    def _venv_alias(self, path: Path) -> Path | None:
        """``path`` seen through a venv's bin dir, when ``.venv`` or ``venv`` (or its
        ``bin``) is a symlink and ``path`` lies in the directory it really points at.

        Any venv directory counts, activated or not: a write can make it activate (an
        interpreter copied in), and then its ``bin`` shadows every command.
        """
        for name in _shell.VENV_NAMES:
            bin_dir = _shell.venv_bin(self.root / name)
            real_bin = Path(os.path.realpath(bin_dir))
            inside = relative_to_root(path, real_bin)
            if inside is None or real_bin == bin_dir:
                continue  # not in this venv, or no link: the path already reads .venv/bin
            return bin_dir if inside == "." else bin_dir / inside
        return None

    def decide_path(self, path: str, *, write: bool = False) -> Decision:
        """The verdict for reading (or writing) ``path``; never raises for a deny."""
        self._check_open()
        resolved = self.resolve(path)
        op: FileOp = "write" if write else "read"
        ruling = self._ruling(resolved, op)
        if self._observers:
            self._notify("path", self.display(resolved), op, ruling, enforced=False)
        return ruling[0]

    def decide_command(self, command: str, cwd: str = ".") -> Decision:
        """The verdict for ``command`` run in ``cwd``: static rules merged with path claims."""
        self._check_open()
        ruling = self._command_ruling(command, cwd)
        if self._observers:
            self._notify("command", command, "run", ruling, enforced=False)
        return ruling[0]

    def _command_ruling(self, command: str, cwd: str) -> RuleTuple:
        static = self.policy.command_ruling(command)
        if static[0] == "deny":
            return static
        where = self.resolve(cwd)
        verdicts = [static, self._ruling(where, "read")]
        parsed = parse_command(command)
        # Relative words are anchored at the cwd and at every directory a cd moves to.
        bases = [where.path]
        for target in parsed.cd_targets[:_MAX_CD_TARGETS]:
            bases.append(self.resolve(target, base=where.path).path)
        for claim in parsed.claims:
            anchors = bases if not os.path.isabs(os.path.expanduser(claim.path)) else bases[:1]
            for base in anchors:
                named = self._claim_target(claim.path, base)
                if named is not None:
                    verdicts.append(self._ruling(named, claim.op))
                for match in _glob(claim.path, base):
                    verdicts.append(self._ruling(self.resolve(match), claim.op))
        for word in parsed.recursive_reads:
            anchors = bases if not os.path.isabs(os.path.expanduser(word)) else bases[:1]
            for base in anchors:
                tree = self._claim_target(word, base)
                if tree is not None and tree.path.is_dir():
                    tree_verdict = _listing.tree_verdict(self, tree.path)
                    verdicts.append((tree_verdict, "recursive_read", word))
        for tail in parsed.dynamic_tails:  # `$(pwd)/.env`: whatever the prefix, a secret
            hard = self._hard_ruling(self.root / tail.lstrip("/"))
            if hard is not None:
                verdicts.append(hard)
        for word in parsed.bare_words:
            for base in bases:
                candidate = base / word
                if os.path.lexists(candidate):
                    verdicts.append(self._ruling(self.resolve(candidate), "read"))
                else:
                    hard = self._hard_ruling(candidate)
                    if hard is not None:  # `touch .env`, `tee .env` would create it
                        verdicts.append(hard)
                for match in _glob(word, base):
                    verdicts.append(self._ruling(self.resolve(match), "read"))
        return strictest(verdicts)

    def _hard_ruling(self, missing: Path) -> RuleTuple | None:
        """The deny (with its rule) of a path that does not exist yet and would be a
        ``denied_paths`` entry or a secret file; ``None`` when it would not.

        A bare word is one component under a resolved base, so the lexical path is where
        it would land (nothing to follow).
        """
        path = Path(os.path.normpath(missing))
        return self.policy.hard_ruling(relative_to_root(path, self.root), path)

    def _check_open(self) -> None:
        if self._closed:
            raise WorkspaceClosedError(
                "the workspace session is closed",
                hint="open a new session (LocalWorkspace.open()) to keep working",
            )

    def _gate(self, path: str, *ops: FileOp) -> ResolvedPath:
        self._check_open()
        resolved = self.resolve(path)
        for op in ops:
            ruling = self._ruling(resolved, op)
            if self._observers:
                self._notify("path", self.display(resolved), op, ruling, enforced=True)
            if ruling[0] == "deny":
                raise PermissionDeniedError(
                    f"{op} of {self.display(resolved)!r} is denied by the workspace policy",
                    hint=_DENY_HINT,
                )
        return resolved

    def _file_gate(self, path: str, *ops: FileOp) -> ResolvedPath:
        """``_gate`` for an operation on a file: a path ending in ``/`` (or in a ``.`` or
        ``..`` component) names a directory, as it does for the OS, never a file."""
        self._check_open()
        if _names_directory(path):
            raise WorkspaceError(
                f"{path!r} names a directory, not a file",
                hint="drop the trailing '/' to name a file; use list_files for directories",
            )
        return self._gate(path, *ops)

    def _lock(self, path: Path) -> asyncio.Lock:
        lock = self._locks.get(path)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[path] = lock
        return lock

    # -- files -------------------------------------------------------------------------

    async def read_text(
        self, path: str, start: int | None = None, end: int | None = None
    ) -> FileContent:
        """Lines ``start``..``end`` (1-based, inclusive) of a UTF-8 text file.

        Past EOF is empty, ``end`` is clamped, at most ``max_file_read_chars`` are returned
        (announced). Raises ``WorkspaceError`` for an invalid range, binary or non-UTF-8
        content, and ``PermissionDeniedError`` on deny.
        """
        self._check_open()
        if (start is not None and start < 1) or (end is not None and end < 1):
            raise WorkspaceError("line numbers are 1-based", hint="use start >= 1 and end >= 1")
        if start is not None and end is not None and end < start:
            raise WorkspaceError(f"invalid line range {start}..{end}", hint="end must be >= start")
        resolved = self._file_gate(path, "read")
        shown = self.display(resolved)
        cap = self.limits.max_file_read_bytes
        data, size = await asyncio.to_thread(read_prefix, resolved.path, cap)
        partial = size > len(data)
        text = decode_text(data, shown, partial=partial)
        max_chars = self.limits.max_file_read_chars
        return _page(text, shown, start, end, max_chars, partial, len(data), size)

    async def read_bytes(self, path: str, max_bytes: int | None = None) -> FileBytes:
        """Raw bytes (at most ``max_bytes``, default ``max_file_read_bytes``)."""
        resolved = self._file_gate(path, "read")
        cap = self.limits.max_file_read_bytes if max_bytes is None else max_bytes
        data, size = await asyncio.to_thread(read_prefix, resolved.path, cap)
        shown = self.display(resolved)
        return FileBytes(path=shown, data=data, size=size, truncated=size > len(data))

    async def write_text(self, path: str, content: str, create_only: bool = False) -> FileChange:
        """Write ``content`` (UTF-8) atomically, creating parent directories.

        The file mode of an existing file is kept. Raises ``WorkspaceError`` when the target
        is the root or a directory, or exists and ``create_only`` is set. ``create_only``
        means nothing at all exists at ``path``, as ``O_EXCL`` does: a symlink there, even
        a dangling one, refuses (it would otherwise create the link's target).
        """
        resolved = self._file_gate(path, "write")
        if resolved.rel == ".":
            raise WorkspaceError("cannot write to the workspace root", hint="name a file path")
        data = _encode(content)
        async with self._lock(resolved.path):
            created = await asyncio.to_thread(
                _write, resolved.path, self.root, path, data, create_only
            )
        return FileChange(path=self.display(resolved), created=created, chars_written=len(content))

    async def edit_text(
        self, path: str, old: str, new: str, replace_all: bool = False
    ) -> EditResult:
        """Replace the exact substring ``old`` by ``new`` (CRLF-tolerant).

        Fails on zero or several matches unless ``replace_all``; ``old == new`` is a no-op.
        Raises ``WorkspaceError`` for an empty ``old`` or a non-UTF-8 file.
        """
        self._check_open()
        if not old:
            raise WorkspaceError("old text must not be empty", hint="use write_file instead")
        resolved = self._file_gate(path, "read", "write")
        shown = self.display(resolved)
        async with self._lock(resolved.path):
            count = await asyncio.to_thread(
                self._edit_sync, resolved.path, shown, old, new, replace_all
            )
        return EditResult(path=shown, replacements=count)

    def _edit_sync(self, judged: Path, shown: str, old: str, new: str, replace_all: bool) -> int:
        cap = self.limits.max_file_read_bytes
        data, size = read_prefix(judged, cap)
        if size > len(data):
            raise FileTooLargeError(
                f"{shown!r} is {size} bytes, over the {cap}-byte edit limit",
                hint="edit it with a shell tool (sed, python) instead",
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceError(
                f"{shown!r} is not UTF-8 text", hint="only UTF-8 files can be edited"
            ) from None
        if old == new:
            return 0
        matches = _tolerant_matches(text, old)
        count = len(matches)
        if count == 0:
            raise WorkspaceError(
                f"the old text was not found in {shown!r}",
                hint="read the file again and copy the exact text, whitespace included",
            )
        if count > 1 and not replace_all:
            raise WorkspaceError(
                f"the old text occurs {count} times in {shown!r}",
                hint="include more surrounding lines to make it unique, or set replace_all",
            )
        text = _replace(text, matches, old, new)
        write_atomic(judged, _encode(text), create_only=False)
        return count

    async def list_files(
        self, path: str = ".", pattern: str | None = None, include_hidden: bool = False
    ) -> DirListing:
        """Entries of a directory (recursive when ``pattern`` is a glob), directories first.

        Entries the policy does not allow to read are left out; the listing is cut (and
        says so) at ``max_list_results``.
        """
        resolved = self._gate(path, "read")
        if not resolved.path.is_dir():
            hint = None
            if not resolved.path.exists() and path.strip("/") == self.root.name:
                hint = "paths are relative to the workspace root; use '.' for the root"
            what = "is not a directory" if resolved.path.exists() else "does not exist"
            raise WorkspaceError(f"{self.display(resolved)!r} {what}", hint=hint)
        return await asyncio.to_thread(_listing.list_dir, self, resolved, pattern, include_hidden)

    async def grep(self, pattern: str, path: str = ".", glob: str | None = None) -> GrepResult:
        """Lines matching the regex ``pattern`` under ``path`` (a file or a directory).

        Binary, oversized and not-allowed files are skipped (counted); long lines are
        clipped and matches capped. Raises ``WorkspaceError`` for an invalid regex.
        """
        self._check_open()
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise WorkspaceError(f"invalid regex {pattern!r}: {exc}") from None
        resolved = self._gate(path, "read")
        if not resolved.path.exists():
            raise WorkspaceError(f"{self.display(resolved)!r} does not exist")
        if _names_directory(path) and not resolved.path.is_dir():
            raise WorkspaceError(f"{path!r} is not a directory", hint="drop the trailing '/'")
        return await asyncio.to_thread(_listing.grep, self, resolved, regex, glob)

    # -- commands ----------------------------------------------------------------------

    def _command_gate(self, command: str, cwd: str) -> Path:
        self._check_open()
        if "\0" in command:
            raise WorkspaceError("the command contains a NUL byte", hint="remove it")
        ruling = self._command_ruling(command, cwd)
        if self._observers:
            self._notify("command", command, "run", ruling, enforced=True)
        if ruling[0] == "deny":
            raise PermissionDeniedError(
                f"the command {command[:200]!r} is denied by the workspace policy",
                hint=_COMMAND_DENY_HINT,
            )
        where = self.resolve(cwd).path
        if not where.is_dir():
            raise WorkspaceError(f"the working directory {cwd!r} is not a directory")
        return where

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return _shell.build_env(
            self.root, inherit_env=self.inherit_env, session_env=self.env, call_env=env
        )

    def _track(self, proc: asyncio.subprocess.Process | None, pid: int) -> None:
        if proc is None:
            self._foreground.pop(pid, None)
            return
        self._foreground[pid] = proc
        if self._closed:  # started while close() ran: reap it ourselves
            _shell.kill_group_of(proc)

    async def run(
        self,
        command: str,
        cwd: str = ".",
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run ``command`` with the system shell in a fresh process group.

        ``timeout`` (default ``shell_timeout``) kills the whole group and sets
        ``timed_out``; output is clipped head + tail to ``max_shell_output_chars``.
        """
        where = self._command_gate(command, cwd)
        limit = self.shell_timeout if timeout is None else timeout
        max_chars = self.limits.max_shell_output_chars
        if self._launcher is not None:
            # Same sandbox as executor.run, but owned here: tracked for close(), clipped.
            argv = self._launcher.launch_argv(
                command, cwd=str(where), policy=self.policy, root=self.root
            )
        elif self.executor is not None:
            result = await self.executor.run(
                command, cwd=str(where), env=self._env(env), timeout=limit,
                policy=self.policy, root=self.root,
            )  # fmt: skip
            return _clip_result(result, max_chars)
        else:
            argv = ["/bin/sh", "-c", command]
        return await _shell.run(
            argv, command=command, cwd=str(where), env=self._env(env),
            timeout=limit, max_chars=max_chars, track=self._track,
        )  # fmt: skip

    async def spawn(
        self,
        command: str,
        cwd: str = ".",
        env: Mapping[str, str] | None = None,
        description: str | None = None,
    ) -> ProcessStart:
        """Start ``command`` as a background process owned by this session.

        Judged like ``run``; no timeout; killed by ``kill_process`` or ``close()``.
        Raises ``WorkspaceError`` under an executor that cannot wrap background processes.
        """
        where = self._command_gate(command, cwd)
        if self.executor is None:
            argv = ["/bin/sh", "-c", command]
        elif self._launcher is not None:
            argv = self._launcher.launch_argv(
                command, cwd=str(where), policy=self.policy, root=self.root
            )
        else:
            raise WorkspaceError(
                "background processes are not supported under this ShellExecutor",
                hint="run the command in the foreground, or use an executor that can wrap them",
            )
        self._spawned += 1
        process = _shell.BackgroundProcess(
            f"p{self._spawned}", command, description, self.limits.max_shell_output_chars
        )
        await process.start(argv, cwd=str(where), env=self._env(env))
        self._processes[process.process_id] = process
        if self._closed:
            await process.kill()
            self._check_open()
        assert process.proc is not None
        return ProcessStart(process_id=process.process_id, command=command, pid=process.proc.pid)

    def _process(self, process_id: str) -> _shell.BackgroundProcess:
        self._check_open()
        process = self._processes.get(process_id)
        if process is None:
            live = ", ".join(p for p, proc in self._processes.items() if proc.running) or "none"
            raise WorkspaceError(
                f"no background process {process_id!r} (running: {live})",
                hint="background processes do not survive a restart or a checkpoint resume; "
                "re-run the start command",
            )
        return process

    async def read_process_output(self, process_id: str) -> ProcessOutput:
        """Output since the last read, and the status; never fails for an exited process."""
        process = self._process(process_id)
        if not process.running:
            await process.settle()
            process.delivered = True
        return _output(process)

    async def kill_process(self, process_id: str) -> ProcessOutput:
        """Kill the process's whole group and return the final output."""
        process = self._process(process_id)
        await process.kill()
        process.delivered = True
        return _output(process)

    def background_processes(self) -> list[ProcessStatus]:
        """A passive status list of background processes (nothing is consumed)."""
        self._check_open()
        out = []
        for process in self._processes.values():
            code = process.proc.returncode if process.proc is not None else None
            out.append(
                ProcessStatus(
                    process_id=process.process_id,
                    command=process.command,
                    state=_state(process),
                    exit_code=code,
                    description=process.description,
                    delivered=process.delivered,
                )  # fmt: skip
            )
        return out

    async def close(self) -> None:
        """Kill every foreground and background process group; idempotent."""
        if self._closed:
            return
        self._closed = True
        for proc in list(self._foreground.values()):
            if proc is not None:
                _shell.kill_group_of(proc)
        await asyncio.gather(*(p.kill() for p in self._processes.values()))

    async def __aenter__(self) -> LocalWorkspaceSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


_MAX_GLOB_MATCHES = 256
# Linux values; the OS refuses longer names (ENAMETOOLONG), so the session refuses first.
_NAME_MAX = 255
_PATH_MAX = 4096
_MAX_CD_TARGETS = 8


def _glob(word: str, base: Path) -> list[str]:
    """What the shell would expand a glob word to (bounded); ``[]`` for a plain word."""
    if not any(ch in word for ch in "*?[") or "\0" in word:
        return []
    pattern = os.path.join(base, os.path.expanduser(word))
    return list(itertools.islice(glob.iglob(pattern), _MAX_GLOB_MATCHES))


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspaceError(
            "the text contains lone surrogates and cannot be written as UTF-8",
            hint="send valid Unicode text",
        ) from None


def _output(process: _shell.BackgroundProcess) -> ProcessOutput:
    """What a read or a kill delivers; a drop is announced in the output text itself."""
    text, dropped = process.take()
    if dropped:
        text = f"[... {dropped} older characters were dropped unread ...]\n{text}"
    return ProcessOutput(
        process_id=process.process_id, output=text, state=_state(process),
        exit_code=process.exit_code, dropped_chars=dropped,
    )  # fmt: skip


def _tolerant_matches(text: str, old: str) -> list[re.Match[str]]:
    """Where ``old`` occurs in ``text`` (left to right, never overlapping) when each of its
    line breaks may be ``\n`` or ``\r\n`` in the file: the one count every edit rule uses."""
    lines = old.replace("\r\n", "\n").split("\n")
    return list(re.finditer("\r?\n".join(re.escape(line) for line in lines), text))


def _replace(text: str, matches: list[re.Match[str]], old: str, new: str) -> str:
    """``text`` with every match replaced by ``new``; a match that is not ``old`` verbatim
    gets ``new`` with the line breaks it used (CRLF stays CRLF, LF stays LF)."""
    pieces, last = [], 0
    for match in matches:
        found = match.group(0)
        if found == old:
            replacement = new
        else:
            lf = new.replace("\r\n", "\n")
            replacement = lf.replace("\n", "\r\n") if "\r\n" in found else lf
        pieces += [text[last : match.start()], replacement]
        last = match.end()
    return "".join(pieces) + text[last:]


def _write(judged: Path, root: Path, path: str, data: bytes, create_only: bool) -> bool:
    """``write_atomic`` at the judged path; with ``create_only``, nothing may exist at the
    path as given either (``O_EXCL``): a link there, dangling or not, refuses."""
    lexical = Path(root, os.path.expanduser(path))
    if create_only and lexical.is_symlink():
        raise WorkspaceError(
            f"{lexical.name!r} already exists (a symlink to {os.readlink(lexical)!r})",
            hint="use create_only=false to write through the link, or pick another path",
        )
    return write_atomic(judged, data, create_only=create_only)


def _names_directory(path: str) -> bool:
    """A trailing ``/`` (or a final ``.`` / ``..``) names a directory, as for the OS."""
    return path.endswith("/") or os.path.basename(path) in (".", "..")


def _too_long_component(raw: str) -> bool:
    return any(len(os.fsencode(part)) > _NAME_MAX for part in raw.split(os.sep))


def _state(process: _shell.BackgroundProcess) -> Literal["running", "exited", "killed"]:
    if process.running:
        return "running"
    return "killed" if process.killed else "exited"


def _clip_result(result: CommandResult, max_chars: int) -> CommandResult:
    stdout, out_cut = _shell.clip_text(result.stdout, max_chars)
    stderr, err_cut = _shell.clip_text(result.stderr, max_chars)
    if not (out_cut or err_cut):
        return result
    from dataclasses import replace

    return replace(result, stdout=stdout, stderr=stderr, truncated=True)


def _page(
    text: str,
    shown: str,
    start: int | None,
    end: int | None,
    max_chars: int,
    partial: bool,
    read: int,
    size: int,
) -> FileContent:
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    total = len(lines)
    first = start or 1
    last = min(end or total, total)
    chosen: list[str] = []
    used = 0
    truncated = False
    for line in lines[first - 1 : last]:
        if used + len(line) > max_chars:
            truncated = True
            if not chosen:  # a single huge line: give its head
                chosen.append(line[:max_chars])
            break
        chosen.append(line)
        used += len(line)
    shown_end = first + len(chosen) - 1 if chosen else max(first - 1, 0)
    note = None
    if partial:
        note = f"the file is {size} bytes; only the first {read} bytes were read"
    return FileContent(
        path=shown, content="".join(chosen), start=first, end=shown_end,
        total_lines=total, truncated=truncated, note=note,
    )  # fmt: skip
