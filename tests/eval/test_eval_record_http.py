"""Record a real adapter (OpenAI Chat Completions) talking to llmock, a real local HTTP
server, then replay the run offline: the server sees no request during the replay."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from lovia import Agent
from lovia.context_policy import NoopContextPolicy
from lovia.eval import Recording, RecordingProvider, contains, evaluate, recorded_case
from lovia.providers.openai_chat import OpenAIChatProvider
from lovia.tools.base import tool

from tests.core.providers.conftest import _start as start_server
from tests.core.providers.conftest import _stop as stop_server
from tests.support import free_port, require


@pytest.fixture(scope="module")
def llmock_url() -> Iterator[str]:
    exe = shutil.which("llmock", path=str(Path(sys.executable).parent)) or shutil.which("llmock")
    require(exe is not None, "llmock is not installed (uv sync --group dev)")
    assert exe is not None
    port = free_port()
    # The provider tests' process helpers: readiness from the server's own log line.
    proc, _log = start_server(
        [exe, "serve", "--host", "127.0.0.1", "--port", str(port), "--response-style", "static"],
        ready="Uvicorn running",
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(proc)


def _requests_seen(url: str) -> int:
    return len(httpx.get(url + "/_llmock/requests", timeout=10).json()["requests"])


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"21C in {city}"


# No compaction policy: its recall tool would be offered too, and llmock calls offered tools.
AGENT = Agent("forecaster", tools=[get_weather], context_policy=NoopContextPolicy())


async def test_a_real_adapter_run_is_recorded_and_replayed_offline(
    llmock_url: str, tmp_path: Path
) -> None:
    httpx.post(llmock_url + "/_llmock/reset", timeout=10).raise_for_status()
    provider = OpenAIChatProvider("gpt-4o-mini", base_url=llmock_url + "/v1", api_key="k")
    recorder = RecordingProvider(provider)
    try:
        live = await AGENT.clone(model=recorder).run("What is the weather in Paris?")
    finally:
        await provider.aclose()
    recorder.recording.save(tmp_path / "weather.json")
    sent = _requests_seen(llmock_url)
    assert sent == len(recorder.recording.interactions) >= 2  # a tool round trip

    case = recorded_case(tmp_path / "weather.json", [contains(str(live.output))], samples=2)
    report = await evaluate(AGENT, [case])
    assert report.passed, str(report)
    assert [s.output for s in report.cases[0].samples] == [live.output, live.output]
    assert _requests_seen(llmock_url) == sent  # the replay never touched the server
    loaded = Recording.load(tmp_path / "weather.json")
    assert (loaded.provider, loaded.model) == ("openai", "gpt-4o-mini")
