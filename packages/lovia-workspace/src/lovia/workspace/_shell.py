"""Process plumbing shared by the local shell, background processes and sandbox executors.

Every command starts in a fresh session (so a fresh process group) with stdin closed. A
foreground command's group is killed once the command ends (reaping children it left
behind) or its timeout fires. Output pipes are our own, read through transports we close
ourselves, so a detached grandchild that keeps a pipe open can delay the result by at most
``DRAIN_GRACE`` seconds and never hang it.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import secrets
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkspaceError
from .results import CommandResult

__all__: list[str] = []

DRAIN_GRACE = 1.0
"""Seconds to keep reading after a process ended (a detached child may hold the pipe)."""

_MINIMAL_KEYS = frozenset({"PATH", "HOME", "LANG", "LANGUAGE"})


def build_env(
    root: Path,
    *,
    inherit_env: bool,
    session_env: Mapping[str, str] | None,
    call_env: Mapping[str, str] | None,
) -> dict[str, str]:
    """The environment for one command: minimal (or inherited), venv, then explicit vars."""
    if inherit_env:
        env = dict(os.environ)
    else:
        env = {k: v for k, v in os.environ.items() if k in _MINIMAL_KEYS or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    venv = find_venv(root)
    if venv is not None:
        env["PATH"] = str(venv_bin(venv)) + os.pathsep + env["PATH"]
        env["VIRTUAL_ENV"] = str(venv)
        env.pop("PYTHONHOME", None)
    env.update(session_env or {})
    env.update(call_env or {})
    return env


VENV_NAMES = (".venv", "venv")
"""Where a workspace's own virtualenv may live, in order of preference."""


def venv_bin(venv: Path) -> Path:
    """The scripts directory of a venv for this OS."""
    return venv / ("Scripts" if os.name == "nt" else "bin")


def find_venv(root: Path) -> Path | None:
    """``.venv`` (preferred) or ``venv`` under ``root`` holding a real interpreter, else None."""
    exe = "python.exe" if os.name == "nt" else "python"
    for name in VENV_NAMES:
        candidate = root / name
        if is_interpreter(venv_bin(candidate) / exe):
            return candidate
    return None


# Executable formats (ELF, Mach-O both byte orders and fat, PE) and a Python shebang.
_BINARY_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xca\xfe\xba\xbe", b"MZ")
_PYTHON_SHEBANG = re.compile(rb"^#![^\n]*python[0-9.]*(\s|$)")


def is_interpreter(path: Path) -> bool:
    """Whether ``path`` (links followed) is an executable binary or a Python script: what a
    venv's ``python`` is. A plain file or a shell script is not, and is never activated.

    Checked without running it: running a file the workspace planted is what this avoids.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
        executable = os.access(path, os.X_OK) and path.is_file()
    except OSError:
        return False
    return executable and (head.startswith(_BINARY_MAGIC) or bool(_PYTHON_SHEBANG.match(head)))


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (gone already is fine)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_group_of(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the group ``proc`` leads, what is left of it once ``proc`` has exited.

    A group id stays reserved while any member lives, but once the group is empty the
    number can be handed to a new process (a later command is a group leader too). So
    after ``proc`` was reaped, a live process holding its pid means the number was
    reused, and the group is left alone.
    """
    if proc.returncode is not None and os.path.exists(f"/proc/{proc.pid}"):
        return
    kill_group(proc.pid)


TAG_VAR = "LOVIA_PROCESS_TAG"
"""Set in every command's environment so escaped descendants can still be found."""


def new_tag() -> str:
    """A fresh process tag for one command."""
    return secrets.token_hex(8)


_MAX_KILL_PASSES = 10


