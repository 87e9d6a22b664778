"""Record and replay: stable request keys, offline replay, typed misses with a diff, forks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.eval import (
    Case,
    Recording,
    RecordingError,
    RecordingMissError,
    RecordingProvider,
    ReplayProvider,
    contains,
    evaluate,
    fork,
    recorded_case,
    request_key,
    tool_called_with,
)
from lovia.eval.record import canonical_request
from lovia.exceptions import UserError
from lovia.messages import Usage
from lovia.testing import ScriptedProvider, call, text
from lovia.tools.base import tool
from lovia.transcript import InputEntry


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


AGENT = Agent("forecaster", instructions="Use the weather tool.", tools=[weather])


def script() -> ScriptedProvider:
    return ScriptedProvider(
        [
            call("weather", {"city": "Paris"}, usage=Usage(input_tokens=20, output_tokens=5)),
            text("It is sunny in Paris.", reasoning="the tool said so"),
        ]
    )


async def record(path: Path, agent: Agent[Any] = AGENT) -> Recording:
    recorder = RecordingProvider(script())
    result = await agent.clone(model=recorder).run("Weather in Paris?")
    assert result.output == "It is sunny in Paris."
    recorder.recording.save(path)
    return recorder.recording


async def test_a_recorded_run_replays_offline_with_the_same_entries(tmp_path: Path) -> None:
    original = await AGENT.clone(model=script()).run("Weather in Paris?")
    await record(tmp_path / "rec.json")
    replayed = await AGENT.clone(model=ReplayProvider(Recording.load(tmp_path / "rec.json"))).run(
        "Weather in Paris?"
    )
    assert replayed.entries == original.entries
    assert replayed.usage.input_tokens == 20 and replayed.turns == 2


async def test_the_request_key_ignores_dict_order() -> None:
    entries = [InputEntry("user", "hi")]
    a = canonical_request(entries, response_format={"type": "json_schema", "name": "x"})
    b = canonical_request(entries, response_format={"name": "x", "type": "json_schema"})
    assert request_key(a) == request_key(b)
    c = canonical_request(entries, response_format={"name": "y", "type": "json_schema"})
    assert request_key(a) != request_key(c)


def test_the_request_key_is_stable_across_processes() -> None:
    code = (
        "from lovia.eval import request_key\n"
        "from lovia.eval.record import canonical_request\n"
        "from lovia.transcript import InputEntry\n"
        "from lovia.providers.base import ModelSettings\n"
        "req = canonical_request([InputEntry('user', 'hi')], settings=ModelSettings("
        "temperature=0.0, provider_options={'b': {'y': 1}, 'a': {'x': 2}}))\n"
        "print(request_key(req))\n"
    )
    keys = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
        keys.add(out.stdout.strip())
    assert len(keys) == 1 and len(keys.pop()) == 64


async def test_a_changed_prompt_raises_a_miss_naming_the_first_request_with_a_diff(
    tmp_path: Path,
) -> None:
    recording = await record(tmp_path / "rec.json")
    changed = AGENT.clone(
        instructions="Use the weather tool. Be terse.", model=ReplayProvider(recording)
    )
    with pytest.raises(RecordingMissError) as info:
        await changed.run("Weather in Paris?")
    miss = info.value
    assert miss.index == 0
    assert '-      "content": "Use the weather tool.",' in miss.diff.splitlines()
    assert '+      "content": "Use the weather tool. Be terse.",' in miss.diff.splitlines()
    assert str(miss).startswith("request #0 of this replay")
    assert miss.diff in str(miss)


async def test_a_miss_later_in_the_run_names_that_request(tmp_path: Path) -> None:
    recording = await record(tmp_path / "rec.json")

    @tool(name="weather")
    def rainy(city: str) -> str:
        """The weather in a city."""
        return f"rain in {city}"

    agent = AGENT.clone(tools=[rainy], model=ReplayProvider(recording))
    with pytest.raises(RecordingMissError) as info:
        await agent.run("Weather in Paris?")
    assert info.value.index == 1
    assert '-      "output": "sunny in Paris",' in info.value.diff.splitlines()
    assert '+      "output": "rain in Paris",' in info.value.diff.splitlines()


async def test_a_miss_inside_evaluate_is_that_samples_error(tmp_path: Path) -> None:
    recording = await record(tmp_path / "rec.json")
    case = recorded_case(recording, [contains("sunny")])
    report = await evaluate(AGENT.clone(instructions="Changed."), [case])
    error = report.cases[0].samples[0].error
    assert error is not None and error.startswith("RecordingMissError: request #0 of this replay")


async def test_repeated_requests_replay_in_recorded_order_and_the_last_repeats() -> None:
    recorder = RecordingProvider(ScriptedProvider([text("first"), text("second")]))
    agent = Agent("a", model=recorder)
    assert [(await agent.run("same")).output for _ in range(2)] == ["first", "second"]
    replay = Agent("a", model=ReplayProvider(recorder.recording))
    assert [(await replay.run("same")).output for _ in range(3)] == ["first", "second", "second"]


async def test_a_recorded_case_replays_deterministically_for_every_sample(tmp_path: Path) -> None:
    await record(tmp_path / "rec.json")
    case = recorded_case(
        tmp_path / "rec.json",
        [contains("sunny"), tool_called_with("weather", {"city": "Paris"})],
        samples=3,
    )
    assert case.input == [InputEntry("user", "Weather in Paris?")]
    assert case.name == "Weather in Paris?"
    report = await evaluate(AGENT, [case])
    assert report.passed and report.cases[0].successes == 3


def test_recorded_case_owns_its_model() -> None:
    rec = Recording(interactions=[])
    with pytest.raises(UserError, match="sets model= itself"):
        recorded_case(rec, model="openai:gpt-4o")


async def test_a_forked_case_sends_the_recorded_request_to_another_model(tmp_path: Path) -> None:
    recording = await record(tmp_path / "rec.json")
    case = recorded_case(recording, [contains("sunny")])
    other = ScriptedProvider(
        [call("weather", {"city": "Paris"}), text("It is sunny, 21C.")], model="other-model"
    )
    new_recording = Recording()
    forked = fork(case, other, record_to=new_recording)
    assert forked.name == "Weather in Paris? @ scripted:other-model"
    assert forked.checks == case.checks and forked.input == case.input
    report = await evaluate(AGENT, [forked])
    assert report.passed
    # The fork sent exactly the first request the recording holds, to the new model...
    assert new_recording.interactions[0].key == recording.interactions[0].key
    assert new_recording.model == "other-model"
    # ...and what it recorded replays offline in turn.
    replayed = await evaluate(AGENT, [recorded_case(new_recording, [contains("21C")])])
    assert replayed.passed


def test_fork_with_recording_needs_a_provider_instance() -> None:
    with pytest.raises(UserError, match="needs a Provider instance"):
        fork(Case("q"), "openai:gpt-4o", record_to=Recording())
    assert fork(Case("q"), "openai:gpt-4o").name == "q @ openai:gpt-4o"


async def test_the_replay_claims_the_recorded_json_schema_support(tmp_path: Path) -> None:
    recorder = RecordingProvider(ScriptedProvider([text('{"n": 1}')], supports_json_schema=True))
    await Agent("a", model=recorder, output_type=dict).run("give json")
    recorder.recording.save(tmp_path / "rec.json")
    replay = ReplayProvider(Recording.load(tmp_path / "rec.json"))
    assert replay.supports_json_schema is True
    assert (await Agent("a", model=replay, output_type=dict).run("give json")).output == {"n": 1}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"schema": "lovia.eval.recording", "version": 7}', "unsupported recording version 7"),
        ('{"schema": "other"}', "not a lovia eval recording"),
        (
            '{"schema": "lovia.eval.recording", "version": 1, "provider": "p", "model": "m",'
            ' "supports_json_schema": false, "interactions": [{"key": "k"}]}',
            "malformed recording: KeyError",
        ),
    ],
    ids=["json", "version", "schema", "interaction"],
)
def test_a_corrupt_recording_is_a_recording_error(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "rec.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RecordingError, match=message):
        Recording.load(path)


def test_a_recording_file_is_readable_json(tmp_path: Path) -> None:
    recording = Recording(provider="p", model="m")
    recording.save(tmp_path / "rec.json")
    data = json.loads((tmp_path / "rec.json").read_text())
    assert data == {
        "schema": "lovia.eval.recording",
        "version": 1,
        "provider": "p",
        "model": "m",
        "supports_json_schema": False,
        "interactions": [],
    }
