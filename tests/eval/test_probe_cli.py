"""``lovia eval --save`` into a place it cannot write fails before the suite runs.

It failed only after every case had run (and, against a real model, spent its tokens),
printing a raw ``[Errno 2]`` message with no hint.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lovia.eval.cli import main

SUITE = """
from pathlib import Path
from lovia import Agent
from lovia.eval import Case, Suite, contains
from lovia.testing import ScriptedProvider, text

def model():
    Path(__file__).with_name("ran").touch()  # the suite spent a model call
    return ScriptedProvider([text("hi")])

suite = Suite(agent=Agent("a"), cases=[Case("hi", [contains("hi")], name="greets", model=model)])
"""


@pytest.mark.parametrize("target", ["missing/dir/report.json", "."], ids=["no-folder", "a-dir"])
def test_an_unwritable_save_path_is_a_usage_error_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    save = tmp_path / target
    assert main([str(suite), "--save", str(save), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--save" in err and "Hint:" in err
    assert not (tmp_path / "ran").exists()


def test_a_writable_save_path_still_saves(tmp_path: Path) -> None:
    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    assert main([str(suite), "--save", str(tmp_path / "r.json"), "--no-progress"]) == 0
    assert (tmp_path / "r.json").is_file()
