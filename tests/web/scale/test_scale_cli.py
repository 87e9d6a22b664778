"""``lovia web --workers N --db postgresql://... --broker amqp://...``: the usage errors, the
options it hands ``create_app``, and a real two-worker server on one port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from lovia.web import cli

from tests.support import free_port, port_open, require

from .conftest import BROKER, ROOT, poll

PG = "postgresql://u@127.0.0.1/db"
AMQP = "amqp://guest:guest@127.0.0.1:5672//"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("LOVIA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LOVIA_SCALE_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "_ensure_bindable", lambda host, port: None)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--workers", "2"], "PostgreSQL"),
        (["--workers", "2", "--db", "chats.db", "--broker", AMQP], "PostgreSQL"),
        (["--broker", AMQP], "PostgreSQL"),
        (["--workers", "2", "--db", "postgresql://u@127.0.0.1/db"], "--broker"),
        (["--workers", "0"], "--workers must be at least 1"),
        # refused before any worker starts (or any "serving at" is printed)
        (["--db", PG, "--broker", "redis://127.0.0.1:6379/0"], "RabbitMQ"),
        (["--workers", "2", "--db", PG, "--broker", "http://127.0.0.1:5672"], "amqp://"),
        (["--workers", "2", "--db", PG, "--broker", "amqp://guest:guest@127.0.0.1:1//"], "reach"),
    ],
)
def test_several_workers_need_postgres_and_a_broker(
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    needle: str,
) -> None:
    served: list[object] = []
    monkeypatch.setattr(cli, "serve_app", lambda *a, **k: served.append(a))
    monkeypatch.setattr(cli, "_run_workers", lambda *a, **k: served.append(a))
    try:
        code = cli.main(["--app", "tests.web.scale.scaleapp:agent", *argv], "lovia web")
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert needle in err
    assert "serving at" not in out
    assert "hint:" in err or "--help" in err
    assert not served


def test_workers_come_from_the_environment(folder: Path) -> None:
    args = cli.build_parser().parse_args([])
    settings = cli.resolve_settings(args, {"LOVIA_WORKERS": "3", "LOVIA_BROKER": AMQP})
    assert (settings.workers, settings.broker) == (3, AMQP)
    assert cli.resolve_settings(args, {}).workers == 1


def test_a_broker_makes_the_server_a_worker(
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pg_dsn: str,
    pg_schema: str,
) -> None:
    require(port_open("127.0.0.1", 5672), "no RabbitMQ at 127.0.0.1:5672 (the run engine)")
    seen: dict[str, object] = {}
    monkeypatch.setattr(cli, "serve_app", lambda target, **options: seen.update(options))
    db = f"{pg_dsn}?schema={pg_schema}"
    argv = ["--app", "tests.web.scale.scaleapp:agent", "--db", db, "--broker", AMQP]
    assert cli.main(argv) == 0
    from lovia.web.scale import RunEngine
    from lovia.web.store.postgres import PostgresChatStore

    assert isinstance(seen["store"], PostgresChatStore)
    engine = seen["engine"]
    assert isinstance(engine, RunEngine)
    assert engine.queue == f"lovia-runs-{pg_schema}"  # one queue per deployment
    assert "fd" not in seen
    assert f"chats:      {db}" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_two_workers_share_one_port_and_stop_together(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    from .conftest import _delete_queue

    require(port_open("127.0.0.1", 5672), "no RabbitMQ at 127.0.0.1:5672 (the run engine)")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOVIA_")}
    env.update(LOVIA_SCALE_DIR=str(tmp_path), PYTHONPATH=str(ROOT), HOME=str(tmp_path))
    schema = f"{pg_schema}"
    command = [sys.executable, "-m", "lovia.web", "--app", "tests.web.scale.scaleapp:agent"]
    command += ["--workers", "2", "--port", str(port), "--broker", BROKER]
    command += ["--db", f"{pg_dsn}?schema={schema}"]
    log = tmp_path / "out.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=sink)
    try:

        def healthy() -> bool:
            assert proc.poll() is None, "the server exited"
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).is_success
            except httpx.TransportError:
                return False

        await poll(healthy, "the workers to start", 40)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(4):
                r = await client.post("/api/chat", json={"message": f"hi {uuid.uuid4().hex}"})
                assert r.status_code == 200, r.text
                assert r.json()["output"].startswith("hello: hi")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(40) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        _delete_queue(f"lovia-runs-{schema}")
    printed = log.read_text()
    assert printed.count("lovia web: serving at") == 2  # two workers, one port
