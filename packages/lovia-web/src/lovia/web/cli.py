"""``lovia web`` (also ``python -m lovia.web``): serve the default agent, or an ``--app``.

Every option is a flag, else an environment variable, else a default (the parser's own
defaults are ``None``, so "not given" is visible). There are no model-connection flags: the
model lives in ``config.json`` (``lovia.web.config``) and is set up in the browser on the
first run. A bad value is a message and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from lovia.exceptions import UserError

if TYPE_CHECKING:
    from .config.files import ConfigFile
    from .config.schema import WebConfig

__all__ = [
    "Settings",
    "build_parser",
    "main",
    "resolve_settings",
    "serve_app",
]

_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_DEFAULT_HOST = "127.0.0.1"
_DEFAULT_PORT = 8000
_DEFAULT_TITLE = "lovia"
_AGENT_FLAGS = (
    "instructions_file",
    "instructions",
    "skills_dir",
    "memory_dir",
    "no_memory",
    "no_subagents",
    "workspace",
    "workspace_mode",
    "max_tokens",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nRun `{self.prog} --help` for the options.\n")


def _int_at_least(minimum: int, what: str) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{what} must be a whole number, got {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{what} must be at least {minimum}, got {value}")
        return value

    return convert


def _port(text: str) -> int:
    value = _int_at_least(1, "the port")(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"the port must be at most 65535, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the timeout must be a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"the timeout must be a positive number, got {text!r}")
    return value


def _log_level(text: str) -> str:
    word = text.strip().lower()
    if word not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"unknown log level {text!r} (use one of: {', '.join(_LOG_LEVELS)})"
        )
    return word


def _flag(text: str) -> bool:
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected 1 or 0, got {text!r}")


def _mode(text: str) -> str:
    word = text.strip().lower()
    if word not in ("readonly", "coding", "trusted", "none"):
        raise argparse.ArgumentTypeError(
            f"unknown workspace mode {text!r} (use readonly, coding, trusted or none)"
        )
    return word


def build_parser(prog: str = "lovia web") -> argparse.ArgumentParser:
    """The parser; every default is ``None`` (the help shows the effective ones)."""
    from lovia.http_config import DEFAULT_TIMEOUT

    from .default_agent import DEFAULT_MAX_RETRIES, DEFAULT_MAX_TURNS

    parser = _Parser(
        prog=prog,
        description=(
            "Serve lovia's default agent (tools, plugins and a coding workspace on the current "
            "folder) as a chat UI and an HTTP API, or your own agent with --app. The model is "
            "configured in the browser on the first run and kept in ~/.lovia/config.json (or "
            "./.lovia/config.json). Each option may also come from the environment variable "
            "shown; a flag beats the variable."
        ),
        epilog="Docs: docs/cli.md (options) and docs/web-config.md (config.json).",
    )
    model = parser.add_argument_group("model")
    model.add_argument(
        "--check",
        action="store_true",
        default=None,
        help="show the configured model connection, probe it and exit "
        "(0 reachable, 2 auth failure or no model)",
    )
    agent = parser.add_argument_group("agent")
    agent.add_argument(
        "--app",
        metavar="MODULE:ATTR",
        help="serve your own Agent, {name: Agent} mapping or factory instead (LOVIA_APP)",
    )
    agent.add_argument(
        "--instructions-file",
        metavar="PATH",
        help="the agent's instructions from a file (LOVIA_INSTRUCTIONS_FILE; "
        "default: ./AGENTS.md, else generic)",
    )
    agent.add_argument("--instructions", metavar="TEXT", help="the agent's instructions as text")
    agent.add_argument(
        "--skills-dir",
        metavar="DIR",
        action="append",
        help="a skills folder, repeatable (LOVIA_SKILLS_DIR, "
        f"'{os.pathsep}'-separated; default: ./.agents/skills when present)",
    )
    agent.add_argument(
        "--memory-dir",
        metavar="DIR",
        help="long-term memory folder (LOVIA_MEMORY_DIR; default: ./.lovia/memory)",
    )
    agent.add_argument("--no-memory", action="store_true", default=None, help="no Memory plugin")
    agent.add_argument(
        "--no-subagents", action="store_true", default=None, help="no Subagents plugin"
    )
    agent.add_argument(
        "--workspace",
        metavar="DIR",
        help="the folder the agent works in (LOVIA_WORKSPACE; default: .)",
    )
    modes = agent.add_mutually_exclusive_group()
    modes.add_argument(
        "--readonly",
        dest="workspace_mode",
        action="store_const",
        const="readonly",
        help="read files only, no shell (LOVIA_WORKSPACE_MODE=readonly; default: coding)",
    )
    modes.add_argument(
        "--trusted",
        dest="workspace_mode",
        action="store_const",
        const="trusted",
        help="no approval prompts for writes and commands (LOVIA_WORKSPACE_MODE=trusted)",
    )
    modes.add_argument(
        "--no-workspace",
        dest="workspace_mode",
        action="store_const",
        const="none",
        help="no workspace at all (LOVIA_WORKSPACE_MODE=none)",
    )
    server = parser.add_argument_group("server")
    server.add_argument(
        "--host", help=f"address to listen on (LOVIA_HOST; default: {_DEFAULT_HOST})"
    )
    server.add_argument(
        "--port",
        type=_port,
        metavar="N",
        help=f"port to listen on (LOVIA_PORT; default: {_DEFAULT_PORT})",
    )
    server.add_argument(
        "--token",
        help="require this token (LOVIA_WEB_TOKEN; default: none on loopback, "
        "generated on any other host)",
    )
    server.add_argument("--title", help=f"the UI's title (LOVIA_TITLE; default: {_DEFAULT_TITLE})")
    server.add_argument(
        "--no-followups",
        action="store_true",
        default=None,
        help="no follow-up suggestions (LOVIA_FOLLOWUPS=0)",
    )
    server.add_argument(
        "--db",
        metavar="PATH",
        help="the chat database: a SQLite file or a postgresql:// URL "
        "(LOVIA_DB; default: ./.lovia/lovia.db)",
    )
    server.add_argument(
        "--workers",
        metavar="N",
        type=_int_at_least(1, "--workers"),
        help="worker processes on the one port (LOVIA_WORKERS; default: 1); more than one "
        "needs --db postgresql://... and --broker (docs/web-scale.md)",
    )
    server.add_argument(
        "--broker",
        metavar="URL",
        help="the run engine's message broker, e.g. amqp://guest:guest@127.0.0.1:5672// "
        "(LOVIA_BROKER): this server becomes one worker of several on the same --db",
    )
    advanced = parser.add_argument_group("advanced")
    advanced.add_argument(
        "--max-turns",
        metavar="N",
        type=_int_at_least(1, "--max-turns"),
        help=f"model calls per run (LOVIA_MAX_TURNS; default: {DEFAULT_MAX_TURNS})",
    )
    advanced.add_argument(
        "--max-tokens",
        metavar="N",
        type=_int_at_least(1, "--max-tokens"),
        help="reply tokens per model call (LOVIA_MAX_TOKENS; default: the provider's)",
    )
    advanced.add_argument(
        "--max-retries",
        metavar="N",
        type=_int_at_least(0, "--max-retries"),
        help=f"provider retries (LOVIA_MAX_RETRIES; default: {DEFAULT_MAX_RETRIES})",
    )
    advanced.add_argument(
        "--provider-timeout",
        type=_seconds,
        metavar="SECONDS",
        help=f"provider read timeout (LOVIA_PROVIDER_TIMEOUT; default: {DEFAULT_TIMEOUT:g})",
    )
    advanced.add_argument(
        "--trust-env",
        action="store_true",
        default=None,
        help="let providers use proxy variables and .netrc (LOVIA_PROVIDER_TRUST_ENV=1)",
    )
    advanced.add_argument(
        "--log-level",
        type=_log_level,
        help=f"log level: {', '.join(_LOG_LEVELS)} (LOVIA_LOG_LEVEL; default: warning)",
    )
    return parser


@dataclass(frozen=True, slots=True)
class Settings:
    """Every option, resolved: flag, then environment, then default."""

    check: bool
    app: str | None
    instructions_file: str | None
    instructions: str | None
    skills_dirs: list[str]
    memory_dir: str | None
    no_memory: bool
    no_subagents: bool
    workspace: str | None
    workspace_mode: str
    host: str
    port: int
    token: str | None
    title: str
    followups: bool
    db: str | None
    max_turns: int
    max_tokens: int | None
    max_retries: int
    provider_timeout: float | None
    trust_env: bool | None
    log_level: str
    workers: int = 1
    broker: str | None = None


def _env(
    environ: dict[str, str] | os._Environ[str], name: str, convert: Callable[[str], Any]
) -> Any:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return convert(raw.strip())
    except argparse.ArgumentTypeError as exc:
        raise UserError(f"{name}: {exc}", hint=f"fix or unset {name}") from None


def resolve_settings(
    args: argparse.Namespace, environ: dict[str, str] | os._Environ[str] | None = None
) -> Settings:
    """``args`` merged with the ``LOVIA_*`` variables and the defaults (``UserError`` for a
    bad variable)."""
    from .default_agent import (
        resolve_followups,
        resolve_max_retries,
        resolve_max_tokens,
        resolve_max_turns,
    )

    env = os.environ if environ is None else environ

    def pick(value: Any, name: str, convert: Callable[[str], Any] = str) -> Any:
        return value if value is not None else _env(env, name, convert)

    skills = args.skills_dir or [
        p for p in (env.get("LOVIA_SKILLS_DIR") or "").split(os.pathsep) if p.strip()
    ]
    token = args.token if args.token is not None else env.get("LOVIA_WEB_TOKEN")
    if token is not None and not token.strip():
        raise UserError("the token must not be blank", hint="omit --token to go without one")
    return Settings(
        check=bool(args.check),
        app=pick(args.app, "LOVIA_APP"),
        instructions_file=pick(args.instructions_file, "LOVIA_INSTRUCTIONS_FILE"),
        instructions=args.instructions,
        skills_dirs=skills,
        memory_dir=pick(args.memory_dir, "LOVIA_MEMORY_DIR"),
        no_memory=bool(args.no_memory),
        no_subagents=bool(args.no_subagents),
        workspace=pick(args.workspace, "LOVIA_WORKSPACE"),
        workspace_mode=pick(args.workspace_mode, "LOVIA_WORKSPACE_MODE", _mode) or "coding",
        host=(pick(args.host, "LOVIA_HOST") or _DEFAULT_HOST).strip(),
        port=pick(args.port, "LOVIA_PORT", _port) or _DEFAULT_PORT,
        token=token.strip() if token else None,
        title=pick(args.title, "LOVIA_TITLE") or _DEFAULT_TITLE,
        followups=resolve_followups(bool(args.no_followups), env.get("LOVIA_FOLLOWUPS")),
        db=pick(args.db, "LOVIA_DB"),
        max_turns=resolve_max_turns(
            pick(args.max_turns, "LOVIA_MAX_TURNS", _int_at_least(1, "the value"))
        ),
        max_tokens=resolve_max_tokens(
            pick(args.max_tokens, "LOVIA_MAX_TOKENS", _int_at_least(1, "the value"))
        ),
        max_retries=resolve_max_retries(
            pick(args.max_retries, "LOVIA_MAX_RETRIES", _int_at_least(0, "the value"))
        ),
        provider_timeout=pick(args.provider_timeout, "LOVIA_PROVIDER_TIMEOUT", _seconds),
        trust_env=pick(args.trust_env, "LOVIA_PROVIDER_TRUST_ENV", _flag),
        log_level=pick(args.log_level, "LOVIA_LOG_LEVEL", _log_level) or "warning",
        workers=pick(args.workers, "LOVIA_WORKERS", _int_at_least(1, "LOVIA_WORKERS")) or 1,
        broker=(pick(args.broker, "LOVIA_BROKER") or "").strip() or None,
    )


# -- main ---------------------------------------------------------------------------------


def _say(text: str = "") -> None:
    print(text, flush=True)


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


def _browsable(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def _is_loopback(host: str) -> bool:
    from .auth import is_loopback

    return is_loopback(host)


def _check(settings: Settings) -> int:
    from .config.files import load_config
    from .config.probe import validate_connection
    from .config.runtime import mask_key

    loaded = load_config()
    profile = loaded.config.chat_profile
    where = f"{loaded.scope} config {loaded.path}" + ("" if loaded.exists else " (not created yet)")
    if profile is None:
        _say(f"no model is configured ({where})")
        _say("run `lovia web` and add one in the browser")
        return 2
    conn = profile.connection()
    if conn.api_key:
        key = mask_key(conn.api_key) or "set"
    elif conn.env_key:
        key = f"none in the config; using {conn.flavor.upper()}_API_KEY from the environment"
    elif conn.keyless_gateway:
        key = "none (a keyless gateway on this machine)"
    else:
        key = "none"
    _say(f"config:   {where}")
    _say(f"model:    {profile.id}: {conn.model}")
    _say(f"flavour:  {conn.flavor}")
    _say(f"endpoint: {conn.base_url}")
    _say(f"key:      {key}")
    if not conn.complete:
        _say(f"result:   no key for the official endpoint {conn.base_url}")
        return 2
    result = asyncio.run(validate_connection(conn))
    _say(f"result:   {result.status}: {result.message}")
    if result.hint:
        _say(f"hint:     {result.hint}")
    if result.note:
        _warn(result.note)
    if result.context_window:
        _say(f"window:   {result.context_window} tokens ({result.window_source})")
    return 0 if result.ok else 2


@dataclass
class _Served:
    target: Any
    """What ``serve`` takes: an Agent, a mapping, or ``{}`` with a config runtime."""
    options: dict[str, Any]
    summary: list[str]


def _accepted(**options: Any) -> dict[str, Any]:
    """The options this lovia.web's ``create_app`` takes (parts built in parallel, such as
    follow-ups and the question channel, are passed once it has them)."""
    import inspect

    from .app import create_app

    known = inspect.signature(create_app).parameters
    return {k: v for k, v in options.items() if k in known}


def _builder(settings: Settings, store: Any, channel: Any = None) -> Callable[[WebConfig], Any]:
    from .default_agent import (
        build_default_agent,
        make_provider,
        resolve_instructions,
        resolve_memory,
        resolve_skills_dirs,
        resolve_workspace,
    )

    instructions = resolve_instructions(settings.instructions_file, settings.instructions)
    skills = resolve_skills_dirs(settings.skills_dirs)
    memory = resolve_memory(settings.memory_dir, disabled=settings.no_memory)
    workspace = resolve_workspace(settings.workspace, settings.workspace_mode)

    def build(config: WebConfig) -> Any:
        profile = config.chat_profile
        assert profile is not None  # only called for a configured document
        vision = config.profile(config.roles.vision)
        return build_default_agent(
            make_provider(profile),
            vision_model=make_provider(vision) if vision and vision is not profile else None,
            instructions=instructions,
            skills_dirs=skills,
            memory_dir=memory,
            subagents=not settings.no_subagents,
            workspace=workspace,
            search=config.search,
            max_tokens=settings.max_tokens,
            max_retries=settings.max_retries,
            question_channel=channel,
            scheduling_store=store,
        )

    return build


def _default_server(settings: Settings, store: Any, loaded: ConfigFile) -> _Served:
    from lovia.tools.human import HumanChannel

    from .config.files import ensure_gitignored
    from .config.runtime import ConfigRuntime

    ensure_gitignored()
    channel = HumanChannel()
    runtime = ConfigRuntime(loaded, _builder(settings, store, channel))
    summary = []
    profile = loaded.config.chat_profile
    if runtime.configured and profile is not None:
        summary.append(
            f"model:      {profile.id} ({profile.flavor}:{profile.model} at "
            f"{profile.connection().base_url})"
        )
    else:
        summary.append("model:      none configured yet: open the URL above and add one")
        summary.append(
            "            (an OpenAI- or Anthropic-compatible endpoint; a local "
            "Ollama, llama.cpp or vLLM needs no key)"
        )
    mode = settings.workspace_mode
    folder = Path(settings.workspace or ".").expanduser().resolve()
    summary.append("workspace:  none" if mode == "none" else f"workspace:  {folder} ({mode})")
    memory = "off" if settings.no_memory else str(_memory_dir(settings))
    summary.append(f"memory:     {memory}")
    summary.append(f"config:     {loaded.path} ({loaded.scope})")
    options = {"config_runtime": runtime, **_accepted(question_channel=channel)}
    return _Served({}, options, summary)


def _memory_dir(settings: Settings) -> Path:
    from .default_agent import resolve_memory

    found = resolve_memory(settings.memory_dir)
    assert found is not None
    return found


def _app_server(settings: Settings, store: Any) -> _Served:
    from .default_agent import load_app_target

    assert settings.app is not None
    target = load_app_target(settings.app)
    given = [f for f in _AGENT_FLAGS if _given(settings, f)]
    if given:
        names = {"workspace_mode": "--readonly/--trusted/--no-workspace"}
        flags = ", ".join(names.get(f, "--" + f.replace("_", "-")) for f in given)
        _warn(f"--app serves your own agent: {flags} ignored")
    agents = [target.name] if not isinstance(target, dict) else list(target)
    summary = [f"app:        {settings.app} (agents: {', '.join(agents)})"]
    has_workspace = any(
        a.workspace is not None
        for a in ([target] if not isinstance(target, dict) else target.values())
    )
    if has_workspace and not _is_loopback(settings.host):
        _warn("an --app agent with a workspace is reachable beyond this machine")
    return _Served(target, {}, summary)


def _given(settings: Settings, name: str) -> bool:
    value = getattr(settings, "skills_dirs" if name == "skills_dir" else name)
    if name == "workspace_mode":
        return bool(value != "coding")
    return bool(value)


def serve_app(target: Any, **options: Any) -> None:
    """Serve until interrupted (the seam the CLI serves through: ``lovia.web.serve``, which
    prints the access banner and generates a token off loopback)."""
    from .app import serve

    serve(target, **options)


def main(argv: Sequence[str] | None = None, prog: str = "lovia web") -> int:
    """Run ``lovia web`` with ``argv``; returns the exit code (2 for any usage problem)."""
    parser = build_parser(prog)
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    args.argv = given  # a --workers parent starts its workers with the same options
    try:
        return _main(args, prog)
    except UserError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 2
    except OSError as exc:  # an unwritable folder for .lovia/, the db or the config
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"{prog}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        print("hint: run it in a folder you can write to, or pass --db", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _ensure_bindable(host: str, port: int) -> None:
    """A ``UserError`` now, before the banner, when ``host:port`` cannot be listened on."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UserError(
                f"port {port} is already in use on {host}",
                hint="stop the other server or pass another --port (or LOVIA_PORT)",
            ) from None
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="check --host and --port (or LOVIA_HOST and LOVIA_PORT)",
        ) from None


