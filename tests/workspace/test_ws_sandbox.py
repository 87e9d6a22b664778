"""BubblewrapExecutor: a real bubblewrap sandbox derived from the workspace policy.

Under LOVIA_CI=1 these tests fail (not skip) when bwrap is missing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lovia.exceptions import UserError
from lovia.workspace import (
    BubblewrapExecutor,
    LocalWorkspaceSession,
    PathRule,
    Workspace,
    WorkspacePolicy,
)

from tests.support import require

from .ws_support import RUN, until_running, wait_gone


@pytest.fixture
def bwrap() -> BubblewrapExecutor:
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    return BubblewrapExecutor()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
async def server() -> AsyncIterator[int]:
    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello\n")
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(greet, "127.0.0.1", 0)
    port: int = srv.sockets[0].getsockname()[1]
    async with srv:
        yield port


# The sandbox gives commands a private /tmp, and CI may clone the repo (and its venv) under
# /tmp: run the base interpreter the venv links to, which lives outside it.
PYTHON = os.path.realpath(sys.executable)


def py(code: str) -> str:
    return f'{PYTHON} -c "{code}"'


async def test_denied_paths_are_invisible_inside(
    bwrap: BubblewrapExecutor, root: Path, tmp_path: Path
) -> None:
    (root / ".env").write_text("TOPSECRET-file")
    (root / "private").mkdir()
    (root / "private" / "key").write_text("TOPSECRET-dir")
    outside = tmp_path / "outside.txt"
    outside.write_text("TOPSECRET-abs")
    policy = WorkspacePolicy.trusted(denied_paths=(".env*", "private", str(outside)))
    s = LocalWorkspaceSession(root, policy=policy, executor=bwrap)
    # The payload hides every path from the lexical guard; only the sandbox stands in the way.
    code = (
        "import os, glob; "
        "print([open(p, errors='replace').read() for p in ('.e' + 'nv', 'priv' + 'ate/key', "
        f"'{str(outside)[:-1]}' + 't') if os.path.isfile(p) and os.access(p, os.R_OK)]); "
        "print(os.listdir('priv' + 'ate'))"
    )
    assert s.decide_command(py(code)) == "allow"
    result = await s.run(py(code))
    assert "TOPSECRET" not in result.stdout + result.stderr
    assert result.stdout == "[]\n[]\n"
    assert (root / ".env").read_text() == "TOPSECRET-file"


async def test_network_is_cut_unless_allowed(
    bwrap: BubblewrapExecutor, root: Path, server: int
) -> None:
    code = (
        "import socket; "
        f"s = socket.create_connection(('127.0.0.1', {server}), timeout=5); "
        "print(s.recv(16).decode().strip())"
    )
    policy = WorkspacePolicy.trusted()
    cut = await bwrap.run(
        py(code), cwd=str(root), env={"PATH": "/usr/bin:/bin"}, timeout=30, policy=policy, root=root
    )
    assert cut.exit_code != 0 and "hello" not in cut.stdout
    assert "ConnectionRefusedError" in cut.stderr or "unreachable" in cut.stderr
    open_net = BubblewrapExecutor(allow_network=True)
    ok = await open_net.run(
        py(code), cwd=str(root), env={"PATH": "/usr/bin:/bin"}, timeout=30, policy=policy, root=root
    )
    assert (ok.exit_code, ok.stdout) == (0, "hello\n")


async def test_host_root_is_read_only_and_workspace_is_writable(
    bwrap: BubblewrapExecutor, root: Path
) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted(), executor=bwrap)
    result = await s.run(
        "touch /usr/lovia-sandbox-probe; echo rc=$?; "
        "mount -o remount,rw / 2>/dev/null; echo mount=$?; "
        "echo made > made.txt; echo wrote=$?"
    )
    assert result.stdout.splitlines()[0] != "rc=0"
    assert "mount=0" not in result.stdout
    assert "wrote=0" in result.stdout
    assert not Path("/usr/lovia-sandbox-probe").exists()
    assert (root / "made.txt").read_text() == "made\n"


async def test_readonly_and_protected_paths_stay_read_only(
    bwrap: BubblewrapExecutor, root: Path
) -> None:
    (root / ".git" / "hooks").mkdir(parents=True)
    policy = WorkspacePolicy.coding(shell_default="allow")
    s = LocalWorkspaceSession(root, policy=policy, executor=bwrap)
    result = await s.run(py("open('.git/' + 'hooks/pre-commit', 'w')"))
    assert result.exit_code != 0 and "Read-only file system" in result.stderr
    assert not (root / ".git" / "hooks" / "pre-commit").exists()


async def test_parent_environment_secrets_cannot_be_read(
    bwrap: BubblewrapExecutor, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_SANDBOX_SECRET", "hunter2")
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted(), executor=bwrap)
    # $e, known only at run time, hides the /proc paths from the guard (which would deny
    # them on the host's terms).
    result = await s.run(
        "e=$(echo environ); env; cat /proc/1/$e; cat /proc/self/$e; cat /proc/$PPID/$e; "
        "echo; ls /proc | grep -c '^[0-9]'"
    )
    assert "hunter2" not in result.stdout + result.stderr
    assert "PATH=" in result.stdout
    assert int(result.stdout.splitlines()[-1]) < 10  # its own PID namespace


async def test_timeout_kills_setsid_children_through_the_pid_namespace(
    bwrap: BubblewrapExecutor, root: Path
) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted(), executor=bwrap)
    # env -i scrubs the environment too, so only the PID namespace can still reach it.
    task = asyncio.create_task(
        s.run(f"setsid env -i sleep 1030.{RUN} & sleep 1031.{RUN}", timeout=1.5)
    )
    await until_running(f"sleep 1030.{RUN}")  # the detached child is up before the timeout fires
    await until_running(f"sleep 1031.{RUN}")
    result = await task
    assert result.timed_out
    assert wait_gone(f"sleep 1030.{RUN}") == [] and wait_gone(f"sleep 1031.{RUN}") == []


async def test_background_processes_run_in_the_sandbox(
    bwrap: BubblewrapExecutor, root: Path
) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted(), executor=bwrap)
    await s.spawn(
        f"echo pid=$$; touch /usr/probe 2>&1; setsid env -i sleep 1032.{RUN} & sleep 1033.{RUN}"
    )
    await until_running(f"sleep 1033.{RUN}")
    out = await s.kill_process("p1")
    assert out.state == "killed"
    assert "pid=" in out.output and "Read-only file system" in out.output
    assert wait_gone(f"sleep 1032.{RUN}") == [] and wait_gone(f"sleep 1033.{RUN}") == []
    await s.close()


async def test_close_kills_an_in_flight_sandboxed_run(
    bwrap: BubblewrapExecutor, root: Path
) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted(), executor=bwrap)
    task = asyncio.create_task(s.run(f"setsid env -i sleep 1034.{RUN} & sleep 1035.{RUN}"))
    await until_running(f"sleep 1035.{RUN}")
    await s.close()
    await task
    assert wait_gone(f"sleep 1034.{RUN}") == [] and wait_gone(f"sleep 1035.{RUN}") == []


async def test_writable_grants_are_bound_read_write(
    bwrap: BubblewrapExecutor, root: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    policy = WorkspacePolicy.trusted(path_rules=(PathRule(str(shared), "allow"),))
    argv = bwrap.launch_argv("true", cwd=str(root), policy=policy, root=root)
    assert ["--bind", str(shared), str(shared)] == argv[
        argv.index(str(shared)) - 1 : argv.index(str(shared)) + 2
    ]
    s = LocalWorkspaceSession(root, policy=policy, executor=bwrap)
    await s.run(f"echo hi > {shared}/out.txt")
    assert (shared / "out.txt").read_text() == "hi\n"


def test_derived_arguments_drop_privileges(bwrap: BubblewrapExecutor, root: Path) -> None:
    argv = bwrap.launch_argv("true", cwd=str(root), policy=WorkspacePolicy.readonly(), root=root)
    for flag in (
        "--unshare-pid",
        "--unshare-user",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
    ):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert ["--ro-bind", str(root), str(root)] == argv[
        argv.index(str(root)) - 1 : argv.index(str(root)) + 2
    ]


def test_sandboxed_instructions_say_so(bwrap: BubblewrapExecutor, root: Path) -> None:
    text = Workspace.local(root, executor=bwrap).instructions()
    assert "inside an OS sandbox" in text and "no network" in text


def test_missing_bwrap_is_a_user_error_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UserError) as info:
        BubblewrapExecutor()
    assert info.value.hint == "install it: apt-get install bubblewrap (Debian/Ubuntu)"
