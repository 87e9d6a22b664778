"""Keyword-index search time over a memory archive of 10,000 and 100,000 documents.

Usage: uv run python benchmarks/bench_memory.py [QUERIES]

Each size builds a fresh ``KeywordIndex`` (SQLite FTS5) in a temp directory from synthetic
messages (about 20 words each from a 5,000-word vocabulary, one in ten with a CJK phrase),
then times ``search(query, k=5)`` for QUERIES distinct two- and three-word queries (default
200, plus 20 CJK ones) and prints the median and the 95th percentile in milliseconds.
Build time is printed for context; it is not the figure of interest.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lovia.plugins import Doc, KeywordIndex

SIZES = (10_000, 100_000)
BATCH = 2_000
_CJK_PHRASES = ["我喜欢喝绿茶", "明天去东京出差", "项目截止日期是周五", "寿司很好吃", "记得买牛奶"]


def vocabulary(rng: random.Random, n: int = 5_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def make_docs(rng: random.Random, words: list[str], n: int) -> list[Doc]:
    docs = []
    for i in range(n):
        body = " ".join(rng.choice(words) for _ in range(20))
        if i % 10 == 0:
            body += " " + rng.choice(_CJK_PHRASES)
        docs.append(Doc(f"run{i // 10}:{i % 10}", body, {"role": "user"}, "2026-01-01T00:00:00"))
    return docs


async def bench(size: int, queries: int) -> tuple[float, float, float]:
    rng = random.Random(size)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        index = KeywordIndex(Path(tmp) / "archive.db")
        start = time.perf_counter()
        docs = make_docs(rng, words, size)
        for i in range(0, size, BATCH):
            await index.add(docs[i : i + BATCH])
        build = time.perf_counter() - start
        terms = [" ".join(rng.sample(words, rng.randint(2, 3))) for _ in range(queries)]
        terms += ["绿茶", "东京出差", "截止日期", "牛奶"] * 5
        await index.search(terms[0])  # warm the connection and the page cache
        times = []
        for query in terms:
            t0 = time.perf_counter()
            await index.search(query, k=5)
            times.append((time.perf_counter() - t0) * 1000)
        index.close()
    times.sort()
    return build, statistics.median(times), times[int(len(times) * 0.95)]


async def main() -> None:
    queries = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"KeywordIndex.search(k=5), {queries + 20} queries per size")
    for size in SIZES:
        build, median, p95 = await bench(size, queries)
        print(
            f"  {size:>7,} docs: median {median:6.2f} ms, p95 {p95:6.2f} ms "
            f"(index built in {build:5.1f} s)"
        )


if __name__ == "__main__":
    asyncio.run(main())
