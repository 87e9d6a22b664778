"""now, sleep and current_date through real runs."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from lovia import Agent, CancelToken, RunCancelled, Runner
from lovia.exceptions import UserError
from lovia.testing import ScriptedProvider, call, text
from lovia.tools import current_date, now, sleep

from tests.core.tools.builtin_server import run_tool


async def test_now_is_iso_8601_with_an_offset() -> None:
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    entry = await run_tool(now, {})
    after = datetime.datetime.now(datetime.timezone.utc)
    stamp = datetime.datetime.fromisoformat(entry.output)
    assert stamp.tzinfo is not None
    assert before <= stamp <= after


async def test_now_in_a_named_zone() -> None:
    entry = await run_tool(now, {"tz": "Asia/Tokyo"})
    stamp = datetime.datetime.fromisoformat(entry.output)
    assert entry.output.endswith("+09:00")
    assert abs(stamp - datetime.datetime.now(datetime.timezone.utc)) < datetime.timedelta(minutes=1)


@pytest.mark.parametrize("tz", ["Mars/Olympus_Mons", "../../etc/passwd", ""])
async def test_an_unknown_zone_is_a_tool_error(tz: str) -> None:
    entry = await run_tool(now, {"tz": tz})
    assert entry.is_error and f"unknown time zone {tz!r}" in entry.output


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Records the seconds sleep waits, without waiting."""
    seen: list[float] = []

    async def pause(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr("lovia.tools.time._pause", pause)
    return seen


@pytest.mark.parametrize(
    ("asked", "waited", "output"),
    [
        (1.5, 1.5, "Slept 1.5 seconds."),
        (-4, 0.0, "Slept 0 seconds."),
        (3600, 60.0, "Slept 60 seconds (capped at 60)."),
    ],
)
async def test_sleep_is_capped_and_clamped(
    waits: list[float], asked: float, waited: float, output: str
) -> None:
    entry = await run_tool(sleep, {"seconds": asked})
    assert (entry.output, waits) == (output, [waited])


async def test_sleep_really_waits() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    entry = await run_tool(sleep, {"seconds": 0.05})
    assert entry.output == "Slept 0.05 seconds."
    assert loop.time() - started >= 0.05


async def test_a_cancelled_run_interrupts_a_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeping = asyncio.Event()

    async def pause(seconds: float) -> None:
        sleeping.set()
        await asyncio.Event().wait()  # never ends by itself

    monkeypatch.setattr("lovia.tools.time._pause", pause)
    token = CancelToken()
    provider = ScriptedProvider([call("sleep", {"seconds": 60}), text("done")])
    run = asyncio.create_task(
        Runner.run(Agent(name="a", model=provider, tools=[sleep]), "go", cancel_token=token)
    )
    await sleeping.wait()
    token.cancel("stop")
    with pytest.raises(RunCancelled):
        await run


async def test_current_date_states_the_date_and_weekday_in_the_system_prompt() -> None:
    provider = ScriptedProvider([text("ok")])
    agent = Agent(name="a", instructions="Be brief.", model=provider)
    agent = agent.with_instructions(current_date("UTC"))
    await Runner.run(agent, "hi")
    today = datetime.datetime.now(datetime.timezone.utc).date()
    system = provider.calls[0][0]
    assert system.role == "system"
    assert system.content == f"Be brief.\n\nToday is {today:%A}, {today.isoformat()}."


def test_current_date_is_stable_within_a_day() -> None:
    fragment = current_date()
    ctx: Any = None
    assert fragment(ctx) == fragment(ctx)
    assert ":" not in fragment(ctx)  # no time of day: the prompt prefix stays cacheable


def test_current_date_with_an_unknown_zone_fails_at_construction() -> None:
    with pytest.raises(UserError, match="unknown time zone 'Nowhere/Land'"):
        current_date("Nowhere/Land")
