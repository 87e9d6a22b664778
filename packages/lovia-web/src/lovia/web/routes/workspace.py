"""``/api/workspace/*`` (the read-only panel and uploads) and a chat's background processes
(``/api/sessions/{id}/processes``).

The panel serves the workspace of the selected agent (``?agent=``; the only agent by
default) and is read-only whatever that agent's mode; the logic is in ``lovia.web.files``,
``lovia.web.uploads`` and ``lovia.web.workspaces``.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi import Path as PathParam
from pydantic import BaseModel

from ..deps import State, WebState
from ..errors import NotFound
from ..files import FileEntry, WorkspaceFiles, local_workspace
from ..models import SESSION_ID_PATTERN, error_responses
from ..uploads import UploadTarget, UploadTooLarge, receive_multipart

__all__ = [
    "FileEntryModel",
    "FileListing",
    "ProcessInfo",
    "ProcessList",
    "RecentFiles",
    "TextFile",
    "UploadResult",
    "WorkspaceInfo",
    "kill_process",
    "list_files",
    "list_processes",
    "raw_file",
    "read_file",
    "recent_files",
    "router",
    "upload",
    "workspace_info",
]

router = APIRouter()

_ERRORS = error_responses(403, 404, 422)
_AGENT = Query(default=None, max_length=200, description="the agent whose workspace to serve")
_PATH = Query(max_length=4096, description="relative to the workspace root")


class WorkspaceInfo(BaseModel):
    agent: str
    root: str
    """The root directory's name (never its full path)."""
    mode: Literal["readonly", "coding", "trusted"]
    uploads: bool
    """Whether ``POST /api/workspace/upload`` takes files."""
    max_upload_bytes: int
    allowed_extensions: list[str] | None
    """``None``: any extension."""


class FileEntryModel(BaseModel):
    name: str
    path: str
    is_dir: bool
    size: int | None
    modified: float

    @classmethod
    def of(cls, entry: FileEntry) -> FileEntryModel:
        return cls(
            name=entry.name,
            path=entry.path,
            is_dir=entry.is_dir,
            size=entry.size,
            modified=entry.modified,
        )


class FileListing(BaseModel):
    path: str
    entries: list[FileEntryModel]
    total: int
    offset: int
    limit: int
    truncated: bool


class RecentFiles(BaseModel):
    files: list[FileEntryModel]


class TextFile(BaseModel):
    path: str
    size: int
    binary: bool
    content: str | None
    offset: int
    lines: int
    total_lines: int | None
    next_offset: int | None
    truncated: bool


class UploadResult(BaseModel):
    path: str
    """Where the file was stored, relative to the workspace root."""
    name: str
    size: int


class ProcessInfo(BaseModel):
    process_id: str
    command: str
    state: Literal["running", "exited", "killed"]
    exit_code: int | None
    description: str | None


class ProcessList(BaseModel):
    session_id: str
    processes: list[ProcessInfo]


def _files(state: WebState, agent: str | None) -> tuple[str, WorkspaceFiles]:
    name = agent if agent is not None else state.supervisor.default_agent
    if name is None or name not in state.agents:
        raise NotFound(
            f"unknown agent {name!r}" if name else "this server has several agents",
            hint=f"pass ?agent= one of: {', '.join(sorted(state.agents))}",
        )
    workspace = local_workspace(state.agents[name].workspace)
    if workspace is None:
        raise NotFound(f"agent {name!r} has no workspace")
    return name, WorkspaceFiles(workspace)


@router.get("/api/workspace", response_model=WorkspaceInfo, responses=_ERRORS)
async def workspace_info(state: State, agent: str | None = _AGENT) -> WorkspaceInfo:
    """The selected agent's workspace: its root's name, mode and whether uploads work."""
    name, files = _files(state, agent)
    target = UploadTarget(files.workspace)
    allowed = target.limits.allowed_ext
    return WorkspaceInfo(
        agent=name,
        root=files.root.name,
        mode=files.mode,
        uploads=target.unavailable_reason() is None,
        max_upload_bytes=target.limits.max_bytes,
        allowed_extensions=None if allowed is None else sorted(allowed),
    )


@router.get("/api/workspace/files", response_model=FileListing, responses=_ERRORS)
async def list_files(
    state: State,
    path: str = Query(default=".", max_length=4096),
    offset: int = Query(default=0, ge=0),
    limit: int = Query(default=200, ge=1, le=1000),
    agent: str | None = _AGENT,
) -> FileListing:
    """One directory: directories first, then files, by name; hidden and junk left out."""
    listing = await _files(state, agent)[1].listing(path, offset=offset, limit=limit)
    return FileListing(
        path=listing.path,
        entries=[FileEntryModel.of(e) for e in listing.entries],
        total=listing.total,
        offset=listing.offset,
        limit=listing.limit,
        truncated=listing.truncated,
    )


@router.get("/api/workspace/recent", response_model=RecentFiles, responses=_ERRORS)
async def recent_files(
    state: State, limit: int = Query(default=20, ge=1, le=100), agent: str | None = _AGENT
) -> RecentFiles:
    """The most recently modified files, newest first."""
    found = await _files(state, agent)[1].recent(limit=limit)
    return RecentFiles(files=[FileEntryModel.of(e) for e in found])


