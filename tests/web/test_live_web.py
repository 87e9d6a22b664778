"""One chat through ``create_app`` over a real uvicorn, against the endpoint ``LOVIA_LIVE_MODEL``
names (opt-in: ``LOVIA_LIVE_TESTS=1``; see docs/live-tests.md).

The browser's path end to end: POST a message, read the SSE stream, see the tool call and its
result, the streamed reply and ``done``; then the session lists the run.
"""

from __future__ import annotations

from typing import Any

import pytest
from lovia import Agent

from tests.core.providers.test_live import weather_tool
from tests.live_support import (
    LiveEndpoint,
    lift_network_guard,  # noqa: F401 - fixture: the endpoint may be remote
    live_fixture,  # noqa: F401 - fixture `live`
    step,
)
from tests.web.conftest import chat, until

pytestmark = pytest.mark.live_provider


async def test_one_chat_through_the_server(live: LiveEndpoint, make_app: Any, serve: Any) -> None:
    calls: list[str] = []
    agent = Agent(
        "live",
        instructions="Answer weather questions with the get_weather tool.",
        model=live.provider(),
        tools=[weather_tool(calls)],
    )
    server = await serve(make_app(agent))
    with step(live, "one chat over HTTP/SSE"):
        prompt = "What is the weather in Paris? Use the get_weather tool."
        async with chat(server.client, prompt) as (session, frames):
            seen = await until(frames, "done")
        kinds = [f.event for f in seen]
        assert "tool_call" in kinds and "tool_result" in kinds, kinds
        assert calls and all("paris" in city.lower() for city in calls), calls
        text = "".join(f.data.get("delta", "") for f in seen if f.event == "text_delta")
        assert text.strip(), "no reply text streamed"
        ids = [f.id for f in [session, *seen]]
        assert ids == [str(i) for i in range(len(ids))]  # resumable ids
        session_id = session.data["session_id"]
        detail = await server.client.get(f"/api/sessions/{session_id}")
        assert detail.status_code == 200, detail.text
