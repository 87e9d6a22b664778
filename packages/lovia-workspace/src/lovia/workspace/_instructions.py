"""The generated ``## Workspace`` system-prompt section.

Every sentence is derived from the policy the session enforces, so the prompt never
promises more than the session does (no write guidance on a read-only workspace, no shell
guidance without a shell, the guard described as what it is).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from .policy import NOT_SECRET_SUFFIXES, Decision, WorkspacePolicy

__all__: list[str] = []

_WORDS: dict[Decision, str] = {
    "allow": "allowed",
    "ask": "allowed only after the user approves",
    "deny": "denied",
}
_UV_TABLE = re.compile(r"^\s*\[tool\.uv(\]|\.)", re.MULTILINE)
_POETRY_TABLE = re.compile(r"^\s*\[tool\.poetry(\]|\.)", re.MULTILINE)


def package_manager(root: Path) -> str:
    """``uv``, ``poetry`` or ``pip``, from the project's own markers."""
    if (root / "uv.lock").is_file():
        return "uv"
    try:
        pyproject = (root / "pyproject.toml").read_text("utf-8", "replace")
    except OSError:
        pyproject = ""
    if _UV_TABLE.search(pyproject) or re.search(r"build-backend\s*=\s*\"uv_build\"", pyproject):
        return "uv"
    if (root / "poetry.lock").is_file() or _POETRY_TABLE.search(pyproject):
        return "poetry"
    return "pip"


Sandbox = Literal["none", "custom", "network", "offline"]
"""How commands run: host shell, a custom executor, or bubblewrap with or without network."""


def workspace_instructions(
    root: Path, policy: WorkspacePolicy, *, sandbox: Sandbox, shell_timeout: float
) -> str:
    """The ``## Workspace`` section for ``policy`` at ``root``."""
    lines = [
        "## Workspace",
        f"Root: {root}" + (" (a git repository)" if (root / ".git").exists() else ""),
        "Relative paths resolve against the root. Every path is judged by where it "
        "really lands (symlinks are followed).",
        "Reads inside the root are allowed; reads outside the root are "
        f"{_WORDS[policy.read_outside]}.",
        f"Writes inside the root are {_WORDS[policy.write]}; writes outside the root are "
        f"{_WORDS[policy.write_outside]}.",
    ]
    asks = [r.pattern for r in policy.path_rules if r.action == "ask" and "write" in r.ops]
    if asks and policy.can_write:
        lines.append(
            "Writes to these paths need the user's approval (they can run code): "
            + ", ".join(asks)
            + "."
        )
    if policy.denied_paths:
        lines.append("Always denied: " + ", ".join(policy.denied_paths) + ".")
    if policy.secret_paths:
        lines.append(_secret_line(policy))
    if policy.allow_shell:
        lines += _shell_lines(root, policy, sandbox=sandbox, shell_timeout=shell_timeout)
    else:
        lines.append("There is no shell in this workspace.")
    if policy.can_write and policy.write != "deny":
        lines.append(
            "Put temporary work (scratch scripts, notes, downloads) in tmp/ at the root; "
            "follow the repository's existing layout for real changes; tmp/ is never a "
            "deliverable" + (" and must not be committed." if (root / ".git").exists() else ".")
        )
    return "\n".join(lines)


def _secret_line(policy: WorkspacePolicy) -> str:
    commands = ""
    if policy.allow_shell:
        commands = ", and so is any command naming them or searching a directory that holds them"
    templates = ", ".join(f"*{suffix}" for suffix in NOT_SECRET_SUFFIXES)
    line = (
        f"Secret files are denied for reads and writes{commands}: "
        f"{', '.join(policy.secret_paths)}. Templates and public keys ({templates}) are not "
        "secrets. Never try to get around this; ask the user for the values you need."
    )
    if policy.allow_secrets:
        line += " The user allowed these secrets: " + ", ".join(policy.allow_secrets) + "."
    return line


def _shell_lines(
    root: Path, policy: WorkspacePolicy, *, sandbox: Sandbox, shell_timeout: float
) -> list[str]:
    default = {
        "allow": "Shell commands are allowed",
        "ask": "Shell commands need the user's approval",
        "deny": "Shell commands are denied",
    }[policy.shell_default]
    lines = [
        f"{default} unless a rule below says otherwise; a command naming a denied path is denied.",
    ]
    for rule in policy.command_rules:
        lines.append(f"- `{rule.pattern}`: {_WORDS[rule.action]}")
    lines.append(
        "Commands run with a minimal environment (PATH, HOME, locale; no secrets) in a "
        f"fresh process group; the default timeout is {shell_timeout:g}s and kills the "
        "whole group. Start servers, watchers and long runs with background=true, then "
        "check them with read_process_output."
    )
    if sandbox in ("network", "offline"):
        lines.append(
            "Commands run inside an OS sandbox derived from this policy: the filesystem is "
            "read-only except writable paths, denied paths are hidden"
            + (", and there is no network." if sandbox == "offline" else ".")
        )
    elif sandbox == "custom":
        lines.append("Commands run through a custom executor chosen by the user.")
    else:
        lines.append(
            "The path check on commands is lexical, not a sandbox; it cannot see inside "
            "interpreters or substitutions, and commands run as the host user."
        )
    manager = package_manager(root)
    create = {
        "uv": "`uv venv` then `uv pip install` / `uv add`",
        "poetry": "`poetry install` with an in-project .venv",
        "pip": "`python -m venv .venv` then `pip install`",
    }[manager]
    lines.append(
        "A .venv (or venv) at the root is activated for every command. Before installing "
        f"Python packages create .venv ({create}); never install globally."
    )
    return lines
