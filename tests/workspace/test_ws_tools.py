"""The tool bundle, its predicates, Workspace.local, instructions and session lifetimes."""

from __future__ import annotations

import base64
import inspect
import os
from pathlib import Path
from typing import Any

import pytest
from lovia.exceptions import InvalidToolArguments, UserError
from lovia.parts import ImagePart, TextPart
from lovia.tools.base import Tool
from lovia.workspace import (
    CommandRule,
    FileTooLargeError,
    LocalWorkspaceSession,
    PathRule,
    PermissionDeniedError,
    Workspace,
    WorkspaceClosedError,
    WorkspaceError,
    WorkspaceLimits,
    WorkspacePolicy,
    workspace_tools,
)

from .ws_support import RUN, make_ctx, until_running

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def tools_by_name(policy: WorkspacePolicy) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(policy)}


async def needs(tool: Tool, args: dict[str, Any], session: LocalWorkspaceSession | None) -> bool:
    predicate = tool.needs_approval
    assert callable(predicate)
    verdict = predicate(args, make_ctx(session))
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return bool(verdict)


# -- the bundle ----------------------------------------------------------------------------


def test_bundle_adapts_to_the_policy() -> None:
    read = ["read_file", "view_image", "list_files", "grep_files"]
    assert list(tools_by_name(WorkspacePolicy.readonly())) == read
    assert list(tools_by_name(WorkspacePolicy.coding())) == read + [
        "write_file", "edit_file", "shell", "read_process_output", "kill_process",
    ]  # fmt: skip
    no_shell = tools_by_name(WorkspacePolicy.coding(allow_shell=False))
    assert "shell" not in no_shell and "write_file" in no_shell


def test_mutators_are_barriers_and_reads_run_in_parallel() -> None:
    tools = tools_by_name(WorkspacePolicy.trusted())
    barriers = {name for name, t in tools.items() if not t.parallel}
    assert barriers == {"write_file", "edit_file", "shell", "kill_process"}
    assert tools["view_image"].returns_images


def test_schemas_are_closed_objects() -> None:
    for tool in workspace_tools(WorkspacePolicy.trusted()):
        assert tool.parameters["type"] == "object"
        assert tool.parameters["additionalProperties"] is False
        assert set(tool.parameters["required"]) <= set(tool.parameters["properties"])


# -- every tool ----------------------------------------------------------------------------


async def test_read_file_renders_header_and_announces_truncation(root: Path) -> None:
    (root / "f.txt").write_text("".join(f"l{i}\n" for i in range(1, 11)))
    s = LocalWorkspaceSession(root, limits=WorkspaceLimits(max_file_read_chars=9))
    tool = tools_by_name(s.policy)["read_file"]
    out = await tool.invoke({"path": "f.txt", "start": 2}, make_ctx(s))
    notice = "[truncated at the read limit; continue with start=5]"
    assert out == f"f.txt (lines 2-4 of 10)\nl2\nl3\nl4\n{notice}"


async def test_write_edit_list_grep_tools(root: Path) -> None:
    s = LocalWorkspaceSession(root)
    ctx = make_ctx(s)
    tools = tools_by_name(s.policy)
    assert await tools["write_file"].invoke({"path": "src/a.py", "content": "x = 1\n"}, ctx) == (
        "created src/a.py (6 characters)"
    )
    assert (
        await tools["edit_file"].invoke({"path": "src/a.py", "old": "x = 1", "new": "x = 2"}, ctx)
        == "edited src/a.py (1 replacement(s))"
    )
    (root / "link").symlink_to(root / "src" / "a.py")
    listing = await tools["list_files"].invoke({}, ctx)
    assert listing == f".: 2 entries\nsrc/\nlink -> {root}/src/a.py"
    grep = await tools["grep_files"].invoke({"pattern": "x = ", "glob": "*.py"}, ctx)
    assert grep == "src/a.py:1: x = 2"
    assert await tools["grep_files"].invoke({"pattern": "nothing"}, ctx) == "no matches"


async def test_shell_tool_foreground_timeout_and_background(root: Path) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    ctx = make_ctx(s)
    tools = tools_by_name(s.policy)
    out = await tools["shell"].invoke({"command": "echo hi; exit 2", "description": "x"}, ctx)
    assert out == "exit code 2\nstdout:\nhi"
    slow = await tools["shell"].invoke({"command": f"sleep 1020.{RUN}", "timeout": 0.2}, ctx)
    assert slow.startswith("timed out after") and "process group was killed" in slow
    started = await tools["shell"].invoke(
        {"command": f"echo bg; sleep 1021.{RUN}", "background": True}, ctx
    )
    assert started.startswith("started background process p1")
    await until_running(f"sleep 1021.{RUN}")
    killed = await tools["kill_process"].invoke({"process_id": "p1"}, ctx)
    assert killed == "p1: killed\nbg"
    again = await tools["read_process_output"].invoke({"process_id": "p1"}, ctx)
    assert again == "p1: killed\n(no new output)"
    await s.close()


