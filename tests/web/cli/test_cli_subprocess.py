"""``lovia web`` as a user runs it: the console script in a subprocess, over HTTP."""

from __future__ import annotations

import json
import stat

import httpx

from tests.core.providers.conftest import Server
from tests.web.cli.conftest import Dirs, WebProcess, run_lovia, start_web


def _stream_text(client: httpx.Client, message: str) -> tuple[list[str], str]:
    events: list[str] = []
    text = ""
    with client.stream("POST", "/api/chat/stream", json={"message": message}) as response:
        assert response.status_code == 200, response.read()
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                events.append(event)
            elif line.startswith("data: ") and event == "text_delta":
                text += json.loads(line[6:])["delta"]
            if event == "done":
                break
    return events, text


def test_fresh_folder_serves_setup_then_chats_once_a_model_is_saved(
    dirs: Dirs, web: list[WebProcess], llmock: Server
) -> None:
    process = start_web(dirs)
    web.append(process)
    process.wait_ready()
    client = process.client
    info = client.get("/api/info").json()
    assert info["configured"] is False and info["features"]["model_config"] is True
    blocked = client.post("/api/chat/stream", json={"message": "hi"})
    assert blocked.status_code == 503 and blocked.json()["hint"]
    out = process.output()
    assert "none configured yet" in out and process.url in out
    probe = client.post(
        "/api/config/test", json={"model": "gpt-4o-mini", "base_url": llmock.url + "/v1"}
    )
    assert probe.json()["status"] == "ok", probe.text
    saved = client.post(
        "/api/config/models",
        json={"model": "gpt-4o-mini", "base_url": llmock.url + "/v1", "api_key": "sk-e2e-12345678"},
    )
    assert saved.status_code == 201, saved.text
    assert client.get("/api/info").json()["configured"] is True
    httpx.post(
        llmock.url + "/_llmock/scenario",
        json={"behaviors": [{"type": "reply", "text": "Hello from the mock", "times": None}]},
        timeout=10,
    ).raise_for_status()
    events, text = _stream_text(client, "say hello")
    assert events[0] == "session" and events[-1] == "done", events
    assert text == "Hello from the mock"
    config = dirs.home / ".lovia" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert (dirs.project / ".lovia" / "lovia.db").exists()
    assert process.stop() == 0


def test_a_saved_config_is_served_on_the_next_start_with_a_summary(
    dirs: Dirs, web: list[WebProcess], llmock: Server
) -> None:
    (dirs.home / ".lovia").mkdir()
    (dirs.home / ".lovia" / "config.json").write_text(
        json.dumps(
            {"models": [{"id": "local", "model": "gpt-4o-mini", "base_url": llmock.url + "/v1"}]}
        )
    )
    process = start_web(dirs, "--readonly")
    web.append(process)
    process.wait_ready()
    assert process.client.get("/api/info").json()["configured"] is True
    out = process.output()
    assert "model:      local (openai:gpt-4o-mini" in out
    assert f"workspace:  {dirs.project.resolve()} (readonly)" in out
    assert "chats:" in out and ".lovia/lovia.db" in out


def test_check_reports_reachable_auth_failure_and_missing_config(
    dirs: Dirs, llmock: Server
) -> None:
    missing = run_lovia(dirs, "web", "--check")
    assert missing.returncode == 2 and "no model is configured" in missing.stdout
    (dirs.home / ".lovia").mkdir()
    (dirs.home / ".lovia" / "config.json").write_text(
        json.dumps(
            {
                "models": [
                    {
                        "model": "gpt-4o-mini",
                        "base_url": llmock.url + "/v1",
                        "api_key": "sk-abcdefgh1234",
                    }
                ]
            }
        )
    )
    ok = run_lovia(dirs, "web", "--check")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "…1234" in ok.stdout and "sk-abcdefgh1234" not in ok.stdout
    assert "result:   ok" in ok.stdout and "flavour:  openai" in ok.stdout
    httpx.post(
        llmock.url + "/_llmock/scenario",
        json={"behaviors": [{"type": "fail", "status": 401, "times": None}]},
        timeout=10,
    ).raise_for_status()
    refused = run_lovia(dirs, "web", "--check")
    assert refused.returncode == 2 and "result:   auth" in refused.stdout
    rejected = run_lovia(dirs, "web", "--check", "--app", "x:y")
    assert rejected.returncode == 2 and "--app" in rejected.stderr