def kill_tagged(tag: str) -> int:
    """SIGKILL every process whose environment carries ``tag``; how many were signalled.

    A child that called ``setsid`` has left the process group, but it still carries the
    environment it was started with. One pass over ``/proc`` is not enough: a tagged
    process can fork between the listing and the kill, and a process in the middle of
    ``execve`` briefly shows an empty environment. So passes repeat (bounded) until one
    finds nothing tagged and no new process with an empty environment. Best effort: a
    process that scrubbed its environment is out of reach (the sandbox executor kills
    through its PID namespace instead).
    """
    marker = f"{TAG_VAR}={tag}".encode()
    killed = 0
    unsure: set[int] = set()
    for _ in range(_MAX_KILL_PASSES):
        tagged, empty = _scan_environ(marker)
        for pid in tagged:
            with contextlib.suppress(OSError):  # gone already
                os.kill(pid, signal.SIGKILL)
                killed += 1
        fresh = empty - unsure
        unsure |= empty
        if not tagged and not fresh:
            break
        time.sleep(0.002)  # let an execve in progress publish its environment
    return killed


def _scan_environ(marker: bytes) -> tuple[list[int], set[int]]:
    """Pids whose environment holds ``marker``, and live pids whose environment is empty."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # no procfs: nothing more can be found
        return [], set()
    me = os.getpid()
    tagged: list[int] = []
    empty: set[int] = set()
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:  # gone, or not ours to read
            continue
        if marker in environ.split(b"\0"):
            tagged.append(pid)
        elif not environ and _live_user_process(pid):
            empty.add(pid)
    return tagged, empty


def _live_user_process(pid: int) -> bool:
    """Not a zombie and not a kernel thread (both always show an empty environment)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    state, ppid = fields[0], int(fields[1])
    return state not in (b"Z", b"X") and ppid not in (0, 2)


class _Sink(asyncio.Protocol):
    def __init__(self, feed: Callable[[bytes], None]) -> None:
        self.feed = feed
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


@dataclass(slots=True)
class PipeReader:
    """The read end of one output pipe; ``closed`` resolves at EOF."""

    transport: asyncio.ReadTransport
    closed: asyncio.Future[None]

    async def drain(self, grace: float) -> bool:
        """Wait up to ``grace`` seconds for EOF, then close; ``False`` if EOF never came."""
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), grace)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self.transport.close()


async def open_pipe(feed: Callable[[bytes], None]) -> tuple[int, PipeReader]:
    """A new pipe: the write fd for a child, and a reader feeding ``feed``."""
    read_fd, write_fd = os.pipe()
    sink = _Sink(feed)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(lambda: sink, os.fdopen(read_fd, "rb", 0))
    return write_fd, PipeReader(transport, sink.closed)


async def start(
    argv: list[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdout: int,
    stderr: int,
    pass_fds: tuple[int, ...] = (),
) -> asyncio.subprocess.Process:
    """Start ``argv`` in a new session with stdin closed; closes the child's fds here.

    Raises ``WorkspaceError`` when the process cannot be started.
    """
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise WorkspaceError(
            f"cannot start {argv[0]!r}: {exc.strerror or exc}", hint="check the command and cwd"
        ) from None
    finally:
        for fd in {stdout, stderr, *pass_fds}:
            os.close(fd)


class Capture:
    """Bounded capture of one stream: its first and last ``max_chars // 2`` bytes."""

    def __init__(self, max_chars: int) -> None:
        self.half = max(max_chars, 0) // 2
        self.max_chars = max(max_chars, 0)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> tuple[str, bool]:
        """The captured text; a cut middle is announced with the number of bytes lost."""
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted > 0:
            head = self.head.decode("utf-8", "replace")
            tail = self.tail.decode("utf-8", "replace")
            return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}", True
        return clip_text(bytes(self.head + self.tail).decode("utf-8", "replace"), self.max_chars)


def clip_text(text: str, max_chars: int) -> tuple[str, bool]:
    """Keep the head and tail of ``text`` within ``max_chars``, announcing the cut."""
    if len(text) <= max_chars:
        return text, False
    half = max_chars // 2
    omitted = len(text) - 2 * half
    tail = text[-half:] if half else ""
    return f"{text[:half]}\n[... {omitted} characters omitted ...]\n{tail}", True


