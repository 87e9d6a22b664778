"""The app the SIGKILL test serves in a real uvicorn subprocess (``--factory``).

Environment: ``LOVIA_KILL_DB`` (the SQLite file), ``LOVIA_KILL_DIR`` (signal files) and
``LOVIA_KILL_PHASE``. The tool ``note`` appends a line to ``note.log`` (so the test can see it
never ran twice), ``block`` appends to ``entered.log`` and then waits until a ``release``
file exists. A scripted model cannot remember across processes, so each life of the server
gets the replies still to come: the first life the whole script, the restarted one only the
final answer (its resume drains the dangling ``block`` call without asking the model).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.web import create_app


def build() -> FastAPI:
    folder = Path(os.environ["LOVIA_KILL_DIR"])

    @tool
    def note() -> str:
        """Write a note."""
        with (folder / "note.log").open("a") as f:
            f.write("ran\n")
        return "noted"

    @tool
    async def block() -> str:
        """Wait for the release signal."""
        with (folder / "entered.log").open("a") as f:
            f.write("entered\n")
        while not (folder / "release").exists():
            await asyncio.sleep(0.01)  # a file is the only signal across processes
        return "released"

    script: list[Any] = [text("finished after the kill")]
    if os.environ["LOVIA_KILL_PHASE"] == "first":
        script = [call("note"), call("block"), *script]
    agent = Agent(name="helper", model=ScriptedProvider(script), tools=[note, block])
    return create_app(agent, db_path=os.environ["LOVIA_KILL_DB"], generate_titles=False)
