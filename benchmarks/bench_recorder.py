"""What the context inspector's recorder (``lovia.web.recorder``) costs per model call, and
how many bytes it logs per turn.

Cost: an agent runs N turns (one call to an async tool that returns at once, as in
``bench_turns.py``) with the default context policy, with and without ``record_views``; a
turn's cost is the interval between two consecutive model calls, the figure the median
interval of a run, then the median over repetitions (interleaved, the machine is shared).
The recorder's cost is the difference. Its sink only keeps the records (the event log's
batched write is the store's cost, measured by ``bench_web_store.py``).

Bytes: the JSON size of what the recorder logs per turn, for one run of 100 turns (each
turn a tool call whose result is 2 KB, under a ``Compaction`` window small enough to clear
results, with the todo list's reminder), and for a 100-message chat (100 runs of one turn,
each started from the stored history of the ones before).

Run: ``uv run python benchmarks/bench_recorder.py``
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
from typing import Any

from lovia import Agent, Runner, tool
from lovia.context import Compaction
from lovia.plugins import Todo
from lovia.stores.memory import InMemorySession
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import entry_to_dict
from lovia.web.recorder import record_views

SIZES = (100, 1000)
REPS = 7


@tool
async def noop() -> str:
    """Return at once."""
    return "ok"


@tool
async def fetch(n: int) -> str:
    """Return a 2 KB page."""
    return f"page {n} " + "lorem ipsum " * 170


class _StampingProvider(ScriptedProvider):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamps: list[float] = []

    def stream(self, entries: Any, **kwargs: Any) -> Any:
        self.stamps.append(time.perf_counter())
        return super().stream(entries, **kwargs)


class _Sink:
    def __init__(self) -> None:
        self.records: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.records.append((kind, data))

    def sizes(self) -> list[int]:
        return [len(json.dumps(d, separators=(",", ":"))) for k, d in self.records]


async def _interval(n: int, recorded: bool) -> float:
    provider = _StampingProvider([*(call("noop", {}) for _ in range(n)), text("done")])
    agent: Agent[Any] = Agent(
        "bench", instructions="Benchmark agent.", model=provider, tools=[noop]
    )
    if recorded:
        agent = record_views(agent, _Sink())
    gc.collect()
    await Runner.run(agent, "go", max_turns=n + 1)
    stamps = provider.stamps
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:], strict=False))


async def _cost() -> None:
    await _interval(10, True)
    samples: dict[tuple[int, bool], list[float]] = {}
    for _ in range(REPS):
        for n in SIZES:
            for recorded in (False, True):
                samples.setdefault((n, recorded), []).append(await _interval(n, recorded) * 1e6)
    for n in SIZES:
        plain = statistics.median(samples[(n, False)])
        with_recorder = statistics.median(samples[(n, True)])
        print(
            f"N={n:>5}: {plain:6.1f} us/turn plain, {with_recorder:6.1f} us/turn recorded: "
            f"+{with_recorder - plain:5.1f} us per model call"
        )


def _compaction() -> Compaction:
    return Compaction(context_window=24_000, compact_to=0.7)


async def _bytes_one_run(turns: int) -> None:
    todo = {"todos": [{"content": "read every page", "status": "in_progress"}]}
    script = [call("todo_write", todo)]
    script += [call("fetch", {"n": i}) for i in range(turns - 2)] + [text("done")]
    sink = _Sink()
    agent = Agent(
        "bench",
        instructions="Benchmark agent. " * 20,
        model=ScriptedProvider(script),
        tools=[fetch],
        plugins=[Todo()],
        context_policy=_compaction(),
    )
    result = await Runner.run(record_views(agent, sink), "go", max_turns=turns + 1)
    sizes = sink.sizes()
    transcript = sum(len(json.dumps(entry_to_dict(e))) for e in result.entries)
    cleared = sum(
        1 for k, d in sink.records for lit in d.get("lits", []) if lit["kind"] == "cleared"
    )
    print(
        f"one run of {turns} turns: {len(sizes)} records, {sum(sizes)} bytes in all, "
        f"median {statistics.median(sizes):.0f} B/turn, max {max(sizes)} B "
        f"(turn 50: {sizes[49]} B); {cleared} cleared markers; the run's own entries "
        f"are ~{transcript} B"
    )


async def _bytes_chat(messages: int) -> None:
    session = InMemorySession()
    replies = [text(f"reply {i} " + "words " * 60) for i in range(messages)]
    model = ScriptedProvider(replies)
    agent = Agent("bench", instructions="Benchmark agent. " * 20, model=model, plugins=[Todo()])
    sizes = []
    for i in range(messages):
        sink = _Sink()
        await Runner.run(
            record_views(agent, sink), f"message {i} " + "words " * 60,
            session=session, session_id="chat",
        )  # fmt: skip
        sizes.extend(sink.sizes())
    print(
        f"a {messages}-message chat: {sum(sizes)} bytes in all, median "
        f"{statistics.median(sizes):.0f} B/turn, first {sizes[0]} B, 50th {sizes[49]} B, "
        f"last {sizes[-1]} B (the last view holds {2 * messages + 1} entries)"
    )


def main() -> None:
    asyncio.run(_cost())
    asyncio.run(_bytes_one_run(100))
    asyncio.run(_bytes_chat(100))


if __name__ == "__main__":
    main()
