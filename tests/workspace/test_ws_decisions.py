"""Decisions with the rule that decided (``explain_path``/``explain_command``) and the
session's decision observers (what the web inspector shows per turn)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lovia.workspace import (
    CommandRule,
    LocalWorkspaceSession,
    PathRule,
    PermissionDecision,
    PermissionDeniedError,
    Ruling,
    WorkspacePolicy,
)
from lovia.workspace.policy import strictest

ROOT = Path("/srv/project")


@pytest.mark.parametrize(
    ("rel", "path", "op", "expected"),
    [
        ("build/out.txt", ROOT / "build/out.txt", "read", Ruling("deny", "denied_paths", "build")),
        (".env", ROOT / ".env", "read", Ruling("deny", "secret_paths", None)),
        ("vendor/x.py", ROOT / "vendor/x.py", "write", Ruling("ask", "path_rules", "vendor")),
        ("src/app.py", ROOT / "src/app.py", "read", Ruling("allow", "read_inside", None)),
        ("src/app.py", ROOT / "src/app.py", "write", Ruling("allow", "write", None)),
        (None, Path("/etc/hosts"), "read", Ruling("ask", "read_outside", None)),
        (None, Path("/etc/hosts"), "write", Ruling("deny", "write_outside", None)),
    ],
)
def test_explain_path_names_the_rule(
    rel: str | None, path: Path, op: str, expected: Ruling
) -> None:
    policy = WorkspacePolicy.coding(
        denied_paths=("build",), path_rules=(PathRule("vendor", "ask", frozenset({"write"})),)
    )
    ruling = policy.explain_path(rel, path, op)  # type: ignore[arg-type]
    assert ruling == expected
    assert policy.decide_path(rel, path, op) == expected.decision  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "command", "expected"),
    [
        (WorkspacePolicy.readonly(), "ls", Ruling("deny", "allow_shell", None)),
        (WorkspacePolicy.coding(), "ls -la", Ruling("ask", "shell_default", None)),
        (
            WorkspacePolicy.coding(command_rules=(CommandRule("git status", "allow"),)),
            "git status",
            Ruling("allow", "command_rules", "git status"),
        ),
        (
            # The strictest segment decides: the deny rule of the second one.
            WorkspacePolicy.trusted(command_rules=(CommandRule("rm", "deny"),)),
            "ls && rm -rf x",
            Ruling("deny", "command_rules", "rm"),
        ),
        (
            # An allow dodged by an assignment earns only the default, and says so.
            WorkspacePolicy.coding(command_rules=(CommandRule("python", "allow"),)),
            "LD_PRELOAD=x python run.py",
            Ruling("ask", "shell_default", None),
        ),
        (
            WorkspacePolicy.coding(command_decider=lambda c: "allow" if c == "make" else None),
            "make",
            Ruling("allow", "command_decider", None),
        ),
    ],
)
def test_explain_command_names_the_rule(
    policy: WorkspacePolicy, command: str, expected: Ruling
) -> None:
    assert policy.explain_command(command) == expected
    assert policy.decide_command(command) == expected.decision


def test_strictest_keeps_the_first_of_the_most_restrictive() -> None:
    assert strictest([("allow", "a", None), ("ask", "b", None), ("ask", "c", None)]) == (
        "ask",
        "b",
        None,
    )
    assert strictest([])[0] == "allow"


async def test_observers_see_checks_and_gates_with_their_rules(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "key.txt").write_text("k")
    policy = WorkspacePolicy.coding(path_rules=(PathRule("private", "deny"),))
    session = LocalWorkspaceSession(tmp_path, policy=policy)
    seen: list[PermissionDecision] = []
    remove = session.add_observer(seen.append)
    try:
        assert session.decide_path("notes.txt") == "allow"
        await session.read_text("notes.txt")
        with pytest.raises(PermissionDeniedError):
            await session.read_text("private/key.txt")
        assert session.decide_command("ls") == "ask"
        result = await session.run("true")  # an ask approved upstream: the gate passes it
        assert result.exit_code == 0
        remove()
        session.decide_path("notes.txt")  # no longer observed
    finally:
        await session.close()
    assert [(d.kind, d.subject, d.op, d.decision, d.rule, d.pattern, d.enforced) for d in seen] == [
        ("path", "notes.txt", "read", "allow", "read_inside", None, False),
        ("path", "notes.txt", "read", "allow", "read_inside", None, True),
        ("path", "private/key.txt", "read", "deny", "path_rules", "private", True),
        ("command", "ls", "run", "ask", "shell_default", None, False),
        ("command", "true", "run", "ask", "shell_default", None, True),
    ]


async def test_a_command_claim_decides_with_its_path_rule(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SECRET=1")
    session = LocalWorkspaceSession(tmp_path, policy=WorkspacePolicy.trusted())
    seen: list[PermissionDecision] = []
    session.add_observer(seen.append)
    try:
        assert session.decide_command("cat .env") == "deny"
    finally:
        await session.close()
    assert [(d.decision, d.rule) for d in seen] == [("deny", "secret_paths")]


async def test_an_observer_that_raises_changes_no_operation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An observer is a bystander: its failure must not fail (or un-deny) the operation it
    watches, nor keep the observers after it from hearing of the decision."""
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "key.txt").write_text("k")
    policy = WorkspacePolicy.coding(path_rules=(PathRule("private", "deny"),))
    session = LocalWorkspaceSession(tmp_path, policy=policy)

    def broken(decision: PermissionDecision) -> None:
        raise RuntimeError("observer bug")

    seen: list[PermissionDecision] = []
    session.add_observer(broken)
    session.add_observer(seen.append)
    try:
        assert session.decide_path("notes.txt") == "allow"
        assert (await session.read_text("notes.txt")).content == "hello"
        with pytest.raises(PermissionDeniedError):  # still the deny, not the observer's error
            await session.read_text("private/key.txt")
        assert session.decide_command("ls") == "ask"
        assert (await session.run("true")).exit_code == 0
    finally:
        await session.close()
    assert [(d.subject, d.enforced) for d in seen] == [
        ("notes.txt", False),
        ("notes.txt", True),
        ("private/key.txt", True),
        ("ls", False),
        ("true", True),
    ]
    assert "observer bug" in caplog.text  # logged, not swallowed silently
