"""The ``lovia`` console script: usage, version, unknown and missing commands, plug-in commands.

Each test runs the real console script in a subprocess. A third-party command is registered
the way an installed distribution registers it: a ``*.dist-info/entry_points.txt`` on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

LOVIA = str(Path(sys.executable).with_name("lovia"))


def _lovia(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [LOVIA, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_no_arguments_and_help_print_usage_and_exit_0() -> None:
    for args in ((), ("-h",), ("--help",)):
        r = _lovia(*args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("usage: lovia <command>")
        assert "web" in r.stdout and "eval" in r.stdout


def test_version_names_lovia() -> None:
    from importlib.metadata import version

    r = _lovia("--version")
    assert (r.returncode, r.stdout.strip()) == (0, f"lovia {version('lovia-core')}")


def test_an_unknown_command_prints_usage_to_stderr_and_exits_2() -> None:
    r = _lovia("frobnicate")
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr
    assert "usage: lovia" in r.stderr
    assert r.stdout == ""


def test_a_third_party_command_gets_the_remaining_arguments_and_its_prog(tmp_path: Path) -> None:
    (tmp_path / "hello_cmd.py").write_text(
        textwrap.dedent(
            """
            def main(argv, prog):
                print(prog, "|", " ".join(argv))
                return 3
            """
        )
    )
    info = tmp_path / "hello_cmd-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-cmd\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[lovia.commands]\nhello = hello_cmd:main\n")
    r = _lovia("hello", "--name", "x y", path=tmp_path)
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == "lovia hello | --name x y"
    assert "hello" in _lovia("--help", path=tmp_path).stdout
