"""``import lovia.web`` stays cheap: FastAPI loads only with ``create_app``."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_the_portion_and_its_storage_do_not_import_the_web_framework() -> None:
    loaded = _modules_after("import lovia.web\nlovia.web.ChatStore, lovia.web.RunSupervisor")
    assert not {"fastapi", "starlette", "sse_starlette", "uvicorn"} & loaded


def test_create_app_brings_fastapi() -> None:
    assert "fastapi" in _modules_after("from lovia.web import create_app")
