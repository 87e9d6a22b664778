"""Compaction against endpoints with hard windows, from 4k to 128k (issue 19).

Each endpoint counts with lovia's estimate times a tokenizer factor (0.8 to 2.5) plus a
fixed hidden overhead, and rejects any request over its window, summarisation calls
included (see ``windowed.py``). A 40-turn chat in English and in CJK text, and a 40-call
tool loop with large JSON results, must never fail a run, must never be rejected once
calibration has two samples (compaction is proactive), must only change the prompt
prefix when a compaction is announced, and must keep the protected tail verbatim where
the window has room for one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from lovia import Agent, Runner, tool
from lovia.context import Compaction, InMemoryResultStore, TokenBudget
from lovia.events import CompactionNotice, ContextCompacted
from lovia.stores.memory import InMemorySession
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry

from .ctx_support import dump
from .windowed import Reply, WindowedEndpoint

WINDOWS = [4_096, 8_192, 16_384, 32_768, 131_072]
ENDPOINTS = [(0.8, 0), (1.5, 346), (2.5, 346)]
"""(tokenizer factor, fixed overhead per prompt)."""
UNITS = {"english": "word ", "cjk": "中文字符"}
TURNS = 40


@dataclass
class Outcome:
    endpoint: WindowedEndpoint
    notices: list[CompactionNotice] = field(default_factory=list)
    full: list[TranscriptEntry] = field(default_factory=list)
    """The whole conversation, system entry first."""


async def _chat(window: int, factor: float, overhead: int, language: str) -> Outcome:
    unit = UNITS[language]
    endpoint = WindowedEndpoint(window=window, factor=factor, overhead=overhead, filler=unit)
    endpoint.script = lambda n: Reply(text=f"[reply {n}] " + endpoint.text_of(375, unit))
    agent: Agent[None] = Agent(
        name="companion",
        instructions="You are a patient companion.",
        model=endpoint,
        context_policy=Compaction(context_window=window),
    )
    session = InMemorySession()
    outcome = Outcome(endpoint)
    for turn in range(TURNS):
        message = f"[turn {turn}] " + endpoint.text_of(750, unit)
        handle = Runner.stream(agent, message, session=session, session_id="chat")
        outcome.notices += [e.notice async for e in handle if isinstance(e, ContextCompacted)]
        result = await handle.result()  # never raises: no run may fail
        assert result.output.startswith("[reply ")
    outcome.full = [InputEntry("system", str(agent.instructions)), *await session.load("chat")]
    return outcome


async def _tool_loop(window: int, factor: float, overhead: int) -> Outcome:
    endpoint = WindowedEndpoint(window=window, factor=factor, overhead=overhead)
    rows = max(4, int(window / 6 * 4 / factor / 60))  # ~ window / 6 tokens of JSON per page

    @tool
    def fetch(page: int) -> str:
        """Fetch one page of records as JSON."""
        return json.dumps(
            {
                "page": page,
                "rows": [
                    {"id": page * 1_000 + i, "name": f"item-{i}", "tags": ["a", "b"], "ok": True}
                    for i in range(rows)
                ],
            }
        )

    def script(n: int) -> Reply:
        if n < TURNS:
            return Reply(call=("fetch", json.dumps({"page": n})))
        return Reply(text="all pages read")

    endpoint.script = script
    agent: Agent[None] = Agent(
        name="reader",
        instructions="Read every page, then report.",
        model=endpoint,
        tools=[fetch],
        context_policy=Compaction(context_window=window, store=InMemoryResultStore()),
    )
    outcome = Outcome(endpoint)
    handle = Runner.stream(agent, "Read the 40 pages of the catalogue.", max_turns=TURNS + 5)
    outcome.notices += [e.notice async for e in handle if isinstance(e, ContextCompacted)]
    result = await handle.result()
    assert result.output == "all pages read"
    outcome.full = [InputEntry("system", str(agent.instructions)), *result.entries]
    return outcome


def _check(outcome: Outcome) -> None:
    endpoint, full = outcome.endpoint, outcome.full
    # Every accepted request fits (the endpoint enforces it); a rejection may only come
    # while calibration has fewer than two samples, and never on a summarisation call.
    assert all(size <= endpoint.window for size in endpoint.sizes)
    late = [r for r in endpoint.rejections if r.reports_before >= 2 or r.summary]
    assert not late, f"rejected after calibration: {late}"
    # The prompt prefix only changes when a compaction is announced.
    breaks = 0
    for earlier, later in zip(endpoint.views, endpoint.views[1:], strict=False):
        a, b = dump(earlier), dump(later)
        if b[: len(a)] != a:
            breaks += 1
    assert breaks <= len(outcome.notices)
    # A conversation that outgrew the window was compacted ahead of the endpoint.
    if endpoint.count(full) > endpoint.window:
        assert any(not n.reactive for n in outcome.notices)


def _check_tail(outcome: Outcome) -> None:
    """Each chat view ends with the protected tail verbatim: the newest entries of the
    conversation up to usable // 5 of the endpoint's tokens (at least the newest one)."""
    endpoint, full = outcome.endpoint, outcome.full
    budget = TokenBudget(endpoint.window)
    for turn, view in enumerate(endpoint.views):
        so_far = full[: 2 + 2 * turn]  # the system entry, then user/reply pairs
        kept, used = 0, 0
        for entry in reversed(so_far):
            used += int(endpoint.factor * endpoint.counter.count_entry(entry))
            if kept and used > budget.tail_tokens:
                break
            kept += 1
        assert dump(view[-kept:]) == dump(so_far[-kept:]), f"turn {turn}: tail not verbatim"


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("factor,overhead", ENDPOINTS)
@pytest.mark.parametrize("language", sorted(UNITS))
async def test_a_40_turn_chat_fits_every_window(
    window: int, factor: float, overhead: int, language: str
) -> None:
    outcome = await _chat(window, factor, overhead, language)
    assert len(outcome.full) == 1 + 2 * TURNS
    _check(outcome)
    _check_tail(outcome)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("factor,overhead", ENDPOINTS)
async def test_a_tool_loop_with_large_json_results_fits_every_window(
    window: int, factor: float, overhead: int
) -> None:
    outcome = await _tool_loop(window, factor, overhead)
    assert len(outcome.full) == 2 + 2 * TURNS + 1
    _check(outcome)
    # The newest result always reaches the model verbatim (the tail keeps the last pair).
    results = [e for e in outcome.full if isinstance(e, ToolResultEntry)]
    for n, view in enumerate(outcome.endpoint.views[1:]):
        assert dump(view[-1:]) == dump(results[n : n + 1]), f"call {n + 1}: newest result cut"
