"""Hostile inputs to ``lovia web`` found by probing: each a message and exit 2, no traceback,
and no secret echoed."""

from __future__ import annotations

import socket

import pytest
from lovia.exceptions import UserError
from pydantic import ValidationError

from tests.core.providers.conftest import Server
from tests.web.cli.conftest import Dirs, WebProcess, run_lovia, start_web


def _usage_error(result: object, needle: str) -> None:
    out = result.stdout + result.stderr  # type: ignore[attr-defined]
    assert result.returncode == 2, out  # type: ignore[attr-defined]
    assert needle in result.stderr, out  # type: ignore[attr-defined]
    assert "Traceback" not in out


def test_a_db_path_that_is_a_directory_is_exit_2(dirs: Dirs) -> None:
    (dirs.project / "chats").mkdir()
    _usage_error(run_lovia(dirs, "web", "--db", "chats"), "is a directory")


def test_a_taken_port_is_exit_2_with_a_hint(dirs: Dirs) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_lovia(dirs, "web", "--port", str(port))
    _usage_error(result, f"port {port} is already in use")
    assert "serving at" not in result.stdout
    assert "--port" in result.stderr


def test_credentials_in_base_url_are_refused_and_never_echoed() -> None:
    from lovia.web.config.schema import ModelProfile

    for url in ("http://user:s3cr3t-pw@127.0.0.1:9/v1", "http://user:s3cr3t-pw@127.0.0.1:9/v1\n"):
        with pytest.raises(ValidationError) as caught:
            ModelProfile.model_validate({"model": "m", "base_url": url})
        assert "s3cr3t-pw" not in str(caught.value)
        assert "api_key" in str(caught.value)


def test_an_app_with_two_colons_is_a_usage_error() -> None:
    from lovia.web.default_agent import load_app_target

    with pytest.raises(UserError, match="must be MODULE:ATTR"):
        load_app_target("os:path:sep")


def test_an_async_factory_is_named_without_a_runtime_warning(
    dirs: Dirs,
) -> None:
    (dirs.project / "fac.py").write_text("async def make():\n    return None\n")
    result = run_lovia(dirs, "web", "--app", "fac:make")
    _usage_error(result, "coroutine")
    assert "RuntimeWarning" not in result.stderr


def test_a_saved_key_is_in_no_answer_and_no_debug_log(
    dirs: Dirs, web: list[WebProcess], llmock: Server
) -> None:
    import httpx

    process = start_web(dirs, "--log-level", "debug", "--no-memory")
    web.append(process)
    process.wait_ready()
    client = process.client
    secret = "sk-probe-secret-98765"
    refused = client.post(
        "/api/config/models",
        json={"model": "gpt-4o-mini", "base_url": llmock.url + "/v1", "api_key": secret},
        headers={"Host": "evil.example"},
    )
    assert refused.status_code == 403
    saved = client.post(
        "/api/config/models",
        json={"model": "gpt-4o-mini", "base_url": llmock.url + "/v1", "api_key": secret},
    )
    assert saved.status_code == 201 and secret not in saved.text
    httpx.post(
        llmock.url + "/_llmock/scenario",
        json={"behaviors": [{"type": "reply", "text": "hi", "times": None}]},
        timeout=10,
    ).raise_for_status()
    with client.stream("POST", "/api/chat/stream", json={"message": "hello"}) as response:
        assert response.status_code == 200
        body = "".join(response.iter_text())
    assert "event: done" in body and secret not in body
    assert secret not in client.get("/api/config").text
    bad = client.put(
        "/api/config/models/gpt-4o-mini", json={"model": "m", "api_key": secret + " x"}
    )
    assert bad.status_code == 422 and secret not in bad.text
    assert process.stop() == 0
    assert secret not in process.output() and "Traceback" not in process.output()


def test_a_422_for_a_bad_write_reads_plainly() -> None:
    from lovia.web.config.files import config_error
    from lovia.web.config.schema import WebConfig

    with pytest.raises(ValidationError) as caught:
        WebConfig.model_validate({"roles": {"chat": "nope"}})
    message = config_error(caught.value, where=None).message
    assert message == "invalid configuration: roles.chat names an unknown model id 'nope'"
