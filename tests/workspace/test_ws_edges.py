"""Edge cases that must be errors, never effects: path syntax and length, create_only on
links, CRLF-tolerant edit counts, closed sessions, dropped output, fake interpreters."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from lovia import Agent, Runner
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.workspace import (
    LocalWorkspaceSession,
    Workspace,
    WorkspaceClosedError,
    WorkspaceError,
    WorkspaceLimits,
    WorkspacePolicy,
)
from lovia.workspace.tools import workspace_tools

from tests.support import require

from .ws_support import make_ctx


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    (path / "f.txt").write_text("hello\n")
    (path / "sub").mkdir()
    return path


def trusted(root: Path, **kwargs: object) -> LocalWorkspaceSession:
    return LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted(), **kwargs)  # type: ignore[arg-type]


def tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


# -- 10.11: trailing slashes and names too long -------------------------------------------


@pytest.mark.parametrize("path", ["newdir/", "newdir/.", "sub/new/", "f.txt/"])
async def test_a_trailing_slash_names_a_directory_never_a_file(root: Path, path: str) -> None:
    s = trusted(root)
    before = tree(root)
    with pytest.raises(WorkspaceError, match="names a directory"):
        await s.write_text(path, "x")
    with pytest.raises(WorkspaceError):
        await s.write_text(path, "x", create_only=True)
    assert tree(root) == before
    assert (root / "f.txt").read_text() == "hello\n"


@pytest.mark.parametrize("path", ["f.txt/", "f.txt/."])
async def test_reading_or_editing_a_file_through_a_trailing_slash_is_refused(
    root: Path, path: str
) -> None:
    s = trusted(root)
    with pytest.raises(WorkspaceError, match="names a directory"):
        await s.read_text(path)
    with pytest.raises(WorkspaceError, match="names a directory"):
        await s.read_bytes(path)
    with pytest.raises(WorkspaceError, match="names a directory"):
        await s.edit_text(path, "hello", "bye")
    with pytest.raises(WorkspaceError, match="not a directory"):
        await s.grep("hello", path)
    assert (root / "f.txt").read_text() == "hello\n"
    assert (await s.list_files("sub/")).path == "sub"  # a directory with a slash is fine


async def test_the_write_file_tool_in_a_run_creates_no_regular_file_for_a_slash(
    root: Path,
) -> None:
    model = ScriptedProvider(
        [call("write_file", {"path": "newdir/", "content": "x"}, call_id="w"), text("ok")]
    )
    agent = Agent(name="dev", model=model, workspace=Workspace.local(root))
    result = await Runner.run(agent, "make a dir")
    output = next(e for e in result.entries if isinstance(e, ToolResultEntry)).output
    assert output.startswith("Tool error: 'newdir/' names a directory")
    assert not os.path.lexists(root / "newdir")


LONG_NAME = "n" * 256  # NAME_MAX is 255 bytes
LONG_PATH = "/".join(["d" * 200] * 21)  # over PATH_MAX (4096) with short components


def operations(s: LocalWorkspaceSession, path: str) -> list[Callable[[], Awaitable[object]]]:
    return [
        lambda: s.read_text(path),
        lambda: s.read_bytes(path),
        lambda: s.write_text(path, "x"),
        lambda: s.write_text(path, "x", create_only=True),
        lambda: s.edit_text(path, "a", "b"),
        lambda: s.list_files(path),
        lambda: s.grep("x", path),
        lambda: s.run("touch ran", cwd=path),
        lambda: s.spawn("touch ran", cwd=path),
    ]


@pytest.mark.parametrize(
    "path", [LONG_NAME, f"sub/{LONG_NAME}/x", f"sub/{LONG_NAME}", LONG_PATH, f"sub/{LONG_PATH}"]
)
async def test_names_too_long_are_tool_errors_for_every_operation(root: Path, path: str) -> None:
    s = trusted(root)
    before = tree(root)
    for operation in operations(s, path):
        with pytest.raises(WorkspaceError) as caught:
            await operation()
        assert not isinstance(caught.value.__cause__, OSError)
        assert "longer than" in str(caught.value)
    assert tree(root) == before  # nothing created, no command run
    await s.close()


async def test_a_long_token_in_a_command_is_no_error(root: Path) -> None:
    s = trusted(root)
    token = "a/" + "b" * 300  # a base64 blob with a slash looks like a path
    result = await s.run(f"echo {token} | wc -c")
    assert result.stdout.strip() == str(len(token) + 1)


async def test_the_shell_tool_refuses_a_long_cwd_without_running(root: Path) -> None:
    s = trusted(root)
    shell = next(t for t in workspace_tools(s.policy) if t.name == "shell")
    with pytest.raises(WorkspaceError):
        await shell.invoke({"command": "touch ran", "cwd": LONG_NAME}, make_ctx(s))
    assert not (root / "ran").exists()


# -- 10.12: create_only on a dangling symlink ----------------------------------------------


@pytest.mark.parametrize("mode", ["coding", "trusted"])
async def test_create_only_refuses_a_dangling_symlink(
    root: Path, tmp_path: Path, mode: str
) -> None:
    outside = tmp_path / "outside" / "planted.txt"
    outside.parent.mkdir()
    (root / "inside-link").symlink_to(root / "sub" / "target.txt")
    (root / "outside-link").symlink_to(outside)
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.for_mode(mode))  # type: ignore[arg-type]
    with pytest.raises(WorkspaceError, match="already exists"):
        await s.write_text("inside-link", "x", create_only=True)
    # trusted mode allows outside writes after approval: only create_only stands in the way.
    with pytest.raises(WorkspaceError, match="already exists" if mode == "trusted" else "denied"):
        await s.write_text("outside-link", "x", create_only=True)
    assert not (root / "sub" / "target.txt").exists()
    assert not outside.exists()
    assert os.path.islink(root / "inside-link") and os.path.islink(root / "outside-link")


async def test_create_only_still_creates_where_nothing_exists(root: Path) -> None:
    change = await trusted(root).write_text("sub/fresh.txt", "x", create_only=True)
    assert change.created and (root / "sub" / "fresh.txt").read_text() == "x"


# -- 10.13: CRLF-tolerant edits count like literal ones -------------------------------------


async def test_a_tolerant_second_match_makes_the_edit_ambiguous(root: Path) -> None:
    original = b"x = 1\r\ny = 2\r\nx = 1\ny = 2\n"  # one CRLF copy, one LF copy
    (root / "m.py").write_bytes(original)
    s = trusted(root)
    for old in ("x = 1\ny = 2", "x = 1\r\ny = 2"):
        with pytest.raises(WorkspaceError, match="occurs 2 times"):
            await s.edit_text("m.py", old, "z = 3")
    assert (root / "m.py").read_bytes() == original
    result = await s.edit_text("m.py", "x = 1\ny = 2", "z = 3\nw = 4", replace_all=True)
    assert result.replacements == 2
    # Each match keeps the line breaks it had.
    assert (root / "m.py").read_bytes() == b"z = 3\r\nw = 4\r\nz = 3\nw = 4\n"


async def test_tolerant_edits_follow_the_zero_and_one_rules(root: Path) -> None:
    (root / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    s = trusted(root)
    with pytest.raises(WorkspaceError, match="not found"):
        await s.edit_text("w.txt", "a\nc", "x")
    assert (root / "w.txt").read_bytes() == b"a\r\nb\r\nc\r\n"
    assert (await s.edit_text("w.txt", "b\nc\n", "B\nC\n")).replacements == 1
    assert (root / "w.txt").read_bytes() == b"a\r\nB\r\nC\r\n"


async def test_an_lf_file_takes_a_crlf_old_string(root: Path) -> None:
    (root / "u.txt").write_bytes(b"one\ntwo\n")
    assert (await trusted(root).edit_text("u.txt", "one\r\ntwo", "1\r\n2")).replacements == 1
    assert (root / "u.txt").read_bytes() == b"1\n2\n"


async def test_a_literal_match_keeps_the_new_text_verbatim(root: Path) -> None:
    (root / "v.txt").write_bytes(b"a\nb\n")
    await trusted(root).edit_text("v.txt", "a\nb", "a\r\nb")
    assert (root / "v.txt").read_bytes() == b"a\r\nb\n"


# -- 10.14: a closed session refuses everything ---------------------------------------------


async def test_a_closed_session_raises_from_every_operation(root: Path) -> None:
    s = trusted(root)
    await s.spawn("echo hi")
    await s.close()
    calls: list[Callable[[], object]] = [
        lambda: s.read_text("f.txt"),
        lambda: s.read_text("f.txt", 0),  # a bad range is not checked first
        lambda: s.read_bytes("f.txt"),
        lambda: s.write_text("g.txt", "x"),
        lambda: s.edit_text("f.txt", "hello", "bye"),
        lambda: s.edit_text("f.txt", "", "bye"),
        lambda: s.list_files("."),
        lambda: s.grep("hello"),
        lambda: s.grep("("),  # nor a bad regex
        lambda: s.run("touch ran"),
        lambda: s.spawn("touch ran"),
        lambda: s.read_process_output("p1"),
        lambda: s.kill_process("p1"),
        lambda: s.read_process_output("p9"),
        lambda: s.background_processes(),
        lambda: s.decide_path("f.txt"),
        lambda: s.decide_command("ls"),
    ]
    for make in calls:
        with pytest.raises(WorkspaceClosedError):
            result = make()
            if asyncio.iscoroutine(result):
                await result
    assert not (root / "ran").exists() and not (root / "g.txt").exists()


async def test_the_process_tools_say_closed_after_the_session_closed(root: Path) -> None:
    s = trusted(root)
    await s.spawn("echo hi")
    await s.close()
    tools = {t.name: t for t in workspace_tools(s.policy)}
    for name in ("read_process_output", "kill_process"):
        with pytest.raises(WorkspaceClosedError):
            await tools[name].invoke({"process_id": "p1"}, make_ctx(s))


# -- 10.15: dropped background output is announced in the text ------------------------------


async def test_dropped_output_is_announced_in_the_text_the_model_reads(root: Path) -> None:
    s = trusted(root, limits=WorkspaceLimits(max_shell_output_chars=50))
    tools = {t.name: t for t in workspace_tools(s.policy)}
    await s.spawn("seq 1 200")
    for _ in range(500):  # bounded: the exit has no event visible from here
        if s.background_processes()[0].state != "running":
            break
        await asyncio.sleep(0.01)
    out = await s.read_process_output("p1")
    assert out.output.startswith(f"[... {out.dropped_chars} older characters were dropped")
    assert out.output.endswith("199\n200\n") and out.dropped_chars == 642
    await s.spawn("seq 1 200")
    for _ in range(500):
        if s.background_processes()[1].state != "running":
            break
        await asyncio.sleep(0.01)
    rendered = await tools["kill_process"].invoke({"process_id": "p2"}, make_ctx(s))
    assert rendered.splitlines()[1] == "[... 642 older characters were dropped unread ...]"
    assert rendered.count("dropped") == 1
    await s.close()


# -- 10.16: only a real interpreter activates a venv ----------------------------------------


@pytest.mark.parametrize(
    ("content", "mode"),
    [
        ("", 0o644),  # a plain empty file
        ("print('hi')\n", 0o644),  # not executable
        ("#!/bin/sh\necho pwned\n", 0o755),  # an executable, but not Python
        ('#!/usr/bin/env bash\nexec python3 "$@"\n', 0o755),
    ],
)
async def test_a_fake_venv_python_is_ignored(root: Path, content: str, mode: int) -> None:
    fake = root / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(content)
    fake.chmod(mode)
    result = await trusted(root).run("echo ${VIRTUAL_ENV:-none}")
    assert result.stdout == "none\n"


async def test_a_real_venv_is_activated(root: Path) -> None:
    require(shutil.which("python3") is not None or bool(sys.executable), "no python")
    created = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")],
        capture_output=True,
        check=False,
    )
    require(created.returncode == 0, f"python -m venv failed: {created.stderr!r}")
    result = await trusted(root).run("echo $VIRTUAL_ENV; python -c 'import sys; print(sys.prefix)'")
    assert result.stdout == f"{root}/.venv\n{root}/.venv\n", result.stderr


async def test_a_python_script_interpreter_counts(root: Path) -> None:
    script = root / "venv" / "bin" / "python"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{os.path.realpath(sys.executable)}\nimport sys\n")
    script.chmod(0o755)
    assert (await trusted(root).run("echo $VIRTUAL_ENV")).stdout == f"{root}/venv\n"
