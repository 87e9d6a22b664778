"""Hostile inputs to ``lovia web`` found by probing: each a message and exit 2, no traceback,
and no secret echoed."""

from __future__ import annotations

import socket

import pytest
from lovia.exceptions import UserError
from pydantic import ValidationError

from tests.web.cli.conftest import Dirs, run_lovia


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
