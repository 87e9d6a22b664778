"""A child process for the crash test: append batches of events to one run until killed.

``python append_worker.py sqlite PATH`` or ``python append_worker.py postgres DSN SCHEMA``.
After each committed batch it prints the run's last seq, so the parent knows what is
durable when it sends SIGKILL (mid-append, most of the time).
"""

from __future__ import annotations

import asyncio
import sys

from lovia.web.eventlog import EventRecord
from lovia.web.store.base import ChatStore

BATCH = 50


async def main(argv: list[str]) -> None:
    kind = argv[0]
    store = (
        ChatStore.sqlite(argv[1])
        if kind == "sqlite"
        else ChatStore.postgres(argv[1], schema=argv[2])
    )
    await store.create_session("s", agent="helper", title="t")
    seq = await store.last_seq("r")
    while True:
        batch = [
            EventRecord("r", n, "text_delta", {"delta": "x" * 100})
            for n in range(seq + 1, seq + BATCH + 1)
        ]
        await store.append_events("s", batch)
        seq += BATCH
        print(seq, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
