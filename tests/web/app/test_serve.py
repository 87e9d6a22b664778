"""``serve``: create_app under uvicorn, with the loopback rules for the server token."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from lovia.exceptions import UserError
from lovia.web import serve
from lovia.web.app import serve_banner

from ..conftest import scripted_agent


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``serve`` hands uvicorn, instead of serving forever in the test process."""
    seen: dict[str, Any] = {}

    def run(app: Any, **kwargs: Any) -> None:
        seen["app"] = app
        seen.update(kwargs)

    monkeypatch.setattr(uvicorn, "run", run)
    return seen


def test_serve_on_loopback_stays_open_and_always_has_8_background_runs(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    out = io.StringIO()
    serve(scripted_agent(), port=8123, db_path=tmp_path / "c.db", log_level="warning", out=out)
    assert captured["host"] == "127.0.0.1" and captured["port"] == 8123
    assert captured["log_level"] == "warning"  # the rest goes to uvicorn
    assert captured["app"].state.lovia.supervisor.max_background_runs == 8
    assert "token" not in out.getvalue() and "loopback" in out.getvalue()


def test_serve_on_a_public_host_generates_and_prints_a_token_and_link(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    out = io.StringIO()
    serve(scripted_agent(), host="0.0.0.0", port=9000, db_path=tmp_path / "c.db", out=out)
    token = re.search(r"generated server token: (\S+)", out.getvalue())
    assert token is not None and len(token.group(1)) >= 40
    assert f"http://0.0.0.0:9000/?token={token.group(1)}" in out.getvalue()


def test_serve_prints_an_explicit_token_stripped(captured: dict[str, Any], tmp_path: Path) -> None:
    out = io.StringIO()
    serve(scripted_agent(), host="::", token="  s3cret  ", db_path=tmp_path / "c.db", out=out)
    text = out.getvalue()
    assert "server token: s3cret\n" in text and "generated" not in text
    assert "http://[::]:8000/?token=s3cret" in text  # IPv6 bracketed


def test_a_custom_auth_suppresses_the_generated_token(
    captured: dict[str, Any], tmp_path: Path
) -> None:
    out = io.StringIO()
    serve(scripted_agent(), host="10.1.2.3", auth=lambda: None, db_path=tmp_path / "c.db", out=out)
    assert out.getvalue() == ""


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_background_runs": 3}, "8 background runs"),
        ({"no_such_option": 1}, "no_such_option"),
        ({"token": "   "}, "blank"),
        ({"token": "a", "auth": lambda: None}, "mutually exclusive"),
    ],
)
def test_serve_refuses_bad_options_before_listening(
    captured: dict[str, Any], tmp_path: Path, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(UserError, match=match):
        serve(scripted_agent(), db_path=tmp_path / "c.db", out=io.StringIO(), **options)
    assert "app" not in captured


def test_the_banner_brackets_ipv6_and_omits_the_link_without_a_ui() -> None:
    assert (
        serve_banner("::1", 80, "t", generated=False)[-1]
        == "lovia web: open http://[::1]:80/?token=t"
    )
    assert not any(
        "?token=" in line for line in serve_banner("::1", 80, "t", generated=True, ui=False)
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_for_real_on_all_interfaces_needs_the_printed_token(tmp_path: Path) -> None:
    port = _free_port()
    script = textwrap.dedent(
        f"""
        from lovia import Agent
        from lovia.testing import ScriptedProvider, text
        from lovia.web import serve
        agent = Agent(name="helper", model=ScriptedProvider([text("hi")]))
        serve(agent, host="0.0.0.0", port={port}, db_path={str(tmp_path / "c.db")!r},
              log_level="warning")
        """
    )
    errors = tmp_path / "stderr.txt"
    with (
        errors.open("w") as stderr,
        subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        ) as proc,
    ):
        try:
            _check_the_served_app(proc, port, errors)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def _check_the_served_app(proc: subprocess.Popen[str], port: int, errors: Path) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    token = re.search(r"generated server token: (\S+)", line)
    assert token is not None, line + errors.read_text()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20  # a real subprocess: poll until it listens
    while True:
        try:
            health = httpx.get(f"{base}/healthz")
            break
        except httpx.ConnectError:
            assert proc.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.05)
    assert health.status_code == 200  # open without the token
    assert httpx.get(f"{base}/api/info").status_code == 401
    bearer = {"Authorization": f"Bearer {token.group(1)}"}
    assert httpx.get(f"{base}/api/info", headers=bearer).status_code == 200
