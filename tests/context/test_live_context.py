"""Live context checks against the endpoint ``LOVIA_LIVE_MODEL`` names (opt-in).

A long conversation that compacts and still answers about an early fact through recall;
with ``LOVIA_LIVE_OVERFLOW_TESTS=1``, a prompt over the real window that the reactive path
recovers, with the learned window persisted in the session. See docs/live-tests.md.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent, Runner, tool
from lovia.context import ClearToolResults, Compaction, OffloadToolResults
from lovia.events import ContextCompacted, Event
from lovia.runtime.result import RunResult
from lovia.stores.sqlite import SQLiteSession
from lovia.tools.base import Tool
from lovia.tools.recall import RECALL_TOOL_NAME
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from tests.live_support import (
    LiveEndpoint,
    claimed_window,
    declared,
    lift_network_guard,  # noqa: F401 - fixture: the endpoint may be remote
    live_fixture,  # noqa: F401 - fixture `live`
    setting,
    step,
)

pytestmark = pytest.mark.live_provider

CODE_WORDS = {
    1: "ZEBRA-4821",
    2: "OTTER-1397",
    3: "HERON-5560",
    4: "LYNX-7702",
    5: "IBIS-3018",
    6: "MOOSE-6244",
}
FILLER = (
    "This page of the field notebook records routine observations of the river bank: "
    "water level, weather, the birds seen at dawn and the state of the footpath. "
)


def page_text(n: int, chars: int) -> str:
    """Page ``n``: ``chars`` of filler, then its code word (past any preview)."""
    body = (FILLER * (chars // len(FILLER) + 1))[:chars]
    return f"Page {n}.\n{body}\nThe code word on page {n} is {CODE_WORDS.get(n, f'PAGE-{n}')}."


def page_tool(chars: int) -> Tool:
    @tool
    def read_page(n: int) -> str:
        """Read one page of the field notebook.

        Args:
            n: The page number, from 1.
        """
        return page_text(n, chars)

    return read_page


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[SQLiteSession]:
    store = SQLiteSession(tmp_path / "live-sessions.db")
    yield store
    await store.aclose()


async def run_turn(
    agent: Agent[None], prompt: str, session: SQLiteSession, session_id: str
) -> tuple[RunResult[Any], list[Event]]:
    handle = Runner.stream(agent, prompt, session=session, session_id=session_id)
    events = [event async for event in handle]
    return await handle.result(), events


async def test_a_long_conversation_compacts_and_recalls_an_early_fact(
    live: LiveEndpoint, session: SQLiteSession
) -> None:
    bodies: list[dict[str, Any]] = []
    agent: Agent[None] = Agent(
        "notebook",
        instructions="You read a field notebook with the read_page tool. Follow the user's "
        "instructions exactly.",
        model=live.provider(client=live.recording_client(bodies)),
        tools=[page_tool(2_400)],
        # A deliberately small budget: six ~600-token pages push the view over it, so the
        # oldest results are cleared (keep_last=3) to recall markers naming their call ids.
        context_policy=Compaction(
            context_window=2_400,
            compact_at=0.5,
            compact_to=0.3,
            reserve_output_tokens=0,
            stages=[OffloadToolResults(), ClearToolResults()],
        ),
    )
    compactions: list[ContextCompacted] = []
    for n in range(1, 7):
        with step(live, f"conversation turn {n}: read page {n}"):
            _, events = await run_turn(
                agent,
                f"Read page {n} with the read_page tool and reply only with the word done.",
                session,
                "notebook",
            )
            compactions += [e for e in events if isinstance(e, ContextCompacted)]
    with step(live, "the view was compacted"):
        assert compactions, "six pages never pushed the view over the compaction threshold"
        history = await session.load("notebook")
        page_one = next(
            e for e in history if isinstance(e, ToolResultEntry) and CODE_WORDS[1] in e.output
        )
    before = len(bodies)
    with step(live, "the early fact comes back through recall"):
        result, _ = await run_turn(
            agent,
            "What is the code word on page 1? Earlier tool results may have been cleared to "
            f"save context; if so, get them back with {RECALL_TOOL_NAME} before answering.",
            session,
            "notebook",
        )
        first_view = json.dumps(bodies[before])
        assert CODE_WORDS[1] not in first_view, (
            "page 1's code word was still in the view: its result was not cleared, or the "
            "model repeated it"
        )
        assert f'{RECALL_TOOL_NAME}(\\"{page_one.call_id}\\")' in first_view
        recalls = {
            e.call_id
            for e in result.entries
            if isinstance(e, ToolCallEntry) and e.name == RECALL_TOOL_NAME
        }
        assert recalls, f"the model never called {RECALL_TOOL_NAME}"
        recalled = [
            e.output
            for e in result.entries
            if isinstance(e, ToolResultEntry) and e.call_id in recalls
        ]
        assert page_one.output in recalled, "the recall did not return page 1's original text"
        assert CODE_WORDS[1].lower() in str(result.output).lower(), result.output


def seeded_history(pages: int, chars: int) -> list[TranscriptEntry]:
    """A finished conversation of ``pages`` read_page rounds (what a session holds)."""
    entries: list[TranscriptEntry] = []
    for n in range(1, pages + 1):
        call_id = f"seed_page_{n}"
        entries += [
            InputEntry("user", f"Read page {n}."),
            ToolCallEntry(call_id, "read_page", json.dumps({"n": n})),
            ToolResultEntry(call_id, page_text(n, chars)),
            AssistantTextEntry("done"),
        ]
    return entries


async def _live_window(live: LiveEndpoint) -> int | None:
    configured = setting("LOVIA_LIVE_CONTEXT_WINDOW")
    return int(configured) if configured is not None else await claimed_window(live.provider())


async def test_overflow_probe_recovers_and_persists_the_learned_window(
    live: LiveEndpoint, session: SQLiteSession
) -> None:
    if not declared("LOVIA_LIVE_OVERFLOW_TESTS"):
        pytest.skip(
            "overflow probe: set LOVIA_LIVE_OVERFLOW_TESTS=1 (sends a prompt over the window)"
        )
    window = await _live_window(live)
    if window is None:
        pytest.skip(
            f"the context window of {live.spec} is unknown: set LOVIA_LIVE_CONTEXT_WINDOW to the "
            "window the endpoint enforces (tokens)"
        )
    pages = 6
    chars = 2 * window * 4 // pages  # about twice the window in all
    await session.append("overflow", seeded_history(pages, chars))

    def agent() -> Agent[None]:
        # The policy is told a window ten times too large, so nothing compacts up front: the
        # endpoint itself must reject the prompt, and the window it names is learned.
        return Agent(
            "notebook",
            instructions="You read a field notebook. Be brief.",
            model=live.provider(),
            tools=[page_tool(chars)],
            context_policy=Compaction(
                context_window=10 * window,
                reserve_output_tokens=min(1_024, window // 8),
                stages=[OffloadToolResults(), ClearToolResults()],
            ),
        )

    with step(live, "a prompt over the window is recovered by the reactive path"):
        result, events = await run_turn(
            agent(),
            "Which pages have you read so far? Answer in one sentence.",
            session,
            "overflow",
        )
        reactive = [e for e in events if isinstance(e, ContextCompacted) and e.notice.reactive]
        assert reactive, "the prompt never overflowed: the endpoint accepted twice its window"
        assert isinstance(result.output, str) and result.output.strip()
    with step(live, "the learned window is persisted in the session"):
        learned = _learned_windows(await session.segments("overflow"))
        assert len(learned) == 1, learned
        (value,) = learned.values()
        assert 256 <= value < 2 * window, f"learned {value} for a ~{2 * window}-token prompt"
    with step(live, "the next run starts from the learned window"):
        result, events = await run_turn(
            agent(), "Thanks. Reply with the single word: ok.", session, "overflow"
        )
        assert not [e for e in events if isinstance(e, ContextCompacted) and e.notice.reactive]
        assert _learned_windows(await session.segments("overflow")) == learned


def _learned_windows(segments: list[Any]) -> dict[str, int]:
    windows: dict[str, int] = segments[-1].meta["context"]["compaction"]["learned_windows"]
    return windows