_WORKER_FD = "LOVIA_WEB_WORKER_FD"
"""Set by a ``--workers`` parent for its workers: the listening socket they share."""
_STOP_SECONDS = 20.0


def _is_postgres(db: str | None) -> bool:
    return bool(db) and str(db).strip().lower().startswith(("postgresql://", "postgres://"))


def _redacted(url: str) -> str:
    """``url`` without its password (what the banner prints)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _check_scale(settings: Settings, postgres: bool) -> None:
    """Usage errors for ``--workers``/``--broker`` before anything starts."""
    if (settings.workers > 1 or settings.broker) and not postgres:
        raise UserError(
            "several workers need the chats in PostgreSQL; SQLite serves one process",
            hint="pass --db postgresql://user@host/db (or LOVIA_DB), or drop --workers/--broker",
        )
    if settings.workers > 1 and not settings.broker:
        raise UserError(
            "several workers need the run engine's message broker",
            hint="pass --broker amqp://guest:guest@127.0.0.1:5672// (RabbitMQ; or LOVIA_BROKER)",
        )
    if settings.broker:  # here, not in each worker after its banner
        from .scale.engine import check_broker_url, probe_broker

        check_broker_url(settings.broker)
        probe_broker(settings.broker)


def _scale_options(settings: Settings, fd: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if fd is not None:
        options["fd"] = int(fd)
    if settings.broker:
        from .scale.engine import RunEngine

        schema = ""
        if settings.db and "schema=" in settings.db:
            schema = "-" + settings.db.split("schema=", 1)[1].split("&", 1)[0]
        options["engine"] = RunEngine(settings.broker, queue=f"lovia-runs{schema}")
    return options


def _run_workers(settings: Settings, argv: list[str], prog: str) -> int:
    """Serve with ``settings.workers`` processes sharing one listening socket: each is this
    command again (told the socket's descriptor) and one worker of the cluster. Returns when
    they have all exited; a signal here stops them all."""
    import signal
    import socket
    import subprocess

    _ensure_bindable(settings.host, settings.port)
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    env = {**os.environ, _WORKER_FD: str(sock.fileno())}
    if settings.token is None and not _is_loopback(settings.host):
        from .auth import generate_token

        # one token for the whole server: each worker generating its own would refuse the
        # requests the kernel hands it with another worker's token
        env["LOVIA_WEB_TOKEN"] = generate_token()
    command = [sys.executable, "-m", "lovia.web", *argv]
    _say(f"{prog}: {settings.workers} workers on {_browsable(settings.host, settings.port)}")
    children = [
        subprocess.Popen(command, env=env, pass_fds=(sock.fileno(),))
        for _ in range(settings.workers)
    ]
    sock.close()  # the workers hold it now

    stopping: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        stopping.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        codes = [child.wait() for child in children]
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(_STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
    # a worker stopped by the signal forwarded to it reports that signal: a clean stop
    stopped = {0, -signal.SIGTERM, -signal.SIGINT} if stopping else {0}
    return max((abs(c) for c in codes if c not in stopped), default=0)


def _main(args: argparse.Namespace, prog: str) -> int:
    settings = resolve_settings(args)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    if settings.provider_timeout is not None:
        os.environ["LOVIA_PROVIDER_TIMEOUT"] = f"{settings.provider_timeout:g}"
    if settings.trust_env is not None:
        os.environ["LOVIA_PROVIDER_TRUST_ENV"] = "1" if settings.trust_env else "0"
    if settings.check:
        if settings.app:
            raise UserError(
                "--check probes the configured model; it cannot be used with --app",
                hint="drop --app (or LOVIA_APP)",
            )
        return _check(settings)
    from .config.files import load_config
    from .store.base import ChatStore

    postgres = _is_postgres(settings.db)
    _check_scale(settings, postgres)
    if settings.workers > 1 and os.environ.get(_WORKER_FD) is None:
        return _run_workers(settings, getattr(args, "argv", []), prog)
    loaded = None if settings.app else load_config()
    if postgres:
        assert settings.db is not None
        store = ChatStore.from_url(settings.db)
        where = _redacted(settings.db)
    else:
        db = Path(settings.db).expanduser() if settings.db else Path(".lovia") / "lovia.db"
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"cannot create {db.parent}: {exc.strerror}", hint="pass --db"
            ) from None
        if db.is_dir():
            raise UserError(
                f"the chat database {db} is a directory", hint="pass a file path to --db"
            )
        store = ChatStore.sqlite(str(db))
        where = str(db.resolve())
    served = (
        _app_server(settings, store) if loaded is None else _default_server(settings, store, loaded)
    )
    fd = os.environ.get(_WORKER_FD)
    if fd is None:
        _ensure_bindable(settings.host, settings.port)
    exposed = not _is_loopback(settings.host)
    _say(f"lovia web: serving at {_browsable(settings.host, settings.port)}")
    for line in served.summary:
        _say(line)
    _say(f"chats:      {where}")
    if exposed and loaded is not None and settings.workspace_mode == "trusted":
        _warn(
            "a trusted workspace (commands and writes without approval) is exposed beyond "
            "this machine; use --readonly or listen on 127.0.0.1"
        )
    serve_app(
        served.target,
        host=settings.host,
        port=settings.port,
        token=settings.token,
        store=store,
        title=settings.title,
        max_turns=settings.max_turns,
        log_level=settings.log_level,
        access_log=False,
        **_scale_options(settings, fd),
        **served.options,
        **_accepted(followups=settings.followups),
    )
    return 0
