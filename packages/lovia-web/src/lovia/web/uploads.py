"""Uploads into the workspace: ``uploads/`` under the root, sanitised names, bounded sizes.

``UploadTarget.open(filename)`` starts one file in ``uploads/`` (``PendingUpload``: ``write``
the chunks as they arrive, then ``finish`` or ``abort``):

* the name is sanitised (``sanitize_filename``): Unicode NFKC-normalised, only the last
  path component kept, control and format characters (NUL, bidi overrides, zero-width)
  removed, leading dots and spaces and trailing dots stripped, Windows device names
  (``CON``, ``NUL``, ``COM1``...) prefixed, capped at ``MAX_NAME_BYTES``;
* its extension must be allowed (``LOVIA_UPLOAD_ALLOWED_EXT``: a comma list, ``*`` for any;
  ``DEFAULT_ALLOWED_EXT`` otherwise); an extensionless name is allowed;
* the bytes go to a hidden temporary file in ``uploads/`` and are counted as they arrive: one
  byte over ``LOVIA_MAX_UPLOAD_MB`` (default 25) stops the upload and deletes the
  temporary file (``UploadTooLarge``, a 413); an empty file is refused (``UploadRejected``);
* the finished file is hard-linked to its final name, which never replaces an existing file:
  a taken name becomes ``name (1).ext``, ``name (2).ext``..., so concurrent uploads of one
  name all land under distinct names.

An ``uploads`` that is a symlink, or not a directory, refuses uploads (``UploadsUnavailable``,
a 409), as does a workspace policy that denies ``uploads/`` outright.
"""

from __future__ import annotations

import math
import os
import secrets
import unicodedata
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from lovia.workspace import LocalWorkspace

from .errors import WebError

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

__all__ = [
    "DEFAULT_ALLOWED_EXT",
    "MAX_NAME_BYTES",
    "PendingUpload",
    "StoredUpload",
    "UPLOAD_DIR",
    "UploadLimits",
    "UploadRejected",
    "UploadTarget",
    "UploadTooLarge",
    "UploadsUnavailable",
    "receive_multipart",
    "sanitize_filename",
]

UPLOAD_DIR = "uploads"
MAX_NAME_BYTES = 200
"""A stored name's length in UTF-8 bytes (room left for a `` (n)`` suffix)."""
DEFAULT_MAX_MB = 25.0

DEFAULT_ALLOWED_EXT = frozenset(
    {
        # text, docs and data
        "txt", "md", "markdown", "rst", "csv", "tsv", "json", "jsonl", "ndjson", "yaml",
        "yml", "toml", "ini", "cfg", "conf", "xml", "html", "htm", "log", "sql", "tex",
        "pdf", "doc", "docx", "odt", "rtf", "xls", "xlsx", "ods", "ppt", "pptx", "odp",
        "epub", "parquet",
        # images (svg is stored, never served inline)
        "png", "jpg", "jpeg", "gif", "webp", "avif", "bmp", "ico", "tif", "tiff", "svg",
        "heic",
        # audio and video
        "mp3", "wav", "ogg", "flac", "m4a", "mp4", "webm", "mov",
        # code
        "py", "pyi", "ipynb", "js", "mjs", "cjs", "ts", "tsx", "jsx", "css", "scss", "c",
        "h", "cc", "cpp", "hpp", "rs", "go", "java", "kt", "swift", "rb", "php", "lua",
        "r", "jl", "sh", "bash", "zsh", "ps1", "patch", "diff",
        # archives
        "zip", "tar", "gz", "tgz", "bz2", "xz", "zst", "7z",
    }
)  # fmt: skip

_WINDOWS_DEVICES = frozenset(
    {"con", "prn", "aux", "nul", "clock$", "conin$", "conout$"}
    | {f"com{i}" for i in range(10)}
    | {f"lpt{i}" for i in range(10)}
)


class UploadRejected(WebError):
    """An empty file, a disallowed extension or a missing file field."""

    status = 422


class UploadTooLarge(WebError):
    """Over ``LOVIA_MAX_UPLOAD_MB``."""

    status = 413


class UploadsUnavailable(WebError):
    """The workspace cannot take uploads (``uploads`` is a symlink, a file, or denied)."""

    status = 409


@dataclass(frozen=True, slots=True)
class UploadLimits:
    """``max_bytes`` per file; ``allowed_ext`` lower-case suffixes without the dot, or
    ``None`` for any."""

    max_bytes: int = int(DEFAULT_MAX_MB * 1024 * 1024)
    allowed_ext: frozenset[str] | None = DEFAULT_ALLOWED_EXT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> UploadLimits:
        """From ``LOVIA_MAX_UPLOAD_MB`` and ``LOVIA_UPLOAD_ALLOWED_EXT`` (unset or
        unparsable values keep the defaults)."""
        env = os.environ if environ is None else environ
        try:
            mb = float(env.get("LOVIA_MAX_UPLOAD_MB", "") or DEFAULT_MAX_MB)
        except ValueError:
            mb = DEFAULT_MAX_MB
        mb = mb if math.isfinite(mb) and mb >= 0 else DEFAULT_MAX_MB
        raw = env.get("LOVIA_UPLOAD_ALLOWED_EXT", "").strip()
        allowed: frozenset[str] | None = DEFAULT_ALLOWED_EXT
        if raw == "*":
            allowed = None
        elif raw:
            allowed = frozenset(
                e.strip().lstrip(".").lower() for e in raw.split(",") if e.strip().lstrip(".")
            )
        return cls(max_bytes=int(mb * 1024 * 1024), allowed_ext=allowed)

    def allows(self, name: str) -> bool:
        suffix = Path(name).suffix
        return self.allowed_ext is None or not suffix or suffix[1:].lower() in self.allowed_ext