@router.get("/api/workspace/file", response_model=TextFile, responses=_ERRORS)
async def read_file(
    state: State,
    path: str = _PATH,
    offset: int = Query(default=0, ge=0, description="the first line (0-based)"),
    limit: int = Query(default=500, ge=1, le=5000, description="lines"),
    agent: str | None = _AGENT,
) -> TextFile:
    """A page of a text file; a binary file comes back flagged, without content."""
    page = await _files(state, agent)[1].text(path, offset=offset, limit=limit)
    return TextFile(
        path=page.path,
        size=page.size,
        binary=page.binary,
        content=page.content,
        offset=page.offset,
        lines=page.lines,
        total_lines=page.total_lines,
        next_offset=page.next_offset,
        truncated=page.truncated,
    )


_RAW: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "the file's bytes"},
    304: {"description": "not modified (If-None-Match)"},
    **error_responses(403, 404, 413, 422),
}


@router.get("/api/workspace/raw", response_class=Response, responses=_RAW)
async def raw_file(
    state: State,
    path: str = _PATH,
    agent: str | None = _AGENT,
    if_none_match: str | None = Header(default=None),
) -> Response:
    """The file's bytes: images and PDF inline with an explicit type, everything else
    (SVG included) as a download; ``ETag`` / ``If-None-Match`` answer 304."""
    raw = await _files(state, agent)[1].raw(path)
    headers = {
        "ETag": raw.etag,
        "Cache-Control": "private, no-cache",
        "X-Content-Type-Options": "nosniff",
        "Content-Disposition": _disposition(raw.path, inline=raw.inline),
    }
    if raw.mime != "application/pdf":
        headers["Content-Security-Policy"] = _SANDBOX
    if if_none_match is not None and _etag_matches(if_none_match, raw.etag):
        kept = ("ETag", "Cache-Control", "X-Content-Type-Options")
        return Response(status_code=304, headers={k: headers[k] for k in kept})
    return Response(raw.data, media_type=raw.mime, headers=headers)


_SANDBOX = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox"


def _etag_matches(header: str, etag: str) -> bool:
    tags = {t.strip().removeprefix("W/") for t in header.split(",")}
    return "*" in tags or etag in tags


def _disposition(path: str, *, inline: bool) -> str:
    name = path.rsplit("/", 1)[-1]
    fallback = "".join(_ascii(c) for c in name)
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _ascii(ch: str) -> str:
    return ch if ch.isascii() and ch.isprintable() and ch not in '"\\;' else "_"


_UPLOAD: dict[int | str, dict[str, Any]] = error_responses(404, 409, 413, 422)


@router.post(
    "/api/workspace/upload",
    response_model=UploadResult,
    status_code=201,
    responses=_UPLOAD,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                        "required": ["file"],
                    }
                }
            },
        }
    },
)
async def upload(request: Request, state: State, agent: str | None = _AGENT) -> UploadResult:
    """Store the form's ``file`` in ``uploads/`` under a sanitised, unused name."""
    files = _files(state, agent)[1]
    target = UploadTarget(files.workspace)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > target.limits.max_bytes + 64 * 1024:
        raise UploadTooLarge(
            f"file: the upload is over the {target.limits.max_bytes / 1048576:g} MB limit",
            hint="set LOVIA_MAX_UPLOAD_MB to raise it",
        )
    stored = await receive_multipart(
        target, request.headers.get("content-type", ""), request.stream()
    )
    return UploadResult(path=stored.path, name=stored.name, size=stored.size)


# -- a chat's background processes ---------------------------------------------------------

_PROCESS_ERRORS = error_responses(404, 422)
_SESSION_ID = PathParam(pattern=SESSION_ID_PATTERN)


async def _processes(state: WebState, session_id: str) -> ProcessList:
    statuses = state.supervisor.workspaces.processes(session_id)
    return ProcessList(
        session_id=session_id,
        processes=[
            ProcessInfo(
                process_id=p.process_id,
                command=p.command,
                state=p.state,
                exit_code=p.exit_code,
                description=p.description,
            )
            for p in statuses
        ],
    )


async def _known(state: WebState, session_id: str) -> None:
    if await state.store.get_session(session_id) is None:
        raise NotFound(f"unknown session {session_id!r}")


@router.get(
    "/api/sessions/{session_id}/processes", response_model=ProcessList, responses=_PROCESS_ERRORS
)
async def list_processes(state: State, session_id: str = _SESSION_ID) -> ProcessList:
    """The background processes the chat's runs started (running and ended)."""
    await _known(state, session_id)
    return await _processes(state, session_id)


@router.post(
    "/api/sessions/{session_id}/processes/{process_id}/kill",
    response_model=ProcessList,
    responses=_PROCESS_ERRORS,
)
async def kill_process(
    state: State,
    session_id: str = _SESSION_ID,
    process_id: str = PathParam(pattern=r"^p[0-9]{1,9}$"),
) -> ProcessList:
    """Kill one background process (its whole group); returns the refreshed list."""
    await _known(state, session_id)
    await state.supervisor.workspaces.kill(session_id, process_id)
    return await _processes(state, session_id)