def test_bad_input_is_a_message_and_exit_2_never_a_traceback(dirs: Dirs) -> None:
    # A sample through the real script; test_cli_main.py covers every case in-process.
    (dirs.project / "mod_ok.py").write_text("value = 42\n")
    cases = [
        (("web", "--max-turns", "0"), {}, "--max-turns"),
        (("web",), {"LOVIA_PORT": "http"}, "LOVIA_PORT"),
        (("web", "--app", "mod_ok:value"), {}, "not an Agent"),
        (("web", "--bogus"), {}, "--help"),
    ]
    for args, env, needle in cases:
        result = run_lovia(dirs, *args, **env)  # type: ignore[arg-type]
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert needle in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr + result.stdout, (args, result.stderr)


def test_python_dash_m_lovia_web_is_the_same_command(dirs: Dirs) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "lovia.web", "--max-retries", "-2"],
        cwd=dirs.project,
        env=dirs.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "python -m lovia.web: error" in result.stderr


def test_broken_or_invalid_config_is_exit_2_naming_the_problem(dirs: Dirs) -> None:
    folder = dirs.project / ".lovia"
    folder.mkdir()
    for text, needle in [
        ("{oops", "not valid JSON"),
        ('{"models": [{"model": "m", "flavor": "gemini"}]}', "models[0].flavor"),
    ]:
        (folder / "config.json").write_text(text)
        result = run_lovia(dirs, "web")
        assert result.returncode == 2 and needle in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_help_is_grouped_with_defaults_and_dispatcher_lists_web(dirs: Dirs) -> None:
    result = run_lovia(dirs, "web", "--help")
    assert result.returncode == 0
    for heading in ("model:", "agent:", "server:", "advanced:"):
        assert f"\n{heading}\n" in result.stdout
    assert "default: 50" in result.stdout and "default: 300" in result.stdout
    assert "LOVIA_PROVIDER_TIMEOUT" in result.stdout
    top = run_lovia(dirs, "--help")
    assert "web" in top.stdout and "(needs lovia-web)" not in top.stdout
    module = run_lovia(dirs, "--version")
    assert module.stdout.startswith("lovia ")


def test_the_readme_run_command_is_the_one_tested_here(dirs: Dirs, web: list[WebProcess]) -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    commands = [line.split("#")[0].split() for line in readme.splitlines()]
    assert ["uv", "run", "lovia", "web"] in commands
    process = start_web(dirs)  # what `uv run lovia web` runs, in a fresh folder
    web.append(process)
    process.wait_ready()
    assert process.client.get("/api/info").json()["configured"] is False


def test_a_kill_during_config_writes_leaves_a_valid_file(dirs: Dirs, web: list[WebProcess]) -> None:
    import os
    import signal
    import threading

    from lovia.web.config.files import load_config

    process = start_web(dirs)
    web.append(process)
    process.wait_ready()
    first = threading.Event()

    def writer() -> None:
        with httpx.Client(base_url=process.url, timeout=10) as client:
            for i in range(200):
                try:
                    client.post(
                        "/api/config/models",
                        json={"model": f"m{i}", "base_url": "http://127.0.0.1:9/v1"},
                    )
                except httpx.TransportError:
                    return
                first.set()

    thread = threading.Thread(target=writer)
    thread.start()
    assert first.wait(30)
    os.kill(process.proc.pid, signal.SIGKILL)
    thread.join(30)
    process.proc.wait(10)
    loaded = load_config(cwd=dirs.project, home=dirs.home)  # parses and validates
    assert 1 <= len(loaded.config.models) <= 200
    leftovers = [p.name for p in (dirs.home / ".lovia").iterdir() if p.name != "config.json"]
    assert all(name.startswith(".config-") for name in leftovers)  # at most a temp file
