"""The app every worker of the scale-out tests serves (``uvicorn --factory``).

Environment: ``LOVIA_SCALE_DB`` (a ``postgresql://...?schema=`` URL), ``LOVIA_SCALE_BROKER``
and ``LOVIA_SCALE_QUEUE`` (the engine), ``LOVIA_SCALE_DIR`` (signal files). A run may move
between processes, so the model is not a script each process replays from its start: it
picks its reply from the conversation so far, and any worker continues any chat.

A message holding ``tool`` calls ``note`` (appends to ``note.log``, so a test sees it never
ran twice) and then ``block`` (appends to ``entered.log`` and waits until a ``release`` file
exists); ``gate`` calls ``gated``, which needs an approval; ``quick`` calls ``quick``;
anything else is answered at once. The first
message holding ``die-before-publish`` kills its worker between the claim and the publish.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from lovia import Agent, tool
from lovia.providers.base import ModelDelta
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry
from lovia.web import create_app
from lovia.web.scale import RunEngine
from lovia.web.store.postgres import PostgresChatStore


class ConversationModel(ScriptedProvider):
    """A stateless scripted model: its reply depends only on the entries it is sent."""

    async def stream(
        self, entries: Sequence[TranscriptEntry], **options: Any
    ) -> AsyncIterator[ModelDelta]:
        async for delta in ScriptedProvider([_reply(entries)]).stream(entries, **options):
            yield delta


def _reply(entries: Sequence[TranscriptEntry]) -> Any:
    last = entries[-1]
    if isinstance(last, ToolResultEntry):
        names = {e.call_id: e.name for e in entries if isinstance(e, ToolCallEntry)}
        name = names.get(last.call_id)
        return call("block") if name == "note" else text(f"finished {name}")
    said = last.content if isinstance(last, InputEntry) and isinstance(last.content, str) else ""
    for word in ("tool", "gate", "quick"):
        if word in said:
            return call({"tool": "note", "gate": "gated", "quick": "quick"}[word])
    return text(f"hello: {said}")


def agent() -> Agent[Any]:
    """The agent (``lovia web --app tests.web.scale.scaleapp:agent`` serves it too)."""
    folder = Path(os.environ["LOVIA_SCALE_DIR"])

    @tool
    def note() -> str:
        """Write a note."""
        with (folder / "note.log").open("a") as f:
            f.write(f"{os.getpid()}\n")
        return "noted"

    @tool
    async def block() -> str:
        """Wait for the release signal."""
        with (folder / "entered.log").open("a") as f:
            f.write(f"{os.getpid()}\n")
        while not (folder / "release").exists():
            await asyncio.sleep(0.01)  # a file is the only signal across processes
        return "released"

    @tool(needs_approval=True)
    def gated() -> str:
        """A call that needs an approval."""
        return "gated ran"

    @tool
    def quick() -> str:
        """Answer at once (noting which worker ran it)."""
        with (folder / "quick.log").open("a") as f:
            f.write(f"{os.getpid()}\n")
        return "quick"

    return Agent(name="helper", model=ConversationModel(), tools=[note, block, gated, quick])


def build() -> FastAPI:
    engine = RunEngine(os.environ["LOVIA_SCALE_BROKER"], queue=os.environ["LOVIA_SCALE_QUEUE"])
    publish = engine.dispatch

    async def dispatch(payload: dict[str, Any]) -> None:
        # The fault hook: the first message holding "die-before-publish" kills this worker
        # after it claimed the chat and before the run reaches the broker.
        if "die-before-publish" in str(payload["input"]):
            with contextlib.suppress(FileExistsError):
                (Path(os.environ["LOVIA_SCALE_DIR"]) / "died").touch(exist_ok=False)
                os._exit(17)
        await publish(payload)

    engine.dispatch = dispatch  # type: ignore[method-assign]
    app = create_app(
        agent(),
        # three workers beside other tests' stores: a small pool each
        store=PostgresChatStore(os.environ["LOVIA_SCALE_DB"], max_connections=4),
        engine=engine,
        generate_titles=False,
        scheduler_poll=float(os.environ.get("LOVIA_SCALE_SCHEDULER_POLL", "0.2")),
        max_background_runs=int(os.environ.get("LOVIA_SCALE_SLOTS", "8")),
    )
    cluster = app.state.lovia.supervisor.cluster
    cluster.heal_after = float(os.environ.get("LOVIA_SCALE_HEAL_AFTER", "0.5"))
    return app


def build_with_probe() -> FastAPI:
    """``build`` plus ``GET /test/live``: the chats whose run is live in this process (so a
    test can pick a worker that does not hold a run)."""
    app = build()

    @app.get("/test/live")
    def live() -> dict[str, Any]:
        runs = app.state.lovia.supervisor.live_runs()
        return {"pid": os.getpid(), "sessions": [r.session_id for r in runs]}

    return app
