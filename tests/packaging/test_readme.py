"""The README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    expected = re.findall(r"print\(.*\)  # (.*)", code)
    for line in expected:
        assert line in r.stdout


def test_readme_quickstart_example_script_runs() -> None:
    env_free = {"PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True, text=True, timeout=60, check=False, env=env_free,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2 + 3 = 5"


def test_streaming_example_prints_the_reply_as_it_streams(tmp_path: Path) -> None:
    (code,) = [b for b in BLOCKS if "Runner.stream" in b]
    script = tmp_path / "stream.py"
    script.write_text(code, encoding="utf-8")
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Roses are red.\n"
