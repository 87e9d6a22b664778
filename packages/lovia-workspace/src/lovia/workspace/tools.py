"""The workspace tool bundle and its ``needs_approval`` predicates (the ask side).

Each tool finds the live session at ``ctx.workspace``. Its predicate asks the session for
the verdict of the call's own target and returns ``True`` for ``ask``; a deny is left to
the session, which raises. A predicate fails closed: bad arguments or a missing session
need approval. Mutators (``write_file``, ``edit_file``, ``shell``, ``kill_process``) are
execution barriers (``parallel=False``).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from lovia.exceptions import InvalidToolArguments, LoviaError, UserError
from lovia.parts import ImagePart, TextPart, image_mime
from lovia.tools.base import Tool
from lovia.transcript import InputEntry

from .errors import FileTooLargeError, WorkspaceError
from .local import LocalWorkspaceSession
from .policy import WorkspacePolicy
from .results import (
    CommandResult,
    DirListing,
    EditResult,
    FileChange,
    FileContent,
    GrepResult,
    ProcessOutput,
    ProcessStart,
)

if TYPE_CHECKING:
    from lovia.run_context import RunContext

__all__ = [
    "MAX_IMAGE_BYTES",
    "background_process_reminder",
    "render_command",
    "render_file_content",
    "render_grep",
    "render_listing",
    "render_process_output",
    "workspace_tools",
]

MAX_IMAGE_BYTES = 5_000_000
"""``view_image`` refuses larger images (with a hint to downscale)."""


def _session(ctx: RunContext[Any]) -> LocalWorkspaceSession:
    session = ctx.workspace
    if not isinstance(session, LocalWorkspaceSession):
        raise WorkspaceError(
            "no workspace session is active for this run",
            hint="give the agent a workspace: Agent(workspace=Workspace.local('.'))",
        )
    return session


def _arg(args: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    if name not in args or args[name] is None:
        if default is ...:
            raise InvalidToolArguments(f"missing required argument {name!r}")
        return default
    value = args[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise InvalidToolArguments(f"argument {name!r} has the wrong type ({type(value).__name__})")
    return value


def _path_predicate(*, write: bool, key: str = "path", default: str | None = None) -> Any:
    def needs_approval(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
        try:
            session = _session(ctx)
            path = _arg(args, key, str, default)
            return session.decide_path(path, write=write) == "ask"
        except (LoviaError, OSError, ValueError, TypeError):  # fail closed
            return True

    return needs_approval


def _shell_needs_approval(args: dict[str, Any], ctx: RunContext[Any]) -> bool:
    try:
        session = _session(ctx)
        command = _arg(args, "command", str)
        cwd = _arg(args, "cwd", str, ".")
        return session.decide_command(command, cwd) == "ask"
    except (LoviaError, OSError, ValueError, TypeError):  # fail closed
        return True


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 1}
_BOOL = {"type": "boolean"}


# -- renderers -----------------------------------------------------------------------------


def render_file_content(result: FileContent) -> str:
    """Header + content; announces paging, truncation and partial reads."""
    if not result.content:
        head = f"{result.path}: no lines at {result.start} (the file has {result.total_lines})"
        return head + (f"\n[note: {result.note}]" if result.note else "")
    head = f"{result.path} (lines {result.start}-{result.end} of {result.total_lines})"
    parts = [head, result.content.rstrip("\n")]
    if result.truncated:
        parts.append(f"[truncated at the read limit; continue with start={result.end + 1}]")
    if result.note:
        parts.append(f"[note: {result.note}]")
    return "\n".join(parts)


def render_listing(result: DirListing) -> str:
    """One entry per line; directories end in ``/``, symlinks show their target."""
    lines = [f"{result.path}: {len(result.entries)} entries"]
    for entry in result.entries:
        line = entry.path + ("/" if entry.is_dir else "")
        if entry.symlink_target is not None:
            line += f" -> {entry.symlink_target}"
        lines.append(line)
    if result.truncated:
        lines.append("[truncated: more entries exist; narrow the path or the pattern]")
    if result.note:
        lines.append(f"[note: {result.note}]")
    return "\n".join(lines)


def render_grep(result: GrepResult) -> str:
    """``path:line: text`` lines, with caps and skips announced."""
    lines = [f"{m.path}:{m.line_number}: {m.line}" for m in result.matches] or ["no matches"]
    if result.truncated:
        lines.append("[truncated at the match limit; narrow the pattern, path or glob]")
    if result.skipped:
        lines.append(f"[{result.skipped} files skipped: binary, oversized or unreadable]")
    if result.note:
        lines.append(f"[note: {result.note}]")
    return "\n".join(lines)


def render_command(result: CommandResult) -> str:
    """Exit status, then stdout and stderr sections."""
    if result.timed_out:
        status = f"timed out after {result.duration:.1f}s; the process group was killed"
    elif result.signal is not None:
        status = f"killed by signal {result.signal}"
    else:
        status = f"exit code {result.exit_code}"
    parts = [status]
    if result.stdout:
        parts.append("stdout:\n" + result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
    if result.truncated:
        parts.append("[output truncated: the middle was omitted]")
    if result.note:
        parts.append(f"[note: {result.note}]")
    return "\n".join(parts)


def render_process_output(result: ProcessOutput) -> str:
    """Status line plus the new output (which announces dropped characters itself)."""
    if result.state == "running":
        status = f"{result.process_id}: running"
    elif result.state == "killed":
        status = f"{result.process_id}: killed"
    else:
        status = f"{result.process_id}: exited with code {result.exit_code}"
    parts = [status, result.output.rstrip("\n") if result.output else "(no new output)"]
    return "\n".join(parts)


# -- invokers ------------------------------------------------------------------------------


async def _read_file(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    result = await _session(ctx).read_text(
        _arg(args, "path", str), _arg(args, "start", int, None), _arg(args, "end", int, None)
    )
    return render_file_content(result)


async def _list_files(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    result = await _session(ctx).list_files(
        _arg(args, "path", str, "."),
        _arg(args, "pattern", str, None),
        _arg(args, "include_hidden", bool, False),
    )
    return render_listing(result)


async def _grep_files(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    result = await _session(ctx).grep(
        _arg(args, "pattern", str), _arg(args, "path", str, "."), _arg(args, "glob", str, None)
    )
    return render_grep(result)


async def _write_file(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    change: FileChange = await _session(ctx).write_text(
        _arg(args, "path", str), _arg(args, "content", str), _arg(args, "create_only", bool, False)
    )
    verb = "created" if change.created else "overwrote"
    return f"{verb} {change.path} ({change.chars_written} characters)"


async def _edit_file(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    result: EditResult = await _session(ctx).edit_text(
        _arg(args, "path", str),
        _arg(args, "old", str),
        _arg(args, "new", str),
        _arg(args, "replace_all", bool, False),
    )
    if result.replacements == 0:
        return f"{result.path}: old and new text are equal; nothing changed"
    return f"edited {result.path} ({result.replacements} replacement(s))"


async def _shell(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    session = _session(ctx)
    command = _arg(args, "command", str)
    cwd = _arg(args, "cwd", str, ".")
    _arg(args, "description", str, None)  # shown by UIs only; never part of the decision
    if _arg(args, "background", bool, False):
        start: ProcessStart = await session.spawn(
            command, cwd, description=_arg(args, "description", str, None)
        )
        return (
            f"started background process {start.process_id} (pid {start.pid}); "
            f"use read_process_output('{start.process_id}') for its output"
        )
    timeout = _arg(args, "timeout", (int, float), None)
    if timeout is not None and timeout <= 0:
        raise InvalidToolArguments("timeout must be positive")
    return render_command(await session.run(command, cwd, float(timeout) if timeout else None))


async def _read_process_output(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    output = await _session(ctx).read_process_output(_arg(args, "process_id", str))
    return render_process_output(output)


async def _kill_process(args: dict[str, Any], ctx: RunContext[Any]) -> str:
    output = await _session(ctx).kill_process(_arg(args, "process_id", str))
    return render_process_output(output)


async def _view_image(args: dict[str, Any], ctx: RunContext[Any]) -> list[TextPart | ImagePart]:
    session = _session(ctx)
    path = _arg(args, "path", str)
    try:
        mime = image_mime(path)
    except UserError:  # a tool error the model sees, not a usage error
        raise WorkspaceError(
            f"{path!r} is not a supported image", hint="use a .png, .jpg, .gif or .webp file"
        ) from None
    data = await session.read_bytes(path, MAX_IMAGE_BYTES)
    if data.truncated:
        raise FileTooLargeError(
            f"{data.path!r} is {data.size} bytes, over the {MAX_IMAGE_BYTES}-byte image limit",
            hint="downscale it first, e.g. with ImageMagick: convert in.png -resize 50% out.png",
        )
    encoded = base64.b64encode(data.data).decode("ascii")
    return [TextPart(f"image {data.path}"), ImagePart(data=encoded, mime_type=mime)]


# -- the bundle ----------------------------------------------------------------------------


def _read_tools() -> list[Tool]:
    return [
        Tool(
            name="read_file",
            description="Read a UTF-8 text file. Lines are 1-based; page large files with "
            "start/end. Binary and non-UTF-8 files are refused.",
            parameters=_obj({"path": _STR, "start": _INT, "end": _INT}, ["path"]),
            invoke=_read_file,
            needs_approval=_path_predicate(write=False),
        ),
        Tool(
            name="view_image",
            description="Look at an image file (png, jpg, gif, webp; at most 5 MB).",
            parameters=_obj({"path": _STR}, ["path"]),
            invoke=_view_image,
            needs_approval=_path_predicate(write=False),
            returns_images=True,
        ),
        Tool(
            name="list_files",
            description="List a directory (directories first). With a glob pattern the "
            "listing is recursive. Hidden entries are left out unless include_hidden.",
            parameters=_obj({"path": _STR, "pattern": _STR, "include_hidden": _BOOL}, []),
            invoke=_list_files,
            needs_approval=_path_predicate(write=False, default="."),
        ),
        Tool(
            name="grep_files",
            description="Search files for a regular expression; optional glob filter "
            "(e.g. '*.py'). Binary and very large files are skipped.",
            parameters=_obj({"pattern": _STR, "path": _STR, "glob": _STR}, ["pattern"]),
            invoke=_grep_files,
            needs_approval=_path_predicate(write=False, default="."),
        ),
    ]


def _write_tools() -> list[Tool]:
    return [
        Tool(
            name="write_file",
            description="Write a whole file (creating directories). create_only refuses "
            "to overwrite an existing file.",
            parameters=_obj(
                {"path": _STR, "content": _STR, "create_only": _BOOL}, ["path", "content"]
            ),
            invoke=_write_file,
            needs_approval=_path_predicate(write=True),
            parallel=False,
        ),
        Tool(
            name="edit_file",
            description="Replace an exact substring of a file. Fails when the old text "
            "occurs zero or several times, unless replace_all.",
            parameters=_obj(
                {"path": _STR, "old": _STR, "new": _STR, "replace_all": _BOOL},
                ["path", "old", "new"],
            ),
            invoke=_edit_file,
            needs_approval=_path_predicate(write=True),
            parallel=False,
        ),
    ]


def _shell_tools() -> list[Tool]:
    return [
        Tool(
            name="shell",
            description="Run a shell command in the workspace (cwd relative to the root). "
            "timeout is in seconds (default 300). background=true starts a background "
            "process and returns its id at once. description is a one-line summary for "
            "the user.",
            parameters=_obj(
                {
                    "command": _STR,
                    "cwd": _STR,
                    "timeout": {"type": "number", "exclusiveMinimum": 0},
                    "background": _BOOL,
                    "description": _STR,
                },
                ["command"],
            ),
            invoke=_shell,
            needs_approval=_shell_needs_approval,
            parallel=False,
        ),
        Tool(
            name="read_process_output",
            description="New output and status of a background process.",
            parameters=_obj({"process_id": _STR}, ["process_id"]),
            invoke=_read_process_output,
        ),
        Tool(
            name="kill_process",
            description="Kill a background process (its whole group) and return its final output.",
            parameters=_obj({"process_id": _STR}, ["process_id"]),
            invoke=_kill_process,
            parallel=False,
        ),
    ]


def workspace_tools(policy: WorkspacePolicy) -> tuple[Tool, ...]:
    """The tool bundle for ``policy``: no write tools when nothing is writable, no shell
    tools when the shell is off."""
    tools = _read_tools()
    if policy.can_write:
        tools += _write_tools()
    if policy.allow_shell:
        tools += _shell_tools()
    return tuple(tools)


def _one_line(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def background_process_reminder(ctx: RunContext[Any]) -> list[InputEntry]:
    """A transient status line for running processes and undelivered exits (or nothing)."""
    session = ctx.workspace
    if not isinstance(session, LocalWorkspaceSession) or session.closed:
        return []
    lines: list[str] = []
    for status in session.background_processes():
        label = f"{status.process_id} `{_one_line(status.command)}`"
        if status.state == "running":
            lines.append(f"- {label}: running")
        elif not status.delivered:
            code = "unknown" if status.exit_code is None else str(status.exit_code)
            ended = "was killed" if status.state == "killed" else f"exited (code {code})"
            lines.append(f"- {label}: {ended}; read_process_output delivers its last output")
    if not lines:
        return []
    text = "<system-reminder>\nBackground processes:\n" + "\n".join(lines) + "\n</system-reminder>"
    return [InputEntry("user", text)]
