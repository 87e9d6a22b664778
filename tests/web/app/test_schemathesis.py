"""Schemathesis over the app's own OpenAPI schema, against a real uvicorn: for every
operation, bounded examples with a fixed seed; no 5xx, every status documented, every body
matching its schema. A scripted agent answers every chat."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, seed, settings
from hypothesis.errors import Unsatisfiable
from lovia import Agent
from lovia.testing import ScriptedProvider, text
from lovia.web import create_app
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from ...support import free_port

MAX_EXAMPLES = 12
SEED = 20261201


@pytest.fixture
def live_url(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """The app on a real uvicorn in its own thread (the generated calls are blocking)."""
    agent = Agent(name="helper", model=ScriptedProvider([text("ok")] * 5000))
    app = create_app(agent, db_path=tmp_path / "fuzz.db")
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20  # a server in another thread: poll its flag, bounded
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(30)


def test_every_operation_conforms_to_the_schema(live_url: tuple[str, Any]) -> None:
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    url, app = live_url
    schema = schemathesis.openapi.from_dict(app.openapi())
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()  # the schema itself is valid
        operations.append(result.ok())
    assert len(operations) >= 10
    failures: list[str] = []
    modes = [(mode, operation) for mode in ("positive", "negative") for operation in operations]
    for mode, operation in modes:

        @seed(SEED)
        @settings(
            max_examples=MAX_EXAMPLES if mode == "positive" else MAX_EXAMPLES // 2,
            database=None,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        @given(case=operation.as_strategy(GenerationMode(mode)))
        def check(case: Any) -> None:
            case.call_and_validate(base_url=url, checks=checks, timeout=30)

        try:
            check()
        except Unsatisfiable:  # nothing of this operation can be made invalid
            assert mode == "negative", operation.label
        except Exception as exc:  # noqa: BLE001 - collect every operation's failure
            failures.append(f"{mode} {operation.label}: {type(exc).__name__}: {exc}"[:3000])
    assert not failures, "\n\n".join(failures)
