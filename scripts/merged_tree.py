"""Build `.lovia-merged/`: one symlinked `lovia/` tree holding every distribution's portion.

import-linter (grimp) and some IDE type checkers do not follow `pkgutil.extend_path`, so they
only see lovia-core's directory. This script gives them a single tree to walk. It refuses two
distributions that ship the same file (packaging.md, pitfall 2).

Usage: python scripts/merged_tree.py [OUT_DIR]   (default: .lovia-merged)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    target = out / "lovia"
    target.mkdir(parents=True)
    owners: dict[Path, Path] = {}
    for src in sorted(ROOT.glob("packages/*/src/lovia")):
        for path in sorted(src.rglob("*")):
            if "__pycache__" in path.parts or path.is_dir():
                continue
            rel = path.relative_to(src)
            if rel in owners:
                raise SystemExit(f"{rel} is shipped by both {owners[rel]} and {src}")
            owners[rel] = src
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(path)
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".lovia-merged"))
