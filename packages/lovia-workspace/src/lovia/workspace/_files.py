"""Blocking file primitives for the session (run on a worker thread).

Check-then-use races: the session judges a resolved path, then these helpers open exactly
that path without following a final symlink (``O_NOFOLLOW``) and re-check where the open
descriptor really points (``/proc/self/fd``), so a symlink swapped in between is refused.
Writes walk to the parent directory one ``O_NOFOLLOW`` level at a time (creating missing
levels), so a swapped-in symlink is refused before anything lands where it points, then
write a temporary file that replaces the target atomically (``rename`` never follows the
final symlink), so readers never see a torn file.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from .errors import PermissionDeniedError, WorkspaceError

__all__: list[str] = []

_SNIFF_BYTES = 8192
_MAX_BAD_BYTES_RATIO = 0.001  # "mostly UTF-8": a stray byte or two, never a legacy encoding
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no procfs (not Linux): the O_NOFOLLOW open is the only check left
        return None


def _verify(fd: int, judged: Path) -> None:
    actual = _fd_path(fd)
    # "(deleted)": the file we opened at the judged path was since replaced (an atomic
    # save by a concurrent writer); the descriptor still holds the judged file's content.
    if actual is not None and actual not in (str(judged), f"{judged} (deleted)"):
        raise PermissionDeniedError(
            f"{str(judged)!r} changed while it was being opened (now {actual!r})",
            hint="a symlink was swapped in after the policy check; the operation was refused",
        )


def open_checked(judged: Path, flags: int = os.O_RDONLY) -> int:
    """Open the judged path itself; refuse if it is no longer what was judged."""
    try:
        # O_NONBLOCK: opening a FIFO must not hang; regular files ignore the flag.
        fd = os.open(judged, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise WorkspaceError(f"{str(judged)!r} does not exist") from None
    except IsADirectoryError:
        raise WorkspaceError(
            f"{str(judged)!r} is a directory", hint="use list_files for directories"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final component became a symlink after the check
            raise PermissionDeniedError(
                f"{str(judged)!r} is a symlink that does not resolve (a loop) or was "
                "swapped in after the policy check",
                hint="the operation was refused; point at a real file",
            ) from None
        raise WorkspaceError(f"cannot open {str(judged)!r}: {exc.strerror}") from None
    try:
        _verify(fd, judged)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_prefix(judged: Path, max_bytes: int) -> tuple[bytes, int]:
    """Up to ``max_bytes`` of the file, and its full size."""
    fd = open_checked(judged)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"{str(judged)!r} is a directory", hint="use list_files")
        if not stat.S_ISREG(st.st_mode):
            raise WorkspaceError(
                f"{str(judged)!r} is not a regular file (a device, FIFO or socket)",
                hint="only regular files can be read",
            )
        chunks: list[bytes] = []
        remaining = max_bytes
        while remaining > 0:
            try:
                chunk = os.read(fd, min(remaining, 1 << 20))
            except OSError as exc:  # EAGAIN from a pseudo-file (/proc/kmsg), EIO...
                raise WorkspaceError(
                    f"cannot read {str(judged)!r}: {exc.strerror}",
                    hint="only regular files with readable content can be read",
                ) from None
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks), max(st.st_size, max_bytes - remaining)
    finally:
        os.close(fd)


def is_binary(data: bytes) -> bool:
    """NUL bytes near the start, or a UTF-16/32 byte-order mark."""
    return data.startswith(_UTF16_BOMS) or b"\x00" in data[:_SNIFF_BYTES]


def decode_text(data: bytes, path: str, *, partial: bool) -> str:
    """Decode UTF-8 text; refuse binary, UTF-16 and legacy encodings (a stray byte is OK).

    ``partial`` means ``data`` is a prefix, so a character cut at the end is dropped.
    """
    if is_binary(data):
        raise WorkspaceError(
            f"{path!r} looks binary (or UTF-16/32); refusing to read it as text",
            hint="only UTF-8 text files can be read; use view_image for images",
        )
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    text = decoder.decode(data, final=not partial)
    bad = sum(1 for ch in text if "\udc80" <= ch <= "\udcff")
    if bad and bad > max(1.0, len(data) * _MAX_BAD_BYTES_RATIO):
        raise WorkspaceError(
            f"{path!r} is not UTF-8 text ({bad} undecodable bytes)",
            hint="convert the file to UTF-8 first (e.g. with iconv in the shell)",
        )
    if bad:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text.removeprefix("\ufeff")


def write_atomic(judged: Path, data: bytes, *, create_only: bool) -> bool:
    """Replace (or create) the file atomically; ``True`` when it was created."""
    dir_fd = _open_parent(judged.parent)
    try:
        return _write_in(dir_fd, judged, data, create_only=create_only)
    except OSError as exc:  # ENOSPC, EDQUOT, EROFS, EACCES...
        raise WorkspaceError(f"cannot write {str(judged)!r}: {exc.strerror}") from None
    finally:
        os.close(dir_fd)


def _open_parent(parent: Path) -> int:
    """Open (creating missing levels) the judged directory without following any symlink.

    The judged path is fully resolved, so no level of it is a symlink unless one was
    swapped in after the check: walking it one ``O_NOFOLLOW`` level at a time means such a
    swap is refused before anything (not even a directory) is created where it points.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags)
    try:
        for name in parent.parts[1:]:
            try:
                try:
                    child = os.open(name, flags, dir_fd=fd)
                except FileNotFoundError:
                    with contextlib.suppress(FileExistsError):  # a concurrent mkdir
                        os.mkdir(name, 0o777, dir_fd=fd)
                    child = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise WorkspaceError(f"cannot open {str(parent)!r}: {exc.strerror}") from None
                if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise PermissionDeniedError(
                        f"{str(parent)!r} holds a symlink that does not resolve (a loop) "
                        "or was swapped in after the policy check",
                        hint="the write was refused; point at a real directory",
                    ) from None
                raise WorkspaceError(f"{str(parent)!r} is not a directory") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_in(dir_fd: int, judged: Path, data: bytes, *, create_only: bool) -> bool:
    name = judged.name
    try:
        existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None:
        if stat.S_ISDIR(existing.st_mode):
            raise WorkspaceError(f"{str(judged)!r} is a directory", hint="write to a file path")
        if stat.S_ISLNK(existing.st_mode):
            raise PermissionDeniedError(
                f"{str(judged)!r} is a symlink that does not resolve (a loop) or was "
                "swapped in after the policy check",
                hint="the write was refused; point at a real file",
            )
        if create_only:
            raise WorkspaceError(
                f"{str(judged)!r} already exists",
                hint="use edit_file to change it, or create_only=false to overwrite",
            )
    tmp = f".{name}.{secrets.token_hex(4)}.lovia-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666, dir_fd=dir_fd)  # fmt: skip
    try:
        try:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        if create_only:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dir_fd)
        else:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileExistsError:
        os.unlink(tmp, dir_fd=dir_fd)
        raise WorkspaceError(f"{str(judged)!r} already exists") from None
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    return existing is None
