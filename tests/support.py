"""Shared helpers for the test suite."""

from __future__ import annotations

import os
import socket

import pytest

IN_CI = os.environ.get("LOVIA_CI") == "1"


def require(available: bool, reason: str) -> None:
    """Skip the calling test when a real component is missing; under ``LOVIA_CI=1`` fail instead.

    CI installs and starts every component, so a missing one there is a broken pipeline,
    not a reason to skip.
    """
    if available:
        return
    if IN_CI:
        pytest.fail(f"required component missing under LOVIA_CI=1: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