async def test_view_image_returns_a_text_part_and_an_image_part(root: Path) -> None:
    (root / "dot.png").write_bytes(PNG)
    s = LocalWorkspaceSession(root)
    parts = await tools_by_name(s.policy)["view_image"].invoke({"path": "dot.png"}, make_ctx(s))
    assert parts[0] == TextPart("image dot.png")
    assert isinstance(parts[1], ImagePart) and parts[1].mime_type == "image/png"
    assert base64.b64decode(parts[1].data or "") == PNG


async def test_view_image_refuses_unknown_types_large_files_and_denied_paths(root: Path) -> None:
    (root / "notes.txt").write_text("x")
    (root / "huge.png").write_bytes(b"\x89PNG" + b"\0" * 5_000_001)
    (root / "secret.png").write_bytes(PNG)
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.coding(denied_paths=("secret.*",)))
    tool = tools_by_name(s.policy)["view_image"]
    with pytest.raises(WorkspaceError, match="not a supported image"):
        await tool.invoke({"path": "notes.txt"}, make_ctx(s))
    with pytest.raises(FileTooLargeError) as info:
        await tool.invoke({"path": "huge.png"}, make_ctx(s))
    assert info.value.hint is not None and "downscale" in info.value.hint
    with pytest.raises(PermissionDeniedError):
        await tool.invoke({"path": "secret.png"}, make_ctx(s))


async def test_tools_without_a_workspace_fail_with_a_hint() -> None:
    tool = tools_by_name(WorkspacePolicy.coding())["read_file"]
    with pytest.raises(WorkspaceError) as info:
        await tool.invoke({"path": "x"}, make_ctx(None))
    assert info.value.hint == "give the agent a workspace: Agent(workspace=Workspace.local('.'))"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {}),
        ("read_file", {"path": 3}),
        ("read_file", {"path": "a", "start": True}),
        ("shell", {"command": "ls", "timeout": -1}),
        ("edit_file", {"path": "a", "old": "x"}),
    ],
)
async def test_bad_arguments_raise_invalid_tool_arguments(
    root: Path, name: str, args: dict[str, Any]
) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    with pytest.raises(InvalidToolArguments):
        await tools_by_name(s.policy)[name].invoke(args, make_ctx(s))


# -- predicates (the ask side) -------------------------------------------------------------


async def test_path_predicates_ask_only_for_ask(root: Path, tmp_path: Path) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.coding(denied_paths=("*.key",)))
    tools = tools_by_name(s.policy)
    assert not await needs(tools["read_file"], {"path": "a.txt"}, s)
    assert await needs(tools["read_file"], {"path": str(tmp_path / "x")}, s)
    assert not await needs(tools["read_file"], {"path": "a.key"}, s)  # deny: the session raises
    assert not await needs(tools["write_file"], {"path": "a.txt", "content": ""}, s)
    assert await needs(tools["list_files"], {"path": str(tmp_path)}, s)
    assert not await needs(tools["list_files"], {}, s)


@pytest.mark.parametrize("target", [".git/hooks/pre-commit", ".git/config", ".venv/bin/activate"])
async def test_coding_asks_before_writes_that_can_run_code(root: Path, target: str) -> None:
    s = LocalWorkspaceSession(root)
    tools = tools_by_name(s.policy)
    assert await needs(tools["write_file"], {"path": target, "content": "x"}, s)
    assert await needs(tools["edit_file"], {"path": target, "old": "a", "new": "b"}, s)
    assert not await needs(tools["read_file"], {"path": target}, s)


async def test_shell_predicate_follows_the_command_decision(root: Path) -> None:
    coding = LocalWorkspaceSession(
        root, policy=WorkspacePolicy.coding(command_rules=(CommandRule("pytest", "allow"),))
    )
    shell = tools_by_name(coding.policy)["shell"]
    assert await needs(shell, {"command": "make"}, coding)
    assert not await needs(shell, {"command": "pytest -q"}, coding)
    assert not await needs(
        shell, {"command": "pytest -q", "background": True, "description": "rm -rf /"}, coding
    )
    assert (
        await needs(shell, {"command": "pytest -q > /etc/x"}, coding) is False
    )  # deny: session raises
    trusted = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    assert not await needs(shell, {"command": "make"}, trusted)
    assert await needs(shell, {"command": "make", "background": True}, coding)


