"""The built-in tools are cheap to import and reachable from ``lovia.tools``."""

from __future__ import annotations

import subprocess
import sys

import lovia.tools

_PROBE = """
import sys
import lovia.tools
loaded = [m for m in sys.modules if m.startswith("lovia.tools.")]
from lovia.tools import ask_human, current_date, http_request, now, read_page, web_search
heavy = sorted(m for m in ("httpx", "httpcore", "pydantic") if m in sys.modules)
print(loaded, heavy)
"""


def test_importing_the_tools_loads_neither_httpx_nor_pydantic() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    assert out == "[] []"  # no tool module on `import lovia.tools`, no heavy import at all


def test_every_export_resolves_to_its_module() -> None:
    for name in lovia.tools.__all__:
        value = getattr(lovia.tools, name)
        module = lovia.tools._EXPORTS[name]
        assert getattr(sys.modules[module], name) is value


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        lovia.tools.no_such_tool  # noqa: B018
    except AttributeError as exc:
        assert "no_such_tool" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