async def run(
    argv: list[str],
    *,
    command: str,
    cwd: str,
    env: Mapping[str, str],
    timeout: float | None,
    max_chars: int,
    track: Callable[[asyncio.subprocess.Process | None, int], None] | None = None,
) -> CommandResult:
    """Run ``argv`` to completion (or timeout) and capture both streams.

    ``track(proc, pid)`` is told about the process when it starts (and ``track(None, pid)``
    when it is gone) so an owner can kill it on close. When the command ends (exit,
    timeout or cancellation) its process group and every tagged descendant are killed.
    """
    tag = new_tag()
    env = {**env, TAG_VAR: tag}
    out, err = Capture(max_chars), Capture(max_chars)
    out_fd, out_reader = await open_pipe(out.feed)
    try:
        err_fd, err_reader = await open_pipe(err.feed)
    except BaseException:
        os.close(out_fd)
        out_reader.transport.close()
        raise
    began = time.monotonic()
    try:
        proc = await start(argv, cwd=cwd, env=env, stdout=out_fd, stderr=err_fd)
    except BaseException:
        out_reader.transport.close()
        err_reader.transport.close()
        raise
    if track is not None:
        track(proc, proc.pid)
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            timed_out = True
    finally:
        # Reap the whole tree: the group, then descendants that left it with setsid.
        kill_group_of(proc)
        await asyncio.shield(proc.wait())
        await asyncio.shield(asyncio.to_thread(kill_tagged, tag))
        drained = await asyncio.shield(_drain_both(out_reader, err_reader))
        if track is not None:
            track(None, proc.pid)
    duration = time.monotonic() - began
    stdout, out_cut = out.text()
    stderr, err_cut = err.text()
    code = proc.returncode
    note = None if drained else "a detached process kept the output open; later output is not shown"
    return CommandResult(
        command=command,
        exit_code=None if timed_out or code is None or code < 0 else code,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        signal=-code if code is not None and code < 0 and not timed_out else None,
        duration=duration,
        truncated=out_cut or err_cut,
        note=note,
    )


async def _drain_both(a: PipeReader, b: PipeReader) -> bool:
    first, second = await asyncio.gather(a.drain(DRAIN_GRACE), b.drain(DRAIN_GRACE))
    return first and second


class BackgroundProcess:
    """A session-owned process with merged output in a bounded, newest-kept buffer."""

    def __init__(
        self,
        process_id: str,
        command: str,
        description: str | None,
        max_chars: int,
    ) -> None:
        self.process_id = process_id
        self.command = command
        self.description = description
        self.max_chars = max_chars
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: PipeReader | None = None
        self.buffer = ""
        self.dropped = 0
        self.killed = False
        self.delivered = False
        self.exit_code: int | None = None
        self.tag = new_tag()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> None:
        self.buffer += self._decoder.decode(data)
        if len(self.buffer) > self.max_chars:
            self.dropped += len(self.buffer) - self.max_chars
            self.buffer = self.buffer[-self.max_chars :]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self, argv: list[str], *, cwd: str, env: Mapping[str, str]) -> None:
        fd, self.reader = await open_pipe(self.feed)
        try:
            env = {**env, TAG_VAR: self.tag}
            self.proc = await start(argv, cwd=cwd, env=env, stdout=fd, stderr=os.dup(fd))
        except BaseException:
            self.reader.transport.close()
            raise

    async def settle(self) -> None:
        """After an exit: collect the exit code and the remaining output (bounded)."""
        assert self.proc is not None and self.reader is not None
        self.exit_code = await self.proc.wait()
        await self.reader.drain(DRAIN_GRACE)
        self.buffer += self._decoder.decode(b"", final=True)

    def take(self) -> tuple[str, int]:
        """Output since the last take, and how many characters were dropped unread."""
        text, dropped = self.buffer, self.dropped
        self.buffer, self.dropped = "", 0
        return text, dropped

    async def kill(self) -> None:
        """Kill the whole group and wait for the process."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.killed = True
        kill_group_of(self.proc)
        await asyncio.to_thread(kill_tagged, self.tag)
        await self.settle()
