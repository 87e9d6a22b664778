"""A lovia web server in a process of its own, for the kill-and-restart probes.

``python server_worker.py DB PORT park|resume``: serves on 127.0.0.1:PORT. In ``park`` mode
the agent's tool prints ``PARKED`` and never returns (the test SIGKILLs the process there);
in ``resume`` mode the tool returns at once and the model answers ``resumed``.
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app


def main() -> None:
    db, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]

    @tool
    async def park() -> str:
        """Park the run."""
        if mode == "park":
            print("PARKED", flush=True)
            await asyncio.Event().wait()
        return "parked"

    script = [call("park"), text("never")] if mode == "park" else [text("resumed")] * 3
    agent = Agent(name="helper", model=ScriptedProvider(script), tools=[park])
    app = create_app(agent, db_path=db, generate_titles=False)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        print("READY", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
