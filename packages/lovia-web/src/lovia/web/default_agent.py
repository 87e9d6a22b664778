"""The agent ``lovia web`` serves when no ``--app`` is given, and the rules that resolve its
settings.

``build_default_agent`` composes the built-in tools (``now``, ``read_page``,
``http_request``, web search, ``ask_human``), the plugins (Skills when a skills folder is
found, Todo, Memory with background curation, Scheduling when lovia.web provides it,
Subagents with a child that keeps the tools, Skills, Todo and the workspace), a ``coding``
workspace on the current folder (its ``.lovia/`` state denied) and instructions from
``AGENTS.md``. The ``resolve_*`` helpers turn a flag-or-environment value into a checked
setting, raising ``UserError`` (the CLI exits 2) for a value that cannot work.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lovia.agent import Agent
from lovia.exceptions import UserError
from lovia.providers.base import ModelSettings

from .config.schema import SearchConfig

if TYPE_CHECKING:
    from lovia.plugin import Plugin
    from lovia.tools.base import Tool
    from lovia.tools.human import HumanChannel

__all__ = [
    "DEFAULT_AGENT_NAME",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_TURNS",
    "GENERIC_INSTRUCTIONS",
    "SURFACE_NOTE",
    "WORKSPACE_MODES",
    "build_default_agent",
    "load_app_target",
    "make_provider",
    "resolve_followup_model",
    "resolve_followups",
    "resolve_instructions",
    "resolve_max_retries",
    "resolve_max_tokens",
    "resolve_max_turns",
    "resolve_memory",
    "resolve_skills_dirs",
    "resolve_tools",
    "resolve_workspace",
]

_log = logging.getLogger("lovia.web")

DEFAULT_AGENT_NAME = "lovia"


def _run_default(name: str) -> Any:
    from lovia.runtime.config import RunConfig

    return next(f.default for f in fields(RunConfig) if f.name == name)


def _retry_default() -> int:
    from lovia.retry import RetryPolicy

    return RetryPolicy().max_attempts - 1


DEFAULT_MAX_TURNS: int = _run_default("max_turns")
"""Model calls per run (the core's ``RunConfig.max_turns``)."""
DEFAULT_MAX_RETRIES: int = _retry_default()
"""Provider retries after the first call (the core's ``RetryPolicy().max_attempts - 1``)."""
WORKSPACE_MODES = ("readonly", "coding", "trusted", "none")

GENERIC_INSTRUCTIONS = """\
You are lovia, a capable assistant working in the user's project folder. Use your tools: read
and edit files in the workspace, run commands, search the web and read pages, keep a todo list
for multi-step work, and remember what the user wants you to keep. Ask the user when a choice
is theirs to make. Be concise, and say what you changed."""

SURFACE_NOTE = """\
You are talking through lovia's web chat: replies render as Markdown (code blocks, tables and
Mermaid diagrams); workspace files can be linked by their relative path."""


# -- resolution helpers -----------------------------------------------------------------


def resolve_skills_dirs(value: Sequence[str] | None, *, cwd: Path | None = None) -> list[Path]:
    """Explicit dirs (each must exist), else ``./.agents/skills`` when present. A legacy
    ``./skills`` folder is not used (a hint says how)."""
    root = cwd or Path.cwd()
    if value:
        dirs = [root / Path(v).expanduser() for v in value if v.strip()]
        for d in dirs:
            if not d.is_dir():
                raise UserError(
                    f"skills dir {str(d)!r} does not exist or is not a directory",
                    hint="pass an existing folder to --skills-dir (or LOVIA_SKILLS_DIR)",
                )
        return dirs
    default = root / ".agents" / "skills"
    if default.is_dir():
        return [default]
    if (root / "skills").is_dir():
        _log.warning(
            "./skills is not read by default any more; move it to ./.agents/skills "
            "or pass --skills-dir skills"
        )
    return []


def resolve_memory(
    value: str | None, *, disabled: bool = False, cwd: Path | None = None
) -> Path | None:
    """The memory folder (default ``./.lovia/memory``), or ``None`` when disabled. A path
    that exists and is not a directory is an error."""
    if disabled:
        return None
    root = cwd or Path.cwd()
    path = root / Path(value).expanduser() if value else root / ".lovia" / "memory"
    if path.exists() and not path.is_dir():
        raise UserError(
            f"memory path {str(path)!r} is a file, not a directory",
            hint="pass a folder to --memory-dir (or LOVIA_MEMORY_DIR), or --no-memory",
        )
    return path


def resolve_instructions(file: str | None, text: str | None, *, cwd: Path | None = None) -> str:
    """``--instructions-file``, else ``--instructions``, else ``./AGENTS.md``, else generic."""
    root = cwd or Path.cwd()
    if file:
        path = root / Path(file).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(
                f"cannot read the instructions file {str(path)!r}: {type(exc).__name__}",
                hint="pass a readable UTF-8 file to --instructions-file",
            ) from None
    if text and text.strip():
        return text
    agents_md = root / "AGENTS.md"
    if agents_md.is_file():
        try:
            return agents_md.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            _log.warning("AGENTS.md is unreadable; using the generic instructions")
    return GENERIC_INSTRUCTIONS


def resolve_workspace(path: str | None, mode: str | None, *, cwd: Path | None = None) -> Any:
    """A local workspace on ``path`` (default ``.``) in ``mode`` (default ``coding``);
    ``None`` for mode ``none``. The ``.lovia/`` folder (chats, keys) is always denied."""
    chosen = (mode or "coding").strip().lower()
    if chosen not in WORKSPACE_MODES:
        raise UserError(
            f"unknown workspace mode {mode!r}", hint=f"use one of: {', '.join(WORKSPACE_MODES)}"
        )
    if chosen == "none":
        return None
    root = (cwd or Path.cwd()) / Path(path or ".").expanduser()
    if not root.is_dir():
        raise UserError(
            f"workspace {str(root)!r} is not a directory",
            hint="pass an existing folder to --workspace (or LOVIA_WORKSPACE)",
        )
    from lovia.workspace import Workspace

    return Workspace.local(root.resolve(), mode=chosen, denied_paths=[".lovia"])  # type: ignore[arg-type]


def _positive_int(value: str | int | None, what: str, *, minimum: int) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UserError(f"{what} must be a whole number, got {value!r}", hint=None) from None
    if number < minimum:
        raise UserError(f"{what} must be at least {minimum}, got {number}", hint=None)
    return number


def resolve_max_turns(value: str | int | None) -> int:
    return _positive_int(value, "--max-turns", minimum=1) or DEFAULT_MAX_TURNS


def resolve_max_retries(value: str | int | None) -> int:
    found = _positive_int(value, "--max-retries", minimum=0)
    return DEFAULT_MAX_RETRIES if found is None else found


def resolve_max_tokens(value: str | int | None) -> int | None:
    """The reply budget per model call; ``None`` leaves the provider's default."""
    return _positive_int(value, "--max-tokens", minimum=1)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def resolve_followups(disabled: bool, env: str | None) -> bool:
    """Follow-up suggestions: on, unless ``--no-followups`` or ``LOVIA_FOLLOWUPS=0``."""
    if disabled:
        return False
    if env is None:
        return True
    word = env.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise UserError(f"LOVIA_FOLLOWUPS must be 1 or 0, got {env!r}", hint="e.g. LOVIA_FOLLOWUPS=0")


def resolve_followup_model(spec: str | None) -> str | None:
    """A ``vendor:model`` for follow-ups; a spec that names no known vendor falls back to
    ``None`` (the chat model) with a warning."""
    if not spec or not spec.strip():
        return None
    from lovia.providers.registry import registered_prefixes

    prefix, sep, model = spec.strip().partition(":")
    if not sep or not model.strip() or prefix.lower() not in registered_prefixes():
        _log.warning("ignoring follow-up model %r: use 'vendor:model'", spec)
        return None
    return spec.strip()


def resolve_tools(
    search: SearchConfig | None = None,
    *,
    channel: HumanChannel | None = None,
    tavily_env: str | None = None,
) -> list[Tool]:
    """``now``, ``read_page``, ``http_request``, web search, and ``ask_human`` when a
    channel is given. Search: Tavily with a key (config, else ``TAVILY_API_KEY``), else
    DuckDuckGo when ``ddgs`` is installed, else none; ``off`` disables it."""
    from lovia.tools import ask_human, http_request, now, read_page

    search = search or SearchConfig()
    tools: list[Tool] = [now, read_page, http_request]
    found = _search_tool(search, tavily_env)
    if found is not None:
        tools.append(found)
    if channel is not None:
        tools.append(ask_human(channel))
    return tools


def _search_tool(search: SearchConfig, tavily_env: str | None) -> Tool | None:
    from lovia.tools import duckduckgo_search, tavily_search

    key = search.tavily_api_key or tavily_env
    if search.backend == "off":
        return None
    if search.backend == "tavily" or (search.backend == "auto" and key):
        if not key:
            raise UserError(
                "the tavily search backend needs a key", hint="set it in the settings page"
            )
        return tavily_search(key)
    if importlib.util.find_spec("ddgs") is not None:
        return duckduckgo_search()
    if search.backend == "ddg":
        raise UserError(
            "the ddg search backend needs the ddgs package",
            hint='install it with: pip install "lovia-core[ddg]"',
        )
    return None


# -- the agent --------------------------------------------------------------------------


def _scheduling(store: Any) -> Plugin | None:
    try:
        module = importlib.import_module("lovia.web.scheduling")
    except ImportError:
        return None
    plugin: Plugin = module.Scheduling(store)
    return plugin


def _describe_image(model: Any, vision_model: Any, workspace: Any) -> Tool | None:
    """``describe_image`` when a separate vision model is configured, the chat model has no
    vision, there is a workspace, and lovia.web provides the tool."""
    if vision_model is None or workspace is None or getattr(model, "supports_vision", False):
        return None
    try:
        vision = importlib.import_module("lovia.web.vision")
    except ImportError:
        return None
    found: Tool = vision.make_describe_image_tool(vision_model, workspace)
    return found


def build_default_agent(
    model: Any,
    *,
    instructions: str | None = None,
    skills_dirs: Sequence[Path] = (),
    memory_dir: Path | None = None,
    subagents: bool = True,
    workspace: Any = None,
    search: SearchConfig | None = None,
    max_tokens: int | None = None,
    max_retries: int | None = None,
    question_channel: HumanChannel | None = None,
    scheduling_store: Any = None,
    vision_model: Any = None,
    name: str = DEFAULT_AGENT_NAME,
) -> Agent[Any]:
    """The agent ``lovia web`` serves (see the module docstring).

    ``model`` is a Provider or a ``vendor:model`` string. ``workspace`` is what
    ``resolve_workspace`` returned (``None``: no workspace). Scheduling is added when
    ``scheduling_store`` is given and lovia.web has the plugin; ``describe_image`` when
    ``vision_model`` (the vision role's provider) is given and the chat model has no vision.
    """
    from lovia.plugins import Memory, Skills, Subagents, Todo
    from lovia.retry import RetryPolicy
    from lovia.tools import ask_human, current_date
    from lovia.tools.human import HumanChannel

    channel = question_channel if question_channel is not None else HumanChannel()
    base_tools = resolve_tools(search, tavily_env=os.environ.get("TAVILY_API_KEY"))
    describe = _describe_image(model, vision_model, workspace)
    if describe is not None:
        base_tools.append(describe)
    settings = ModelSettings(max_tokens=max_tokens)
    retry = RetryPolicy(
        max_attempts=(DEFAULT_MAX_RETRIES if max_retries is None else max_retries) + 1
    )
    shared: list[Plugin] = []
    if skills_dirs:
        shared.append(Skills(*skills_dirs))
    shared.append(Todo())
    plugins: list[Plugin] = list(shared)
    if memory_dir is not None:
        plugins.append(Memory(memory_dir, curate_in_background=True))
    if scheduling_store is not None:
        scheduling = _scheduling(scheduling_store)
        if scheduling is not None:
            plugins.append(scheduling)
    text = instructions if instructions is not None else GENERIC_INSTRUCTIONS
    if subagents:
        child = Agent(
            "worker",
            instructions=text,
            model=model,
            tools=base_tools,
            plugins=[*shared],
            workspace=workspace,
            settings=settings,
            retry=retry,
        )
        plugins.append(Subagents([child], max_concurrent=3))
    agent: Agent[Any] = Agent(
        name,
        instructions=text,
        model=model,
        tools=[*base_tools, ask_human(channel)],
        plugins=plugins,
        workspace=workspace,
        settings=settings,
        retry=retry,
    )
    agent = agent.with_instructions(lambda _ctx: SURFACE_NOTE)
    return agent.with_instructions(current_date())


# -- --app ------------------------------------------------------------------------------


def load_app_target(target: str) -> Agent[Any] | dict[str, Agent[Any]]:
    """``MODULE:ATTR`` to an Agent, a ``{name: Agent}`` mapping, or a factory returning one.

    Raises ``UserError`` for a missing colon, a module that does not import, a missing
    attribute, or anything of another type.
    """
    module_name, sep, attr = target.strip().partition(":")
    if not sep or not module_name.strip() or not attr.strip() or ":" in attr:
        raise UserError(
            f"--app {target!r} must be MODULE:ATTR", hint="e.g. --app myproject.agents:agent"
        )
    cwd = str(Path.cwd())
    if cwd not in sys.path:  # like `python -m`: the working folder's modules come first
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name.strip())
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's module
        raise UserError(
            f"--app: cannot import module {module_name!r}: {type(exc).__name__}: {exc}",
            hint="run from the folder that contains it, or check its name",
        ) from None
    obj: Any = module
    for part in attr.strip().split("."):
        if not hasattr(obj, part):
            raise UserError(
                f"--app: module {module_name!r} has no attribute {attr!r}",
                hint="name an Agent, a {name: Agent} mapping or a function returning one",
            )
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, Agent) and not isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001 - the user's factory
            raise UserError(
                f"--app: the factory {target!r} raised {type(exc).__name__}: {exc}", hint=None
            ) from None
    if inspect.iscoroutine(obj):
        obj.close()  # never awaited: say so instead of a RuntimeWarning
        raise UserError(
            f"--app {target!r} is an async function (it gave a coroutine)",
            hint="use a plain function that returns the Agent",
        )
    if isinstance(obj, Agent):
        return obj
    if isinstance(obj, Mapping) and obj and all(isinstance(v, Agent) for v in obj.values()):
        return {str(k): v for k, v in obj.items()}
    raise UserError(
        f"--app {target!r} gave a value of type {type(obj).__name__}, "
        "not an Agent or a {name: Agent} mapping",
        hint="point it at an Agent, a non-empty mapping of Agents, or a factory returning one",
    )


# -- from a configuration ---------------------------------------------------------------


def make_provider(profile: Any) -> Any:
    """The provider for a ``ModelProfile``: its endpoint and key injected, its configured
    window (when set) answering before any discovery."""
    from lovia.providers.registry import provider_from_string

    conn = profile.connection()
    vision = {"on": True, "off": False}.get(profile.vision)
    provider = provider_from_string(
        conn.spec(), api_key=conn.api_key, base_url=conn.base_url, supports_vision=vision
    )
    window: int | None = conn.context_window
    if window is not None:

        async def configured_window() -> int | None:
            return window

        setattr(provider, "context_window", lambda: window)  # noqa: B010 - per instance
        setattr(provider, "discover_context_window", configured_window)  # noqa: B010
    return provider
