"""Packaging: each wheel ships only its own portion, and lovia-core works entirely alone.

These tests build real wheels with uv and install them into throw-away environments
(`uv run --isolated --no-project --with <wheel>`), the way a user's `pip install lovia-core`
would see them. In the workspace venv every member is installed, so only this check can
prove that core never needs another distribution at run time (packaging.md, section 5).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.support import require

ROOT = Path(__file__).resolve().parents[2]
UV = os.environ.get("UV") or shutil.which("uv")
DISTS = [
    "lovia",
    "lovia_core",
    "lovia_context",
    "lovia_workspace",
    "lovia_plugins",
    "lovia_eval",
    "lovia_web",
]
# Test-only dependencies of tests/core (never runtime dependencies of lovia-core).
CORE_TEST_DEPS = [
    "pytest",
    "pytest-asyncio",
    "pytest-timeout",
    "openai",
    "anthropic",
    "llmock",
    "psycopg[binary,pool]",
    "opentelemetry-sdk",
]


def _uv(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    assert UV is not None
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(
        [UV, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require(UV is not None, "uv is not installed")
    out = tmp_path_factory.mktemp("dist")
    r = _uv("build", "--all-packages", "--wheel", "--out-dir", str(out), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    found = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert sorted(found) == sorted(DISTS)
    return found


def _core_only(wheel: Path, code: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    withs = [a for w in (str(wheel), *extra) for a in ("--with", w)]
    return _uv("run", "--isolated", "--no-project", *withs, "--", "python", "-c", code, cwd=cwd)


def test_only_lovia_core_ships_the_lovia_init(wheels: dict[str, Path]) -> None:
    for dist, whl in wheels.items():
        names = zipfile.ZipFile(whl).namelist()
        assert ("lovia/__init__.py" in names) == (dist == "lovia_core"), dist


@pytest.mark.parametrize(
    ("dist", "portion"),
    [
        ("lovia_context", "lovia/context/"),
        ("lovia_workspace", "lovia/workspace/"),
        ("lovia_plugins", "lovia/plugins/"),
        ("lovia_eval", "lovia/eval/"),
        ("lovia_web", "lovia/web/"),
    ],
)
def test_each_portion_wheel_holds_only_its_subpackage(
    wheels: dict[str, Path], dist: str, portion: str
) -> None:
    names = [n for n in zipfile.ZipFile(wheels[dist]).namelist() if ".dist-info/" not in n]
    assert names, f"{dist} ships no files"
    assert [n for n in names if not n.startswith(portion)] == []
    assert f"{portion}py.typed" in names


def test_core_wheel_holds_no_other_portion(wheels: dict[str, Path]) -> None:
    names = zipfile.ZipFile(wheels["lovia_core"]).namelist()
    others = ("lovia/context/", "lovia/workspace/", "lovia/plugins/", "lovia/eval/", "lovia/web/")
    assert [n for n in names if n.startswith(others)] == []
    assert "lovia/py.typed" in names


def test_meta_distribution_ships_no_code(wheels: dict[str, Path]) -> None:
    names = zipfile.ZipFile(wheels["lovia"]).namelist()
    assert [n for n in names if ".dist-info/" not in n] == []


def test_core_alone_imports_cheaply_and_loads_no_other_portion(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    code = textwrap.dedent(
        """
        import sys
        import lovia
        from lovia import Agent, Runner, tool
        loaded = sorted(m for m in sys.modules if m.startswith("lovia."))
        others = ("context", "workspace", "plugins", "eval", "web")
        bad = [m for m in loaded if m.split(".")[1] in others]
        assert not bad, bad
        print("metadata" if "importlib.metadata" in sys.modules else "no-metadata")
        import importlib.util
        try:
            importlib.util.find_spec("lovia.context")
        except ModuleNotFoundError as exc:
            print(type(exc).__name__)
        """
    )
    r = _core_only(wheels["lovia_core"], code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["no-metadata", "MissingDistributionError"]


def test_import_lovia_loads_neither_pydantic_nor_httpx(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    code = "import sys, lovia; print(sorted(m for m in ('pydantic', 'httpx') if m in sys.modules))"
    r = _core_only(wheels["lovia_core"], code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_missing_distribution_error_names_the_distribution(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    code = textwrap.dedent(
        """
        try:
            from lovia import Compaction
        except ImportError as exc:
            print(type(exc).__name__, "|", exc)
        """
    )
    r = _core_only(wheels["lovia_core"], code, tmp_path)
    assert r.returncode == 0, r.stderr
    name, message = r.stdout.split("|", 1)
    assert name.strip() == "MissingDistributionError"
    assert "pip install ./packages/lovia-core './packages/lovia-context'" in message


def test_every_optional_facade_name_gives_the_hint_with_core_alone(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    code = textwrap.dedent(
        """
        import lovia
        for name, (module, dist) in sorted(lovia._OPTIONAL.items()):
            try:
                getattr(lovia, name)
            except lovia.MissingDistributionError as exc:
                print(name, exc.distribution, "uv sync --all-packages" in exc.hint)
        """
    )
    r = _core_only(wheels["lovia_core"], code, tmp_path)
    assert r.returncode == 0, r.stderr
    import lovia

    expected = [f"{n} {d} True" for n, (_m, d) in sorted(lovia._OPTIONAL.items())]
    assert r.stdout.splitlines() == expected


def test_the_lovia_command_works_with_core_alone(wheels: dict[str, Path], tmp_path: Path) -> None:
    run = ("run", "--isolated", "--no-project", "--with", str(wheels["lovia_core"]), "--")
    r = _uv(*run, "lovia", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "usage: lovia <command>" in r.stdout
    r = _uv(*run, "lovia", "web", cwd=tmp_path)
    assert r.returncode == 2
    assert "needs the lovia-web distribution, which is not installed" in r.stderr
    assert "uv sync --all-packages" in r.stderr


@pytest.mark.parametrize("statement", ["import lovia.workspace", "from lovia.web import x"])
def test_importing_a_missing_portion_gives_the_install_hint(
    wheels: dict[str, Path], tmp_path: Path, statement: str
) -> None:
    code = textwrap.dedent(
        f"""
        try:
            {statement}
        except ImportError as exc:
            print(type(exc).__name__, "|", exc.name, "|", exc.hint)
        """
    )
    r = _core_only(wheels["lovia_core"], code, tmp_path)
    assert r.returncode == 0, r.stderr
    name, module, hint = (part.strip() for part in r.stdout.split("|"))
    assert name == "MissingDistributionError"
    assert module == statement.split()[1]
    assert "uv sync --all-packages" in hint


def test_the_install_hints_command_works(wheels: dict[str, Path], tmp_path: Path) -> None:
    """The hint's `pip install ./packages/...` (run with uv pip, offline) installs the portion."""
    from lovia.exceptions import install_hint

    hint = install_hint("lovia-context")
    command = hint.split("run `pip install ", 1)[1].split("`", 1)[0]
    venv = tmp_path / "venv"
    assert _uv("venv", str(venv), cwd=ROOT).returncode == 0
    python = str(venv / "bin" / "python")
    folders = [arg.strip("'") for arg in command.split()]
    r = _uv("pip", "install", "--offline", "--python", python, *folders, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    probe = "from lovia import Compaction; print(Compaction.__module__)"
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("lovia.context")


def test_default_context_policy_is_noop_without_lovia_context(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    code = "from lovia.context_policy import default_context_policy as d; print(type(d()).__name__)"
    r = _core_only(wheels["lovia_core"], code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "NoopContextPolicy"


def test_default_context_policy_is_compaction_with_lovia_context(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    code = "from lovia.context_policy import default_context_policy as d; print(type(d()).__name__)"
    r = _core_only(wheels["lovia_core"], code, tmp_path, str(wheels["lovia_context"]))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Compaction"


def test_core_test_suite_passes_with_lovia_core_alone(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    withs = [a for dep in (str(wheels["lovia_core"]), *CORE_TEST_DEPS) for a in ("--with", dep)]
    r = _uv(
        "run", "--isolated", "--no-project", *withs, "--",
        "python", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/core",
        cwd=ROOT,
        timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    # The suite must really have run against the wheel, not the workspace sources.
    assert " passed" in r.stdout


_EXAMPLE_PROVIDER = '''
"""A third-party provider registered through the lovia.providers entry point."""

from lovia.events import TextDelta
from lovia.providers.base import FinishDelta


class EchoProvider:
    name = "echo"
    supports_json_schema = False

    def __init__(self, model: str, **_: object) -> None:
        self.model = model

    async def stream(self, entries, *, tools=(), response_format=None, settings=None):
        last = entries[-1]
        yield TextDelta(f"{self.model} says: {last.content}")
        yield FinishDelta("stop")
'''


def test_third_party_provider_resolves_through_its_entry_point(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    project = tmp_path / "lovia-provider-echo"
    pkg = project / "src" / "lovia_provider_echo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(_EXAMPLE_PROVIDER)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["hatchling>=1.26"]
            build-backend = "hatchling.build"

            [project]
            name = "lovia-provider-echo"
            version = "1.0.0"
            requires-python = ">=3.10"
            dependencies = ["lovia-core>=0.1"]

            [project.entry-points."lovia.providers"]
            echo = "lovia_provider_echo:EchoProvider"

            [tool.hatch.build.targets.wheel]
            packages = ["src/lovia_provider_echo"]
            """
        )
    )
    out = tmp_path / "dist"
    r = _uv("build", "--wheel", "--out-dir", str(out), str(project), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    echo_wheel = next(out.glob("*.whl"))
    code = textwrap.dedent(
        """
        from lovia import Agent, Runner
        agent = Agent(name="a", model="echo:parrot")
        result = Runner.run_sync(agent, "hello")
        print(result.output)
        """
    )
    r = _core_only(wheels["lovia_core"], code, tmp_path, str(echo_wheel))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "parrot says: hello"


def test_uv_pip_check_passes() -> None:
    require(UV is not None, "uv is not installed")
    r = _uv("pip", "check", "--python", sys.executable, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
