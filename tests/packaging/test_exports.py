"""Public surfaces are curated: every public module declares a sorted ``__all__`` that lists
exactly the classes and functions it defines, and docs/architecture.md names every module."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> list[str]:
    names = []
    for src in sorted(ROOT.glob("packages/*/src")):
        for path in sorted(src.rglob("*.py")):
            rel = path.relative_to(src).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join(parts))
    return names


MODULES = _modules()
PUBLIC = [m for m in MODULES if not any(p.startswith("_") for p in m.split("."))]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_is_sorted_and_lists_what_the_module_defines(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if name == "lovia.runtime" or name.startswith("lovia.runtime."):
        # Internal package: may export nothing, but what it lists must exist.
        exported = exported or []
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names missing attributes"
    if name == "lovia":
        return  # the facade re-exports; checked by test_core_facade_names_resolve
    defined = {
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == name
    }
    assert sorted(defined - set(exported)) == [], f"{name} defines public names left out of __all__"


def test_core_facade_names_resolve() -> None:
    import lovia

    unresolved = [n for n in lovia.__all__ if getattr(lovia, n, None) is None]
    assert unresolved == []


def test_architecture_doc_names_every_module() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [m for m in MODULES if f"`{m}`" not in text]
    assert missing == [], "docs/architecture.md does not mention these modules"


def test_every_optional_facade_name_is_its_portions_class() -> None:
    """`lovia.<Name>` for another distribution's name is that portion's own object."""
    import lovia

    for name, (module, _dist) in lovia._OPTIONAL.items():
        assert getattr(lovia, name) is getattr(importlib.import_module(module), name), name
