"""The public surface of lovia.workspace: curated, sorted and documented."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import lovia.workspace
import pytest

MODULES = [
    "lovia.workspace",
    "lovia.workspace.command_guard",
    "lovia.workspace.errors",
    "lovia.workspace.local",
    "lovia.workspace.paths",
    "lovia.workspace.policy",
    "lovia.workspace.protocol",
    "lovia.workspace.results",
    "lovia.workspace.sandbox",
    "lovia.workspace.tools",
    "lovia.workspace.workspace",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_exists(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__ == sorted(module.__all__)
    for attr in module.__all__:
        assert hasattr(module, attr), attr


def test_package_all_lists_every_public_name() -> None:
    public = {
        n for n in vars(lovia.workspace) if not n.startswith("_") and n not in {"annotations"}
    }
    modules = {n for n in public if inspect.ismodule(getattr(lovia.workspace, n))}
    assert sorted(public - modules) == lovia.workspace.__all__


def test_public_classes_and_functions_have_docstrings() -> None:
    for attr in lovia.workspace.__all__:
        value = getattr(lovia.workspace, attr)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), attr


def test_protocols_are_importable_but_not_exported() -> None:
    from lovia.workspace.protocol import ShellExecutor, WorkspaceLike, WorkspaceSession

    for proto in (ShellExecutor, WorkspaceLike, WorkspaceSession):
        assert proto.__name__ not in lovia.workspace.__all__


def test_workspace_satisfies_cores_seam() -> None:
    from lovia.workspace_seam import WorkspaceLike

    def accepts(ws: WorkspaceLike[Any]) -> bool:
        return ws.close_after_run

    assert accepts(lovia.workspace.Workspace.local(".")) is True


async def test_local_classes_satisfy_the_workspace_protocols() -> None:
    from lovia.workspace.protocol import WorkspaceLike, WorkspaceSession

    ws: WorkspaceLike[WorkspaceSession] = lovia.workspace.Workspace.local(".")  # mypy checks
    session: WorkspaceSession = await ws.open()
    assert not session.closed
    await session.close()
