"""Hostile input against the ACL: rule dodges, glob and payload claims, swaps, sockets."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest
from lovia.exceptions import InvalidToolArguments
from lovia.workspace import (
    BubblewrapExecutor,
    CommandRule,
    LocalWorkspaceSession,
    PermissionDeniedError,
    WorkspaceError,
    WorkspacePolicy,
    _files,
    _listing,
    _shell,
)
from lovia.workspace import sandbox as sandbox_module
from lovia.workspace._files import write_atomic
from lovia.workspace.command_guard import parse_command, unwrapped
from lovia.workspace.tools import workspace_tools

from tests.support import require

from .ws_support import RUN, make_ctx, processes_with, until_running, wait_gone


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    (path / ".env").write_text("SECRET=1")
    (path / "src").mkdir()
    return path


def guarded(root: Path, **overrides: object) -> LocalWorkspaceSession:
    knobs: dict[str, object] = {
        "denied_paths": (".env*",),
        "command_rules": (
            CommandRule("git push", "deny"),
            CommandRule("rm -rf", "deny"),
            CommandRule("pytest", "allow"),
        ),
    }
    policy = WorkspacePolicy.trusted(**(knobs | overrides))
    return LocalWorkspaceSession(root, policy=policy)


# -- static rules cannot be dodged ---------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "cat <(git push origin)",
        "diff <(git push) other",
        "tee >(git push) < /dev/null",
        "env git push",
        "env -u HOME FOO=1 git push",
        "env -S 'git push' origin",
        "env " * 50 + "git push",
        "command git push",
        "exec git push",
        "coproc git push",
        "nice -n 5 git push",
        "nohup git push",
        "sudo -u root git push",
        "timeout 5 git push",
        "timeout -s KILL 5s git push",
        "xargs -I{} rm -rf {} < list",
        "/usr/bin/git push",
        "sh -c 'git push'",
        'bash -lc "cd src && git push"',
        "env bash -c 'rm -rf build'",
        "eval git push",
        'eval "ls; rm -rf /"',
    ],
)
def test_wrappers_substitutions_and_payloads_never_dodge_a_deny(root: Path, command: str) -> None:
    assert guarded(root).decide_command(command) == "deny"


def test_an_unquoted_heredoc_body_runs_its_substitutions(root: Path) -> None:
    s = guarded(root)
    assert s.decide_command("cat <<EOF\n$(git push)\nEOF") == "deny"
    assert s.decide_command("cat <<-EOF\n\t`cat .env`\n\tEOF") == "deny"
    # A quoted delimiter makes the body literal text: nothing in it runs.
    assert s.decide_command("cat <<'EOF'\n$(git push)\nEOF") == "allow"
    assert s.decide_command('cat <<"EOF"\n`git push`\nEOF') == "allow"


def test_a_wrapper_never_earns_an_allow(root: Path) -> None:
    s = guarded(root, shell_default="ask")
    assert s.decide_command("pytest -q") == "allow"
    assert s.decide_command("sudo pytest -q") == "ask"
    assert s.decide_command("/tmp/evil/pytest") == "ask"  # matched through the basename only


def test_unwrapped_strips_wrappers_their_options_and_the_binary_directory() -> None:
    assert unwrapped(("sudo", "-u", "bob", "env", "A=1", "nice", "-n", "3", "rm", "x")) == (
        "rm",
        "x",
    )
    assert unwrapped(("timeout", "--signal", "KILL", "10", "/bin/rm", "-rf", "/")) == (
        "rm",
        "-rf",
        "/",
    )
    assert unwrapped(("git", "push")) == ("git", "push")
    assert unwrapped(("env",)) == ()


def test_process_substitution_is_its_own_segment_not_a_redirect_target() -> None:
    parsed = parse_command("cat <(git push origin) > out")
    assert ("git", "push", "origin") in parsed.segments
    assert [(c.path, c.op) for c in parsed.claims] == [("out", "write")]


def test_shell_payload_claims_are_judged(root: Path) -> None:
    s = guarded(root)
    assert s.decide_command("bash -c 'cat .env'") == "deny"
    assert s.decide_command("sh -c 'echo hi > /etc/lovia-probe'") == "ask"  # an outside write
    assert s.decide_command("sh -c 'cat src'") == "allow"
    assert s.decide_command("sh script.sh -c 'git push'") == "allow"  # a script's own args


def test_flag_and_assignment_values_are_judged(root: Path) -> None:
    s = guarded(root)
    assert s.decide_command("python -m tool --config=.env") == "deny"
    assert s.decide_command("CONFIG=.env make") == "deny"
    assert s.decide_command("python -m tool --config=settings.toml") == "allow"


@pytest.mark.parametrize("command", ["cat .e*", "cat ./.e*", "cat src/../.en?", "cp .[e]nv x"])
def test_globs_are_judged_by_what_they_expand_to(root: Path, command: str) -> None:
    assert guarded(root).decide_command(command) == "deny"


def test_a_glob_matching_nothing_adds_nothing(root: Path) -> None:
    assert guarded(root).decide_command("ls *.nothing src/*.py") == "allow"


async def test_a_command_that_would_create_a_denied_path_is_denied(root: Path) -> None:
    (root / ".env").unlink()
    s = guarded(root)
    for command in ("echo x | tee .env", "touch .env.local", "cp src/a .env", "mv a .env"):
        assert s.decide_command(command) == "deny", command
    with pytest.raises(PermissionDeniedError):
        await s.run("echo SECRET=2 | tee .env")
    assert not (root / ".env").exists()
    assert s.decide_command("pip install python-dotenv") == "allow"


def test_words_after_a_cd_are_anchored_where_it_moves(root: Path, tmp_path: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / ".env").write_text("x")
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "shadow").write_text("x")
    s = guarded(root, denied_paths=(".env*", str(outside / "shadow")))
    assert s.decide_command(f"cd {outside} && cat shadow") == "deny"
    assert s.decide_command(f"cd {outside}; cat ./sha*") == "deny"
    assert s.decide_command("cd sub && cat .env") == "deny"
    assert s.decide_command(f"cd {outside} && ls") == "allow"
    assert parse_command("cd -P /x; pushd y; cd $DIR").cd_targets == ("/x", "y")


async def test_nesting_too_deep_is_a_clear_error_and_the_predicate_fails_closed(
    root: Path,
) -> None:
    s = guarded(root)
    command = "echo " + "$(" * 100 + "true" + ")" * 100
    with pytest.raises(WorkspaceError, match="nests"):
        s.decide_command(command)
    with pytest.raises(WorkspaceError, match="nests"):
        await s.run(command)
    shell = next(t for t in workspace_tools(s.policy) if t.name == "shell")
    assert callable(shell.needs_approval)
    assert shell.needs_approval({"command": command}, make_ctx(s)) is True


async def test_a_nul_byte_in_a_command_is_a_tool_error(root: Path) -> None:
    with pytest.raises(WorkspaceError, match="NUL"):
        await guarded(root).run("echo a\0b")


async def test_a_denied_glob_in_a_real_command_never_runs(root: Path) -> None:
    s = guarded(root)
    with pytest.raises(PermissionDeniedError):
        await s.run("cat .e* > leaked.txt")
    assert not (root / "leaked.txt").exists()


# -- check-then-use swaps ------------------------------------------------------------------


def test_a_swapped_parent_creates_nothing_where_it_points(root: Path, tmp_path: Path) -> None:
    # Judged: root/d/new/deeper/f (d a real directory). Then d becomes a symlink outside.
    (root / "d").mkdir()
    judged = root / "d" / "new" / "deeper" / "f"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "d").rmdir()
    (root / "d").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(PermissionDeniedError, match="symlink"):
        write_atomic(judged, b"pwned", create_only=False)
    assert list(elsewhere.iterdir()) == []


def test_a_file_replaced_by_a_concurrent_save_is_not_mistaken_for_a_swap(root: Path) -> None:
    # The window between open() and the descriptor check, frozen: the file is atomically
    # replaced (as write_file does) after it was opened at the judged path.
    judged = root / "f.txt"
    judged.write_text("old")
    fd = os.open(judged, os.O_RDONLY)
    try:
        (root / "new.txt").write_text("new")
        os.replace(root / "new.txt", judged)
        _files._verify(fd, judged)  # "f.txt (deleted)": still the judged file
        with pytest.raises(PermissionDeniedError):
            _files._verify(fd, root / "other.txt")
    finally:
        os.close(fd)


async def test_symlink_loops_are_tool_errors_and_walks_survive_them(root: Path) -> None:
    (root / "loop").symlink_to("loop")
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "src" / "ok.txt").write_text("needle\n")
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.coding())
    with pytest.raises(PermissionDeniedError, match="loop"):
        await s.read_text("loop")
    with pytest.raises(PermissionDeniedError, match="loop"):
        await s.write_text("a", "x")
    with pytest.raises(PermissionDeniedError, match="loop"):
        await s.write_text("loop/x", "x")
    listing = await s.list_files(".", pattern="*")
    assert {"a", "b", "loop", "src/ok.txt"} <= {e.path for e in listing}
    assert [m.path for m in await s.grep("needle")] == ["src/ok.txt"]


async def test_grep_follows_allowed_symlinks_but_not_denied_ones(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("needle outside\n")
    (root / "src" / "in.txt").write_text("needle inside\n")
    (root / "src" / "to_env").symlink_to(root / ".env")
    (root / "src" / "to_outside").symlink_to(outside)
    (root / ".env").write_text("needle secret\n")
    coding = LocalWorkspaceSession(root, policy=WorkspacePolicy.coding(denied_paths=(".env",)))
    found = await coding.grep("needle", "src")
    # Outside reads ask in coding mode: a bulk walk never asks, so it skips them.
    assert [m.line for m in found.matches] == ["needle inside"]
    trusted = guarded(root)
    found = await trusted.grep("needle", "src")
    assert sorted(m.line for m in found.matches) == ["needle inside", "needle outside"]


# -- processes that read stdin, detach or hold the output open -----------------------------


async def test_commands_get_no_stdin(root: Path) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    result = await s.run("cat; echo done", timeout=60)  # would block on an inherited stdin
    assert (result.exit_code, result.stdout, result.timed_out) == (0, "done\n", False)
    await s.spawn("cat")
    proc = s._processes["p1"].proc
    assert proc is not None and await proc.wait() == 0
    await s.close()


async def test_a_detached_child_holding_the_output_open_cannot_hang_the_result(
    root: Path,
) -> None:
    # setsid + env -i leaves both the group and the tag: the local shell cannot reap it
    # (only the sandbox's PID namespace can), but the result still comes back, announced.
    os.mkfifo(root / "up")
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    # The fifo makes the parent wait until the child has shed its environment.
    command = (
        f"setsid env -i /bin/sh -c 'echo > up; exec sleep 1044.{RUN}' & read x < up; echo started"
    )
    try:
        result = await s.run(command, timeout=60)
        assert (result.exit_code, result.stdout, result.timed_out) == (0, "started\n", False)
        assert result.note is not None and "kept the output open" in result.note
    finally:
        for pid in processes_with(f"sleep 1044.{RUN}", exact=True):
            os.kill(pid, 9)
    assert wait_gone(f"sleep 1044.{RUN}") == []


async def test_a_reaped_leaders_reused_pid_is_never_killed_as_its_group() -> None:
    # Stand-in for a background process that exited long ago, whose pid number now leads
    # someone else's group (lovia starts every command as a group leader).
    stranger = await asyncio.create_subprocess_exec("sleep", f"1043.{RUN}", start_new_session=True)
    try:

        class Exited:
            pid = stranger.pid
            returncode = 0

        await until_running(f"sleep 1043.{RUN}")  # past its execve (vfork returns earlier)
        _shell.kill_group_of(Exited())  # type: ignore[arg-type]
        assert stranger.returncode is None and processes_with(f"sleep 1043.{RUN}", exact=True)
        _shell.kill_group_of(stranger)  # still running: its group is killed
        assert await stranger.wait() == -9
    finally:
        if stranger.returncode is None:
            stranger.kill()
            await stranger.wait()


# -- code-execution paths, pseudo-files, huge trees, bad arguments -------------------------


def test_writes_into_a_symlinked_venvs_real_bin_dir_still_ask(root: Path) -> None:
    (root / "envs" / "py" / "bin").mkdir(parents=True)
    (root / "envs" / "py" / "bin" / "python").write_text("")
    (root / ".venv").symlink_to("envs/py", target_is_directory=True)
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.coding())
    # Commands run envs/py/bin/* from PATH as .venv/bin/*: the same code-execution path.
    assert s.decide_path("envs/py/bin/pytest", write=True) == "ask"
    assert s.decide_path(".venv/bin/pytest", write=True) == "ask"
    assert s.decide_path("envs/py/lib/site.py", write=True) == "allow"
    assert s.decide_path("envs/py/bin/pytest") == "allow"


async def test_an_unreadable_pseudo_file_is_a_tool_error(root: Path) -> None:
    if not os.access("/proc/kmsg", os.R_OK):
        pytest.skip("/proc/kmsg is not readable here (needs root)")
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    with pytest.raises(WorkspaceError, match="cannot read"):
        await s.read_text("/proc/kmsg")  # EAGAIN from a non-blocking read, never a hang


async def test_a_walk_over_a_huge_tree_stops_and_says_so(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(6):
        (root / "src" / f"f{i}.txt").write_text("needle\n")
    monkeypatch.setattr(_listing, "MAX_WALK_ENTRIES", 4)
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    listing = await s.list_files(".", pattern="*.txt")
    assert listing.truncated and listing.note is not None and "stopped" in listing.note
    found = await s.grep("needle")
    assert found.note is not None and len(found.matches) < 6
    monkeypatch.setattr(_listing, "MAX_WALK_ENTRIES", 1000)
    assert (await s.list_files(".", pattern="*.txt")).note is None
    assert len((await s.grep("needle")).matches) == 6


async def test_a_boolean_timeout_is_rejected(root: Path) -> None:
    s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted())
    shell = next(t for t in workspace_tools(s.policy) if t.name == "shell")
    with pytest.raises(InvalidToolArguments, match="timeout"):
        await shell.invoke({"command": "true", "timeout": True}, make_ctx(s))


# -- the sandbox ---------------------------------------------------------------------------


@pytest.fixture
def bwrap() -> BubblewrapExecutor:
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    return BubblewrapExecutor()


def test_host_socket_directories_are_private_without_network(
    bwrap: BubblewrapExecutor, root: Path
) -> None:
    policy = WorkspacePolicy.trusted()
    argv = bwrap.launch_argv("true", cwd=str(root), policy=policy, root=root)
    hidden = {argv[i + 1] for i, arg in enumerate(argv) if arg == "--tmpfs"}
    expected = {d for d in ("/run", "/var/run") if os.path.isdir(d) and not os.path.islink(d)}
    assert expected <= hidden
    networked = BubblewrapExecutor(allow_network=True)
    argv = networked.launch_argv("true", cwd=str(root), policy=policy, root=root)
    assert "/run" not in {argv[i + 1] for i, arg in enumerate(argv) if arg == "--tmpfs"}


async def test_a_host_unix_socket_is_unreachable_without_network(
    bwrap: BubblewrapExecutor, root: Path
) -> None:
    if not os.access("/run", os.W_OK):
        pytest.skip("needs a writable /run to host a test socket there")
    where = Path(tempfile.mkdtemp(prefix="lovia-test-", dir="/run"))
    path = where / "s.sock"
    accepted = asyncio.Event()

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    server = await asyncio.start_unix_server(greet, path=str(path))
    try:
        probe = (
            "import socket; s = socket.socket(socket.AF_UNIX); "
            f"s.connect('{path}'); print('CONNECTED')"
        )
        s = LocalWorkspaceSession(root, policy=WorkspacePolicy.trusted(), executor=bwrap)
        result = await s.run(f'python3 -c "{probe}"')
        assert "CONNECTED" not in result.stdout and result.exit_code != 0
        assert not accepted.is_set()
        # The same probe from the host does connect: the test would catch a regression.
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))
        await asyncio.wait_for(accepted.wait(), 10)
    finally:
        server.close()
        await server.wait_closed()
        shutil.rmtree(where, ignore_errors=True)


def test_a_tree_too_big_to_scan_refuses_rather_than_leave_a_denied_path_visible(
    bwrap: BubblewrapExecutor, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b", "c", "d"):
        (root / name).mkdir()
    monkeypatch.setattr(sandbox_module, "_MAX_SCAN_DIRS", 3)
    policy = WorkspacePolicy.trusted(denied_paths=(".env*",))
    with pytest.raises(WorkspaceError, match="bare denied pattern"):
        bwrap.launch_argv("true", cwd=str(root), policy=policy, root=root)
    with pytest.raises(WorkspaceError, match="secret pattern"):  # the default secrets, too
        bwrap.launch_argv("true", cwd=str(root), policy=WorkspacePolicy.trusted(), root=root)
    # Workspace-relative and absolute patterns never need the scan.
    ok = WorkspacePolicy.trusted(denied_paths=("./.env", str(root / "a")), secret_paths=())
    argv = bwrap.launch_argv("true", cwd=str(root), policy=ok, root=root)
    assert ["--ro-bind", "/dev/null", str(root / ".env")] == argv[
        argv.index(str(root / ".env")) - 2 : argv.index(str(root / ".env")) + 1
    ]
