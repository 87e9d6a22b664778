"""Literal text the shell turns into a secret's name: ``${x:-.env}`` defaults (what an unset
variable leaves) and bash's ``$'...'`` escapes (``/bin/sh`` is bash on some systems)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lovia.workspace import LocalWorkspaceSession, WorkspacePolicy


@pytest.fixture
def session(tmp_path: Path) -> LocalWorkspaceSession:
    (tmp_path / ".env").write_text("SECRET=1")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print()")
    return LocalWorkspaceSession(tmp_path, policy=WorkspacePolicy.trusted())


@pytest.mark.parametrize(
    "command",
    [
        "cat ${x:-.env}",
        "cat ${x-.env}",
        "cat ${x:=.env}",
        "cat ${x+.env}",
        'cat "${F:-.env}"',
        "cat ${x:-'.env'}",
        "cat ./${x:-.e}nv",
        "cat $'\\x2eenv'",
        "cat $'\\056env'",
        "cat $'\\u002eenv'",
        "cat $'.e\\x6ev'",
        "cat $'\\'x\\'' .$'env'",
    ],
)
def test_literal_text_that_the_shell_spells_as_a_secret_is_denied(
    session: LocalWorkspaceSession, command: str
) -> None:
    assert session.decide_command(command) == "deny"


@pytest.mark.parametrize(
    "command", ["cat ${x:-src/app.py}", "cat $'src/app.py'", "echo ${x:?no .env here}"]
)
def test_the_same_forms_naming_ordinary_files_are_allowed(
    session: LocalWorkspaceSession, command: str
) -> None:
    assert session.decide_command(command) == "allow"


@pytest.mark.parametrize(
    "command",
    ["grep -d recurse SECRET .", "grep -id recurse SECRET", "grep --directories recurse x"],
)
def test_grep_told_to_recurse_by_its_directories_option_is_a_tree_read(
    session: LocalWorkspaceSession, command: str
) -> None:
    assert session.decide_command(command) == "deny"
    assert session.decide_command(command.replace("recurse", "skip")) == "allow"
