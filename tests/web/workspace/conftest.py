"""Fixtures for the workspace-panel tests: a populated workspace and agents serving it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.testing import ScriptedProvider, ScriptStep
from lovia.workspace import Workspace, WorkspaceMode

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
"""A valid 1x1 PNG."""


def ws_agent(
    root: Path,
    *script: ScriptStep,
    mode: WorkspaceMode = "coding",
    name: str = "helper",
    vision: bool = False,
    **workspace: Any,
) -> Agent[Any]:
    return Agent(
        name=name,
        model=ScriptedProvider(list(script), supports_vision=vision),
        workspace=Workspace.local(root, mode=mode, **workspace),
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with text, an image, junk, dotfiles and a secret."""
    ws = tmp_path / "project"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('hi')\n" * 3)
    (ws / "README.md").write_text("# Project\n")
    (ws / "logo.png").write_bytes(PNG)
    (ws / "icon.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg"><script>x()</script></svg>'
    )
    (ws / "doc.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    (ws / "pic.avif").write_bytes(b"\x00\x00\x00\x1cftypavif")
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (ws / ".env").write_text("SECRET=1\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "__pycache__").mkdir()
    (ws / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"junk")
    (ws / "node_modules").mkdir()
    (ws / "tmp").mkdir()
    (ws / "mod.pyc").write_bytes(b"junk")
    (ws / "private").mkdir()
    (ws / "private" / "keys.txt").write_text("top secret\n")
    return ws
