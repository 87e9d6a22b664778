"""Cost of importing lovia, net of a bare interpreter start (median of N fresh processes).

Usage: uv run python benchmarks/bench_import.py [N]
Target (issue 2): `import lovia` under 100 ms net on the 2-core CI machine.
Target (issue 11): a whole process that imports lovia, defines 20 typed tools and builds an
agent at <= 0.8x the reference implementation's 200-223 ms here (so <= about 170 ms in all).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

TWENTY_TOOLS = """
from typing import Literal
from lovia import Agent, Runner, tool

def make(i):
    @tool(name=f"tool_{i}")
    def f(query: str, limit: int = 10, tags: list[str] | None = None,
          mode: Literal["fast", "exact"] = "fast") -> str:
        \"\"\"Search for something.

        Args:
            query: what to look for
            limit: how many results
        \"\"\"
        return query
    return f

agent = Agent(name="a", model="openai:gpt-4o-mini", tools=[make(i) for i in range(20)])
"""


def _median_ms(code: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    bare = _median_ms("pass", runs)
    cases = {
        "import lovia": "import lovia",
        "from lovia import Agent, Runner, tool": "from lovia import Agent, Runner, tool",
        "first @tool, plain types (no pydantic)": (
            "from lovia import tool\n@tool\ndef f(x: int) -> int:\n    return x"
        ),
        "first @tool, a model type (loads pydantic)": (
            "from dataclasses import dataclass\nfrom lovia import tool\n"
            "@dataclass\nclass P:\n    x: int\n"
            "@tool\ndef f(p: P) -> int:\n    return p.x"
        ),
    }
    print(f"bare interpreter: {bare:.1f} ms (median of {runs})")
    for label, code in cases.items():
        ms = _median_ms(code, runs)
        print(f"{label:44s} {ms - bare:7.1f} ms net  ({ms:.1f} ms total)")
    whole = _median_ms(TWENTY_TOOLS, runs)
    print(f"{'whole process: Agent, Runner, 20 tools':44s} {whole:7.1f} ms total")


if __name__ == "__main__":
    main()