async def test_predicates_fail_closed(root: Path) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    tools = tools_by_name(s.policy)
    assert await needs(tools["shell"], {"command": 42}, s)
    assert await needs(tools["read_file"], {}, s)
    assert await needs(tools["write_file"], {"path": "a", "content": "b"}, None)


# -- Workspace.local and instructions ------------------------------------------------------


def test_workspace_local_validates_its_arguments(root: Path) -> None:
    with pytest.raises(UserError, match="unknown workspace mode"):
        Workspace.local(root, mode="yolo")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not an existing directory"):
        Workspace.local(root / "missing")
    with pytest.raises(UserError, match="cannot be combined"):
        Workspace.local(root, policy=WorkspacePolicy.trusted(), denied_paths=(".env",))
    with pytest.raises(UserError, match="readonly"):
        Workspace.local(root, mode="readonly", command_rules=(CommandRule("ls", "allow"),))


def test_grants_expand_to_rules(root: Path, tmp_path: Path) -> None:
    ws = Workspace.local(root, readable=("/opt/docs",), writable=(str(tmp_path / "out"),))
    assert ws.policy.path_rules[:2] == (
        PathRule(str(tmp_path / "out"), "allow", frozenset({"read", "write"})),
        PathRule("/opt/docs", "allow", frozenset({"read"})),
    )
    assert ws.policy.decide_path(None, Path("/opt/docs/a"), "write") == "deny"


def test_instructions_never_promise_more_than_the_policy(root: Path) -> None:
    readonly = Workspace.local(root, mode="readonly").instructions()
    assert readonly.startswith("## Workspace\n")
    assert "There is no shell" in readonly and "in tmp/" not in readonly
    assert "Writes inside the root are denied" in readonly
    coding = Workspace.local(root, denied_paths=(".env*",)).instructions()
    assert ".git/hooks" in coding and "Always denied: .env*." in coding
    assert "in tmp/" in coding and "lexical, not a sandbox" in coding
    assert "Shell commands need the user's approval" in coding


@pytest.mark.parametrize(
    ("files", "manager"),
    [
        ({"uv.lock": ""}, "uv venv"),
        ({"pyproject.toml": "[tool.uv]\ndev-dependencies = []\n"}, "uv venv"),
        ({"pyproject.toml": "[tool.uvicorn]\nx = 1\n"}, "python -m venv"),
        ({"poetry.lock": ""}, "poetry install"),
        ({}, "python -m venv"),
    ],
    ids=["uv-lock", "tool-uv", "lookalike", "poetry", "pip"],
)
def test_venv_guidance_detects_the_package_manager(
    root: Path, files: dict[str, str], manager: str
) -> None:
    for name, text in files.items():
        (root / name).write_text(text)
    assert manager in Workspace.local(root).instructions()


def test_git_root_is_named_and_tmp_is_not_committed(root: Path) -> None:
    (root / ".git").mkdir()
    text = Workspace.local(root).instructions()
    assert "(a git repository)" in text and "must not be committed" in text


# -- session lifetimes ---------------------------------------------------------------------


async def test_open_gives_fresh_sessions_closed_after_run(root: Path) -> None:
    ws = Workspace.local(root)
    first, second = await ws.open(), await ws.open()
    assert first is not second and ws.close_after_run
    await first.close()
    await second.close()


async def test_session_context_manager_binds_one_session(root: Path) -> None:
    ws = Workspace.local(root, mode="trusted")
    async with ws.session() as bound:
        assert bound.close_after_run is False
        session = await bound.open()
        assert await bound.open() is session
        await session.write_text("kept.txt", "x")
        assert bound.tools() == ws.tools() and bound.instructions() == ws.instructions()
    assert session.closed
    with pytest.raises(WorkspaceClosedError):
        await bound.open()


async def test_bind_uses_a_caller_owned_session(root: Path) -> None:
    ws = Workspace.local(root)
    session = await ws.open()
    binding = ws.bind(session)
    assert await binding.open() is session and not binding.close_after_run
    await session.close()


def test_view_injectors_follow_the_shell(root: Path) -> None:
    assert len(Workspace.local(root).view_injectors()) == 1
    assert Workspace.local(root, mode="readonly").view_injectors() == ()


def test_env_knobs_reach_the_session(root: Path) -> None:
    ws = Workspace.local(root, env={"A": "1"}, inherit_env=True, shell_timeout=5.0)
    assert (ws.env, ws.inherit_env, ws.shell_timeout) == ({"A": "1"}, True, 5.0)
    assert os.fspath(ws.root) == os.fspath(root.resolve())
