"""WorkspacePolicy: the mode tables, the three pattern forms, precedence, command rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from lovia.exceptions import UserError
from lovia.workspace import CommandRule, PathRule, WorkspacePolicy
from lovia.workspace.policy import most_restrictive

ROOT = Path("/srv/project")
INSIDE = (".", ROOT / "src/app.py")
OUTSIDE = (None, Path("/etc/hosts"))


def decide(policy: WorkspacePolicy, where: tuple[str | None, Path], op: str) -> str:
    rel, path = where
    if rel == ".":
        rel = path.relative_to(ROOT).as_posix()
    return policy.decide_path(rel, path, op)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("readonly", ("allow", "deny", "deny", "deny")),
        ("coding", ("allow", "allow", "ask", "deny")),
        ("trusted", ("allow", "allow", "allow", "ask")),
    ],
    ids=["readonly", "coding", "trusted"],
)
def test_mode_tables(preset: str, expected: tuple[str, ...]) -> None:
    policy = WorkspacePolicy.for_mode(preset)  # type: ignore[arg-type]
    got = (
        decide(policy, INSIDE, "read"),
        decide(policy, INSIDE, "write"),
        decide(policy, OUTSIDE, "read"),
        decide(policy, OUTSIDE, "write"),
    )
    assert got == expected


@pytest.mark.parametrize(
    ("preset", "shell", "verdict"),
    [("readonly", False, "deny"), ("coding", True, "ask"), ("trusted", True, "allow")],
)
def test_mode_shell(preset: str, shell: bool, verdict: str) -> None:
    policy = WorkspacePolicy.for_mode(preset)  # type: ignore[arg-type]
    assert (policy.allow_shell, policy.decide_command("ls")) == (shell, verdict)


def test_unknown_mode_is_rejected_with_hint() -> None:
    with pytest.raises(UserError) as info:
        WorkspacePolicy.for_mode("yolo")  # type: ignore[arg-type]
    assert info.value.hint == "use 'readonly', 'coding' or 'trusted'"


def test_bare_pattern_matches_basename_and_ancestor_inside_and_outside() -> None:
    rule = PathRule(".env*", "deny")
    assert rule.matches(".env", ROOT / ".env")
    assert rule.matches("config/.env.local/x", ROOT / "config/.env.local/x")
    assert rule.matches(None, Path("/home/u/.env"))
    assert not rule.matches("src/env.py", ROOT / "src/env.py")


def test_bare_pattern_ignores_the_roots_own_ancestors() -> None:
    root = Path("/home/u/.env-stuff/project")
    assert not PathRule(".env*", "deny").matches("a.py", root / "a.py")


def test_relative_pattern_matches_a_workspace_subtree_only() -> None:
    rule = PathRule("build/out", "deny")
    assert rule.matches("build/out/a.o", ROOT / "build/out/a.o")
    assert not rule.matches("src/build/out", ROOT / "src/build/out")
    assert not rule.matches(None, Path("/build/out"))
    assert PathRule("./src/*.py", "deny").matches("src/a.py", ROOT / "src/a.py")


def test_absolute_pattern_matches_subtree_through_a_symlinked_prefix(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "secret").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    rule = PathRule(str(tmp_path / "link" / "secret"), "deny")
    assert rule.matches(None, real / "secret" / "key.pem")
    assert not rule.matches(None, real / "public")


def test_home_pattern_expands(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert PathRule("~/.ssh", "deny").matches(None, tmp_path / ".ssh" / "id_rsa")


def test_empty_pattern_never_matches() -> None:
    assert not PathRule("", "deny").matches("a", ROOT / "a")
    assert not PathRule("  ", "deny").matches(None, Path("/a"))


def test_rule_ops_restrict_the_rule() -> None:
    policy = WorkspacePolicy.coding(path_rules=(PathRule("docs", "deny", frozenset({"write"})),))
    assert policy.decide_path("docs/a.md", ROOT / "docs/a.md", "read") == "allow"
    assert policy.decide_path("docs/a.md", ROOT / "docs/a.md", "write") == "deny"


def test_bad_rule_values_are_rejected() -> None:
    with pytest.raises(UserError):
        PathRule("x", "maybe")  # type: ignore[arg-type]
    with pytest.raises(UserError):
        PathRule("x", "deny", frozenset({"exec"}))  # type: ignore[arg-type]
    with pytest.raises(UserError):
        CommandRule("x", "sure")  # type: ignore[arg-type]


def test_precedence_denied_paths_beat_rules_and_first_rule_wins() -> None:
    policy = WorkspacePolicy.trusted(
        denied_paths=("/etc/shadow",),
        path_rules=(PathRule("/etc", "deny"), PathRule("/etc/hosts", "allow")),
    )
    assert policy.decide_path(None, Path("/etc/hosts"), "read") == "deny"  # first rule
    grant_first = WorkspacePolicy.trusted(
        denied_paths=("/etc/shadow",), path_rules=(PathRule("/etc", "allow"),)
    )
    assert grant_first.decide_path(None, Path("/etc/shadow"), "read") == "deny"
    assert grant_first.decide_path(None, Path("/etc/passwd"), "write") == "allow"


def test_coding_protects_code_execution_paths_but_user_rules_come_first() -> None:
    policy = WorkspacePolicy.coding()
    for rel in (".git/hooks/pre-commit", ".git/config", ".venv/bin/python", "venv/bin/pip"):
        assert policy.decide_path(rel, ROOT / rel, "write") == "ask", rel
        assert policy.decide_path(rel, ROOT / rel, "read") == "allow", rel
    assert policy.decide_path(".git/HEAD", ROOT / ".git/HEAD", "write") == "allow"
    mine = WorkspacePolicy.coding(path_rules=(PathRule(".git/hooks", "allow"),))
    assert mine.decide_path(".git/hooks/x", ROOT / ".git/hooks/x", "write") == "allow"


def test_command_rules_match_on_word_boundaries() -> None:
    policy = WorkspacePolicy.coding(command_rules=(CommandRule("git push", "deny"),))
    assert policy.decide_command("git push origin main") == "deny"
    assert policy.decide_command("git   push") == "deny"
    assert policy.decide_command("git pushx") == "ask"
    assert policy.decide_command("git status") == "ask"


def test_first_matching_command_rule_wins() -> None:
    policy = WorkspacePolicy.coding(
        command_rules=(CommandRule("git push --dry-run", "allow"), CommandRule("git push", "deny"))
    )
    assert policy.decide_command("git push --dry-run") == "allow"
    assert policy.decide_command("git push") == "deny"


@pytest.mark.parametrize(
    "command",
    [
        "pytest && rm -rf /",
        "pytest || rm -rf /",
        "pytest; rm -rf /",
        "pytest | rm -rf /",
        "pytest & rm -rf /",
        "pytest\nrm -rf /",
        "if true; then rm -rf /; fi",
        "echo $(rm -rf /)",
        "(cd x && rm -rf /)",
    ],
)
def test_compound_commands_take_the_most_restrictive_segment(command: str) -> None:
    policy = WorkspacePolicy.trusted(
        command_rules=(CommandRule("pytest", "allow"), CommandRule("rm -rf", "deny"))
    )
    assert policy.decide_command(command) == "deny"


def test_fd_redirections_do_not_split() -> None:
    policy = WorkspacePolicy.coding(command_rules=(CommandRule("pytest", "allow"),))
    assert policy.decide_command("pytest -q 2>&1") == "allow"
    assert policy.decide_command("pytest -q &> log.txt") == "allow"


def test_env_assignment_never_earns_an_allow_but_cannot_dodge_a_deny() -> None:
    policy = WorkspacePolicy.coding(
        command_rules=(CommandRule("pytest", "allow"), CommandRule("rm", "deny"))
    )
    assert policy.decide_command("LD_PRELOAD=/tmp/evil.so pytest") == "ask"
    assert policy.decide_command("X=1 rm -rf build") == "deny"


def test_empty_command_uses_the_default() -> None:
    assert WorkspacePolicy.coding().decide_command("") == "ask"
    assert WorkspacePolicy.trusted().decide_command("   ") == "allow"


def test_command_decider_overrides_and_invalid_returns_fall_through() -> None:
    policy = WorkspacePolicy.coding(
        command_rules=(CommandRule("make", "deny"),),
        command_decider=lambda c: "allow" if c.startswith("make") else "bogus",
    )
    assert policy.decide_command("make test") == "allow"
    assert policy.decide_command("ls") == "ask"


def test_most_restrictive() -> None:
    assert most_restrictive() == "allow"
    assert most_restrictive("allow", "ask") == "ask"
    assert most_restrictive("ask", "deny", "allow") == "deny"


def test_can_write_follows_the_policy() -> None:
    assert not WorkspacePolicy.readonly().can_write
    assert WorkspacePolicy.readonly(path_rules=(PathRule("/tmp/x", "allow"),)).can_write
    assert WorkspacePolicy.coding().can_write
