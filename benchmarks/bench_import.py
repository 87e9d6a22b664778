"""Cost of importing lovia, net of a bare interpreter start (median of N fresh processes).

Usage: uv run python benchmarks/bench_import.py [N]
Target (issue 2): `import lovia` under 100 ms net on the 2-core CI machine.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


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
        "first @tool (loads pydantic)": (
            "from lovia import tool\n@tool\ndef f(x: int) -> int:\n    return x"
        ),
    }
    print(f"bare interpreter: {bare:.1f} ms (median of {runs})")
    for label, code in cases.items():
        ms = _median_ms(code, runs)
        print(f"{label:40s} {ms - bare:7.1f} ms net  ({ms:.1f} ms total)")


if __name__ == "__main__":
    main()
