"""Every ```python block in docs/*.md runs as written, offline, and prints what it promises.

A block is run as its own script in a fresh interpreter (so blocks cannot lean on each
other's state), from a temporary directory (so files it writes land there). A line of the
form ``print(...)  # text`` promises that ``text`` appears in the script's output. Blocks
that need a real endpoint or an optional component are fenced ```python skip-test and are
collected as skipped, so the page still shows them but the suite does not run them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# The info string is the rest of the fence line: "python" or "python skip-test".
_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
_EXPECTED = re.compile(r"print\(.*\)  # (.+)$", re.M)


def _blocks() -> list[tuple[str, str, bool]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for i, match in enumerate(_FENCE.finditer(text)):
            info, code = match.group(1).strip(), match.group(2)
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.stem}-{i}-line{line}", code, info == "skip-test"))
    return found


BLOCKS = _blocks()


def test_the_docs_have_runnable_examples() -> None:
    # Guards the collector itself: a broken fence pattern would otherwise pass vacuously.
    assert sum(1 for _, _, skip in BLOCKS if not skip) >= 20


@pytest.mark.parametrize(
    ("code", "skip"), [(c, s) for _, c, s in BLOCKS], ids=[i for i, _, _ in BLOCKS]
)
def test_docs_python_block_runs(code: str, skip: bool, tmp_path: Path) -> None:
    if skip:
        pytest.skip("fenced as python skip-test (needs a real endpoint or optional component)")
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    # No provider keys and no LOVIA_MODEL from the developer's shell: examples must be offline.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL") and k != "LOVIA_MODEL"
    }
    r = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    for expected in _EXPECTED.findall(code):
        assert expected.strip() in r.stdout, f"{expected!r} not printed; stdout:\n{r.stdout}"
