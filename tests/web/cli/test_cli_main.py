"""``lovia.web.cli`` in-process: the parser, flag-then-env-then-default, and every bad value
as a message with exit 2 (the subprocess tests run the real script for a sample)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lovia.web import cli
from lovia.web.cli import build_parser, resolve_settings


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    for name in list(__import__("os").environ):
        if name.startswith("LOVIA_"):
            monkeypatch.delenv(name)
    # serve_app is faked here: the port a test names need not be free on this machine
    monkeypatch.setattr(cli, "_ensure_bindable", lambda host, port: None)
    return project


def _settings(*argv: str, **env: str) -> cli.Settings:
    return resolve_settings(build_parser().parse_args(list(argv)), env)


def test_parser_defaults_are_none() -> None:
    args = vars(build_parser().parse_args([]))
    assert all(value is None for value in args.values()), args


def test_flag_beats_env_beats_default() -> None:
    default = _settings()
    assert (default.host, default.port, default.title) == ("127.0.0.1", 8000, "lovia")
    assert (default.max_turns, default.max_retries, default.max_tokens) == (50, 4, None)
    assert default.workspace_mode == "coding" and default.followups is True
    env = _settings(
        LOVIA_PORT="9001",
        LOVIA_TITLE="Mine",
        LOVIA_WORKSPACE_MODE="readonly",
        LOVIA_FOLLOWUPS="0",
        LOVIA_MAX_TOKENS="512",
        LOVIA_PROVIDER_TRUST_ENV="1",
        LOVIA_SKILLS_DIR="a:b",
        LOVIA_LOG_LEVEL="INFO",
    )
    assert (env.port, env.title, env.workspace_mode, env.followups) == (
        9001,
        "Mine",
        "readonly",
        False,
    )
    assert (env.max_tokens, env.trust_env, env.skills_dirs, env.log_level) == (
        512,
        True,
        ["a", "b"],
        "info",
    )
    flag = _settings(
        "--port",
        "9002",
        "--trusted",
        "--skills-dir",
        "c",
        LOVIA_PORT="9001",
        LOVIA_WORKSPACE_MODE="readonly",
        LOVIA_SKILLS_DIR="a",
    )
    assert (flag.port, flag.workspace_mode, flag.skills_dirs) == (9002, "trusted", ["c"])


def test_no_model_connection_flags() -> None:
    options = {o for a in build_parser()._actions for o in a.option_strings}
    assert not options & {"--model", "--base-url", "--api-key", "--provider"}


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        (["--max-turns", "0"], {}, "--max-turns"),
        (["--max-retries", "-1"], {}, "--max-retries"),
        (["--max-tokens", "0"], {}, "--max-tokens"),
        (["--provider-timeout", "-1"], {}, "timeout"),
        (["--provider-timeout", "nan"], {}, "timeout"),
        (["--log-level", "loud"], {}, "log level"),
        (["--port", "70000"], {}, "65535"),
        (["--readonly", "--no-workspace"], {}, "not allowed with"),
        (["--bogus"], {}, "--help"),
        ([], {"LOVIA_MAX_TURNS": "0"}, "LOVIA_MAX_TURNS"),
        ([], {"LOVIA_MAX_RETRIES": "x"}, "LOVIA_MAX_RETRIES"),
        ([], {"LOVIA_PROVIDER_TIMEOUT": "0"}, "LOVIA_PROVIDER_TIMEOUT"),
        ([], {"LOVIA_LOG_LEVEL": "shout"}, "LOVIA_LOG_LEVEL"),
        ([], {"LOVIA_WORKSPACE_MODE": "yolo"}, "LOVIA_WORKSPACE_MODE"),
        ([], {"LOVIA_FOLLOWUPS": "maybe"}, "LOVIA_FOLLOWUPS"),
        ([], {"LOVIA_WEB_TOKEN": "   "}, "blank"),
        (["--skills-dir", "nope"], {}, "skills dir"),
        (["--memory-dir", "afile"], {}, "is a file"),
        (["--workspace", "nope"], {}, "not a directory"),
        (["--instructions-file", "nope.md"], {}, "instructions file"),
        (["--app", "nocolon"], {}, "MODULE:ATTR"),
        (["--app", "no_such_module_xyz:agent"], {}, "cannot import"),
        (["--app", "json:no_such_attr"], {}, "no attribute"),
        (["--app", "json:__name__"], {}, "not an Agent"),
        (["--check", "--app", "json:dumps"], {}, "--app"),
    ],
)
def test_bad_values_exit_2_with_a_message(
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    needle: str,
) -> None:
    (folder / "afile").write_text("x")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    served: list[object] = []
    monkeypatch.setattr(cli, "serve_app", lambda *a, **k: served.append(a))
    try:
        code = cli.main(argv, "lovia web")
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    assert needle in err
    assert not served


def test_main_with_no_config_serves_the_setup_state(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / ".git").mkdir()
    seen: dict[str, object] = {}

    def fake_serve(target: object, **options: object) -> None:
        seen.update(options, target=target)

    monkeypatch.setattr(cli, "serve_app", fake_serve)
    assert cli.main(["--port", "8123", "--provider-timeout", "42", "--trust-env"]) == 0
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8123" in out and "none configured yet" in out
    runtime = seen["config_runtime"]
    assert not runtime.configured  # type: ignore[attr-defined]
    assert seen["target"] == {} and seen["port"] == 8123 and seen["token"] is None
    assert __import__("os").environ["LOVIA_PROVIDER_TIMEOUT"] == "42"
    assert __import__("os").environ["LOVIA_PROVIDER_TRUST_ENV"] == "1"
    assert ".lovia/" in (folder / ".gitignore").read_text()


def test_trusted_workspace_beyond_loopback_warns(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "serve_app", lambda *a, **k: None)
    assert cli.main(["--host", "0.0.0.0", "--trusted"]) == 0
    assert "trusted workspace" in capsys.readouterr().err
    assert cli.main(["--host", "127.0.0.1", "--trusted"]) == 0
    assert "trusted workspace" not in capsys.readouterr().err


def test_app_warns_that_agent_flags_are_ignored(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / "myagents.py").write_text(
        "from lovia import Agent\nagents = {'a': Agent('a'), 'b': Agent('b')}\n"
        "def make():\n    return Agent('made')\n"
    )
    monkeypatch.setattr(
        "sys.path", [p for p in __import__("sys").path if p not in ("", str(folder))]
    )
    seen: list[object] = []
    monkeypatch.setattr(cli, "serve_app", lambda target, **k: seen.append((target, k)))
    (folder / "sk").mkdir()
    assert (
        cli.main(["--app", "myagents:agents", "--no-memory", "--readonly", "--skills-dir", "sk"])
        == 0
    )
    captured = capsys.readouterr()
    assert "--no-memory" in captured.err and "ignored" in captured.err
    assert "--skills-dir" in captured.err and "--readonly/--trusted" in captured.err
    assert "agents: a, b" in captured.out
    assert cli.main(["--app", "myagents:make"]) == 0
    target = seen[-1][0]  # type: ignore[index]
    assert getattr(target, "name", None) == "made"
    assert "config_runtime" not in seen[-1][1]  # type: ignore[index]


def test_check_with_a_keyless_local_gateway_and_an_env_key(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support import free_port

    home = Path(__import__("os").environ["HOME"])
    (home / ".lovia").mkdir()
    url = f"http://127.0.0.1:{free_port()}/v1"
    (home / ".lovia" / "config.json").write_text(
        json.dumps({"models": [{"model": "m", "base_url": url}]})
    )
    assert cli.main(["--check"]) == 2  # nothing listens there
    out = capsys.readouterr().out
    assert "keyless gateway" in out and "unreachable" in out
    (home / ".lovia" / "config.json").write_text(json.dumps({"models": [{"model": "gpt-4o"}]}))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert cli.main(["--check"]) == 2
    assert "no key for the official endpoint" in capsys.readouterr().out


def test_an_unwritable_db_folder_is_exit_2(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / "blocker").write_text("a file where a folder should be")
    monkeypatch.setattr(cli, "serve_app", lambda *a, **k: None)
    assert cli.main(["--db", "blocker/sub/chat.db"]) == 2
    assert "error" in capsys.readouterr().err


async def test_the_real_builder_rebuilds_tools_when_search_changes(folder: Path) -> None:
    from lovia.web.config.files import load_config
    from lovia.web.config.runtime import ConfigRuntime, ProfileInput, SearchInput

    settings = _settings("--no-memory", "--no-subagents")
    runtime = ConfigRuntime(load_config(), cli._builder(settings, None))
    assert not runtime.configured
    await runtime.add_model(ProfileInput(model="qwen", base_url="http://127.0.0.1:9/v1"))
    assert runtime.agent is not None
    provider = runtime.agent.model
    assert getattr(provider, "base_url", None) == "http://127.0.0.1:9/v1"
    await runtime.set_search(SearchInput(backend="tavily", tavily_api_key="tvly-key"))
    assert "web_search" in [t.name for t in runtime.agent.tools]
    await runtime.set_search(SearchInput(backend="off"))
    assert "web_search" not in [t.name for t in runtime.agent.tools]
    assert runtime.config.search.tavily_api_key == "tvly-key"  # null kept the key
