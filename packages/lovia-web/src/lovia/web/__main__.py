"""``python -m lovia.web``: the same as ``lovia web``."""

from __future__ import annotations

from lovia.web.cli import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m lovia.web"))
