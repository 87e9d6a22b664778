"""The import-linter contract must name every core module, or the layer rule silently
stops covering new ones."""

from __future__ import annotations

import importlib
from pathlib import Path

# tomllib is 3.11+; mypy checks for 3.10, so load it dynamically (tests run on 3.11+ in CI).
tomllib = importlib.import_module("tomllib")

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "packages" / "lovia-core" / "src" / "lovia"


def test_layer_contract_covers_every_core_module() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    core_contract = next(
        c for c in contracts if c["name"] == "Core never imports another distribution"
    )
    listed = set(core_contract["source_modules"])
    actual = {
        f"lovia.{p.stem if p.is_file() else p.name}"
        for p in CORE.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py")
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert sorted(actual - listed) == []