@dataclass(frozen=True, slots=True)
class StoredUpload:
    path: str
    """Relative to the workspace root, e.g. ``uploads/report (1).pdf``."""
    name: str
    size: int


def sanitize_filename(raw: str) -> str:
    """A safe single-component file name for ``raw`` (see the module docstring); never
    empty (``upload`` when nothing is left)."""
    name = unicodedata.normalize("NFKC", raw)
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(" " if ch.isspace() else ch for ch in name)
    name = "".join(ch for ch in name if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    name = " ".join(name.split())  # every whitespace run becomes one space
    name = name.lstrip(". ").rstrip(". ")
    stem = name.split(".", 1)[0]
    if stem.lower() in _WINDOWS_DEVICES:
        name = "_" + name
    if not name:
        name = "upload"
    return _cap(name, MAX_NAME_BYTES)


def _cap(name: str, limit: int) -> str:
    if len(name.encode("utf-8")) <= limit:
        return name
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or len(ext.encode("utf-8")) > 16:
        stem, ext = name, ""
    ext = "." + ext if ext else ""
    budget = limit - len(ext.encode("utf-8"))
    cut = stem.encode("utf-8")[:budget].decode("utf-8", "ignore").rstrip(". ")
    return (cut or "upload") + ext


def _candidates(name: str) -> Iterator[str]:
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    suffix = "." + ext if ext else ""
    yield name
    for n in range(1, 10_000):
        yield f"{stem} ({n}){suffix}"


class UploadTarget:
    """``uploads/`` of one ``LocalWorkspace``."""

    def __init__(self, workspace: LocalWorkspace, limits: UploadLimits | None = None) -> None:
        self.root = workspace.root
        self.policy = workspace.policy
        self.limits = limits if limits is not None else UploadLimits.from_env()

    @property
    def directory(self) -> Path:
        return self.root / UPLOAD_DIR

    def unavailable_reason(self) -> str | None:
        """Why uploads are refused here, or ``None`` when they are possible."""
        if self.limits.max_bytes <= 0:
            return "uploads are turned off (LOVIA_MAX_UPLOAD_MB=0)"
        if self.policy.hard_denied(UPLOAD_DIR, self.directory):
            return "the workspace policy denies uploads/"
        if os.path.islink(self.directory):
            return "uploads/ is a symlink"
        if os.path.lexists(self.directory) and not self.directory.is_dir():
            return "uploads/ is not a directory"
        return None

    def _directory(self) -> int:
        """A descriptor of ``uploads/`` (created if missing), opened without following a
        symlink: every later file operation is relative to it, so a directory swapped for
        a link after this check cannot redirect the upload."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise UploadsUnavailable(f"this workspace takes no uploads: {reason}")
        try:
            os.mkdir(self.directory, 0o755)
        except FileExistsError:
            pass
        except OSError:
            raise UploadsUnavailable("cannot create uploads/ in the workspace") from None
        try:
            return os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            raise UploadsUnavailable("this workspace takes no uploads: uploads/ changed") from None

    def check_name(self, filename: str) -> str:
        """The sanitised name; raises ``UploadRejected`` for a disallowed extension."""
        name = sanitize_filename(filename)
        if not self.limits.allows(name):
            allowed = self.limits.allowed_ext or frozenset()
            raise UploadRejected(
                f"file: the extension of {name!r} is not allowed",
                hint=f"allowed: {', '.join(sorted(allowed))} (set LOVIA_UPLOAD_ALLOWED_EXT)",
            )
        if self.policy.hard_denied(f"{UPLOAD_DIR}/{name}", self.directory / name):
            raise UploadRejected(f"file: the workspace policy denies the name {name!r}")
        return name

    def open(self, filename: str) -> PendingUpload:
        """Start receiving ``filename`` (checked first); feed it, then ``finish`` or
        ``abort`` it."""
        name = self.check_name(filename)
        return PendingUpload(self, name, self._directory())


class PendingUpload:
    """One upload being received into a hidden temporary file of ``uploads/``."""

    def __init__(self, target: UploadTarget, name: str, dir_fd: int) -> None:
        self.target = target
        self.name = name
        self.size = 0
        self._dir_fd: int | None = dir_fd
        self._temp = f".upload-{secrets.token_hex(8)}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self._fd: int | None = os.open(self._temp, flags, 0o644, dir_fd=dir_fd)
        except OSError:
            os.close(dir_fd)
            self._dir_fd = None
            raise UploadsUnavailable("cannot write into uploads/") from None

    def write(self, data: bytes) -> None:
        """Append ``data``; raises ``UploadTooLarge`` (and aborts) past the cap."""
        if self._fd is None:
            return
        self.size += len(data)
        if self.size > self.target.limits.max_bytes:
            self.abort()
            mb = self.target.limits.max_bytes / (1024 * 1024)
            raise UploadTooLarge(
                f"file: the upload is over the {mb:g} MB limit",
                hint="set LOVIA_MAX_UPLOAD_MB to raise it",
            )
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def abort(self) -> None:
        """Drop the temporary file; idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._dir_fd is not None:
            try:
                os.unlink(self._temp, dir_fd=self._dir_fd)
            except FileNotFoundError:
                pass
            finally:
                os.close(self._dir_fd)
                self._dir_fd = None

    def finish(self) -> StoredUpload:
        """Give the file its final name (never replacing one); raises ``UploadRejected``
        for an empty file."""
        if self._fd is None or self._dir_fd is None:
            raise UploadRejected("file: the upload was aborted")
        if self.size == 0:
            self.abort()
            raise UploadRejected("file: the file is empty", hint="upload a non-empty file")
        os.close(self._fd)
        self._fd = None
        try:
            for candidate in _candidates(self.name):
                try:  # a hard link never replaces an existing name
                    os.link(self._temp, candidate, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
                except FileExistsError:
                    continue
                return StoredUpload(f"{UPLOAD_DIR}/{candidate}", candidate, self.size)
            raise UploadsUnavailable(f"too many uploads named {self.name!r}")
        finally:
            self.abort()


_FORM_OVERHEAD = 64 * 1024
"""Bytes of multipart framing (boundaries, part headers, small fields) allowed on top of
the file itself."""


async def receive_multipart(
    target: UploadTarget, content_type: str, body: AsyncIterator[bytes]
) -> StoredUpload:
    """Stream a ``multipart/form-data`` body whose ``file`` part is the upload into
    ``target`` (other fields are ignored; a second file part too).

    Nothing is buffered beyond one chunk: the file part goes to disk as it arrives and the
    upload stops at the cap (``UploadTooLarge``). Whatever goes wrong (a bad body, a cut
    stream, a client gone), no partial file is left behind.
    """
    from python_multipart.exceptions import FormParserError
    from python_multipart.multipart import MultipartParser, parse_options_header

    kind, params = parse_options_header(content_type.encode("latin-1", "replace"))
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise UploadRejected(
            "body: expected multipart/form-data with a boundary",
            hint="send the file as the 'file' field of a multipart form",
        )
    state = _FormState(target)
    parser = MultipartParser(boundary, cast("MultipartCallbacks", state.callbacks()))
    limit = target.limits.max_bytes + _FORM_OVERHEAD
    received = 0
    try:
        async for chunk in body:
            received += len(chunk)
            if received > limit:
                raise UploadTooLarge(
                    f"file: the upload is over the {target.limits.max_bytes / 1048576:g} MB limit",
                    hint="set LOVIA_MAX_UPLOAD_MB to raise it",
                )
            try:
                parser.write(chunk)
            except FormParserError:  # a malformed body; its own message names nothing useful
                raise UploadRejected("body: not a valid multipart form") from None
            state.flush()
        if state.pending is None:
            raise UploadRejected("file: the form has no 'file' part with a filename")
        if not state.file_done or not state.ended:
            raise UploadRejected("body: the multipart form ended early")
        return state.pending.finish()
    finally:
        if state.pending is not None:
            state.pending.abort()


class _FormState:
    """The parser callbacks' state: the current part's headers and the upload."""

    def __init__(self, target: UploadTarget) -> None:
        self.target = target
        self.pending: PendingUpload | None = None
        self.file_done = False
        self.ended = False
        self._in_file = False
        self._field = bytearray()
        self._value = bytearray()
        self._headers: dict[bytes, bytes] = {}
        self._chunks: list[bytes] = []
        self._error: WebError | None = None

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self._headers = {}
        self._in_file = False

    def _header_end(self) -> None:
        if len(self._headers) < 16:
            self._headers[bytes(self._field).strip().lower()] = bytes(self._value).strip()
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        from python_multipart.multipart import parse_options_header

        _, params = parse_options_header(self._headers.get(b"content-disposition", b""))
        filename = params.get(b"filename")
        if params.get(b"name") != b"file" or filename is None or self.pending is not None:
            return
        try:
            self.pending = self.target.open(filename.decode("utf-8", "replace"))
        except WebError as exc:  # raised from flush(), outside the parser's own frames
            self._error = exc
            return
        self._in_file = True

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            self._chunks.append(data[start:end])

    def _part_end(self) -> None:
        if self._in_file:
            self._in_file = False
            self.file_done = True

    def _end(self) -> None:
        self.ended = True

    def flush(self) -> None:
        """Write what the last ``parser.write`` delivered; raise a deferred error."""
        if self._error is not None:
            raise self._error
        if self.pending is not None:
            for chunk in self._chunks:
                self.pending.write(chunk)
        self._chunks.clear()
