"""`lovia eval` through the real console script, in a subprocess."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from lovia.eval import CaseResult, Report, SampleResult

ROOT = Path(__file__).resolve().parents[2]
LOVIA = Path(sys.executable).with_name("lovia")
EXAMPLE = ROOT / "examples" / "eval_suite" / "suite.py"

SUITE = """
from lovia import Agent
from lovia.eval import Case, Suite, contains
from lovia.testing import ScriptedProvider, text

REPLY = {reply!r}

def model():
    return ScriptedProvider([text(REPLY)])

agent = Agent("cli-test")
suite = Suite(agent=agent, cases=[
    Case("greet", [contains("hello")], model=model),
    Case("other", [contains("bye")], model=model),
])
single = Suite(agent=agent, cases=[Case("only", [contains("hello")], model=model)])

def make():
    return single

async def make_async():
    return single

def broken_factory():
    raise RuntimeError("factory bug")

not_a_suite = 42
"""


def lovia(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOVIA_MODEL"}
    return subprocess.run(
        [str(LOVIA), "eval", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
        check=False, env=env,
    )  # fmt: skip


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_suite.py"
    path.write_text(SUITE.format(reply="hello and bye"), encoding="utf-8")
    return path


def test_the_console_script_exists() -> None:
    assert LOVIA.exists(), f"{LOVIA} is missing; run `uv sync --all-packages`"


def test_the_example_suite_runs_offline_and_saves_its_report(tmp_path: Path) -> None:
    r = lovia(str(EXAMPLE), "--save", "out.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].startswith("✓  eur-to-jpy    1/1")
    assert lines[2].startswith("✓  lunch-budget  3/3 100% [44%-100%]")
    assert lines[3].startswith("✓  two-step      1/1")
    assert lines[5].startswith("PASSED: 3/3 cases passed")
    report = Report.load(tmp_path / "out.json")
    assert [c.name for c in report.cases] == ["eur-to-jpy", "lunch-budget", "two-step"]
    assert report.passed and report.tokens == 2630
    # On a pipe, progress is plain lines on stderr, one per case.
    assert r.stderr.splitlines()[0] == "running 3 case(s), 5 sample(s)"
    assert len(r.stderr.splitlines()) == 4


def test_a_failing_case_without_a_baseline_exits_1(suite_file: Path) -> None:
    suite_file.write_text(SUITE.format(reply="hello"), encoding="utf-8")
    r = lovia(str(suite_file), "--no-progress", cwd=suite_file.parent)
    assert r.returncode == 1
    assert "FAILED: 1/2 cases passed" in r.stdout and r.stderr == ""


def test_a_regression_against_the_baseline_exits_1(suite_file: Path) -> None:
    cwd = suite_file.parent
    assert lovia(str(suite_file), "--save", "base.json", cwd=cwd).returncode == 0
    suite_file.write_text(SUITE.format(reply="hello"), encoding="utf-8")
    r = lovia(str(suite_file), "--baseline", "base.json", "--save", "now.json", cwd=cwd)
    assert r.returncode == 1
    assert r.stdout.endswith("compared with baseline: REGRESSED\n  regressed: other (100% -> 0%)\n")
    # The failing case is now the baseline: failing again is no regression.
    r = lovia(str(suite_file), "--baseline", "now.json", cwd=cwd)
    assert r.returncode == 0
    assert r.stdout.endswith("compared with baseline: ok\n")


def test_name_selects_the_suite_and_factories_are_called(suite_file: Path) -> None:
    for name in ("single", "make", "make_async"):
        r = lovia(f"{suite_file}:{name}", "--no-progress", cwd=suite_file.parent)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[1].startswith("✓  only")


def test_samples_and_concurrency_flags_apply(suite_file: Path) -> None:
    r = lovia(f"{suite_file}:single", "--samples", "3", "--concurrency", "2", cwd=suite_file.parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].startswith("✓  only  3/3 100%")


def _duplicate_baseline(path: Path) -> None:
    greet = CaseResult(name="greet", samples=(SampleResult(index=0, passed=True),))
    Report(cases=(greet, greet)).save(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "no suite file at 'missing.py'"),
        (["notes.txt"], "no suite file at 'notes.txt'"),
        (["{suite}:nope"], "has no attribute 'nope'\nHint: suites defined there: suite, single"),
        (["{suite}:not_a_suite"], "is a int, not a lovia.eval.Suite"),
        (["{suite}:broken_factory"], "the suite factory raised RuntimeError: factory bug"),
        (["{broken}"], "importing '{broken}' raised ZeroDivisionError: division by zero"),
        (["{suite}", "--concurrency", "0"], "argument --concurrency: must be at least 1, got 0"),
        (["{suite}", "--samples", "many"], "argument --samples: expected a whole number"),
        (["{suite}", "--bogus"], "unrecognized arguments: --bogus"),
        ([], "the following arguments are required: SUITE.py[:NAME]"),
        (["{suite}", "--baseline", "corrupt.json"], "report 'corrupt.json' is not valid JSON"),
        (["{suite}", "--baseline", "dupes.json"], "has duplicate case names: 'greet'"),
        (["{suite}", "--baseline", "absent.json"], "cannot read report 'absent.json'"),
    ],
    ids=[
        "missing", "not-py", "attribute", "type", "factory", "import-error", "concurrency",
        "samples", "unknown-flag", "no-suite", "corrupt-baseline", "duplicate-baseline",
        "absent-baseline",
    ],
)  # fmt: skip
def test_usage_errors_exit_2_with_a_message_and_no_traceback(
    suite_file: Path, args: list[str], message: str
) -> None:
    cwd = suite_file.parent
    broken = cwd / "broken_suite.py"
    broken.write_text("x = 1 / 0\n", encoding="utf-8")
    (cwd / "notes.txt").write_text("not a suite", encoding="utf-8")
    (cwd / "corrupt.json").write_text("{", encoding="utf-8")
    _duplicate_baseline(cwd / "dupes.json")
    argv = [a.format(suite=suite_file, broken=broken) for a in args]
    r = lovia(*argv, cwd=cwd)
    assert r.returncode == 2
    assert message.format(broken=broken) in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert r.stdout == ""


def test_help_exits_0() -> None:
    r = lovia("--help", cwd=ROOT)
    assert r.returncode == 0 and "SUITE.py[:NAME]" in r.stdout and "--baseline FILE" in r.stdout


def test_a_terminal_gets_a_live_progress_bar(suite_file: Path) -> None:
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [str(LOVIA), "eval", str(suite_file)], cwd=suite_file.parent, stdout=subprocess.PIPE,
            stderr=follower, text=True, timeout=60, check=False,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert proc.returncode == 0
    screen = drawn.decode("utf-8", "replace")
    assert "\x1b[" in screen and "eval" in screen  # a redrawn bar, not plain lines
    assert "running 2 case(s)" not in screen


def test_the_example_recordings_are_what_record_writes(tmp_path: Path) -> None:
    copy = tmp_path / "suite.py"
    copy.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    env = {
        k: v for k, v in os.environ.items() if k not in ("LOVIA_MODEL", "LOVIA_EVAL_JUDGE_MODEL")
    }
    r = subprocess.run(
        [sys.executable, str(copy), "--record"], capture_output=True, text=True, timeout=60,
        check=False, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    shipped = sorted(p.name for p in (EXAMPLE.parent / "recordings").glob("*.json"))
    assert sorted(p.name for p in (tmp_path / "recordings").glob("*.json")) == shipped
    for name in shipped:
        fresh = (tmp_path / "recordings" / name).read_text(encoding="utf-8")
        assert fresh == (EXAMPLE.parent / "recordings" / name).read_text(encoding="utf-8"), name


HANGING_SUITE = '''
import asyncio
from lovia import Agent
from lovia.eval import Case, Suite
from lovia.testing import ScriptedProvider, call, text
from lovia.tools.base import tool

@tool
async def hang() -> str:
    """Waits forever."""
    await asyncio.Event().wait()
    return "never"

suite = Suite(agent=Agent("a", tools=[hang]), cases=[
    Case("q", model=lambda: ScriptedProvider([call("hang"), text("x")])),
])
'''


def test_ctrl_c_cancels_the_runs_and_exits_130_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "hang.py").write_text(HANGING_SUITE, encoding="utf-8")
    proc = subprocess.Popen(
        [str(LOVIA), "eval", "hang.py"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        # A shell may start us with SIGINT ignored; the command must see it as a user would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline() == "running 1 case(s), 1 sample(s)\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert err == "lovia eval: interrupted\n" and out == ""
