"""Hand-edited recordings fail with ``RecordingError``, never a raw ``KeyError``.

``recorded_case`` reads the run's input from the first recorded request. A recording whose
request lost its ``entries`` raised a bare ``KeyError``, and one with an unknown entry type
a bare ``ValueError``, out of ``recorded_case``. A ``supports_json_schema`` edited to the
string ``"false"`` was read as true.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lovia import Agent
from lovia.eval import Recording, RecordingError, RecordingProvider, contains, recorded_case
from lovia.testing import ScriptedProvider, text


@pytest.fixture
async def recorded(tmp_path: Path) -> dict[str, Any]:
    recorder = RecordingProvider(ScriptedProvider([text("Bonjour !")]))
    await Agent("greeter", model=recorder).run("Greet me")
    data: dict[str, Any] = recorder.recording.to_dict()
    return data


def _drop_entries(d: dict[str, Any]) -> None:
    del d["interactions"][0]["request"]["entries"]


def _unknown_entry(d: dict[str, Any]) -> None:
    d["interactions"][0]["request"]["entries"] = [{"type": "nope"}]


def _entries_not_a_list(d: dict[str, Any]) -> None:
    d["interactions"][0]["request"]["entries"] = "Greet me"


def _flag_as_text(d: dict[str, Any]) -> None:
    d["supports_json_schema"] = "false"


@pytest.mark.parametrize(
    "edit",
    [_drop_entries, _unknown_entry, _entries_not_a_list, _flag_as_text],
    ids=["no-entries", "unknown-entry", "entries-text", "flag-text"],
)
def test_a_hand_edited_recording_is_a_recording_error(
    recorded: dict[str, Any], tmp_path: Path, edit: Callable[[dict[str, Any]], None]
) -> None:
    edit(recorded)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(recorded), encoding="utf-8")
    with pytest.raises(RecordingError) as caught:
        recorded_case(path, [contains("Bonjour")])
    assert caught.value.hint


def test_an_untouched_recording_still_builds_its_case(recorded: dict[str, Any]) -> None:
    case = recorded_case(Recording.from_dict(recorded), [contains("Bonjour")])
    assert case.name == "Greet me"
