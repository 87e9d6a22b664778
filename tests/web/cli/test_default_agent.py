"""``build_default_agent`` and the resolution helpers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from lovia import Agent
from lovia.exceptions import UserError
from lovia.plugins import Memory, Skills, Subagents, Todo
from lovia.testing import ScriptedProvider, text
from lovia.web.config.schema import ModelProfile, SearchConfig
from lovia.web.default_agent import (
    GENERIC_INSTRUCTIONS,
    build_default_agent,
    load_app_target,
    make_provider,
    resolve_followup_model,
    resolve_followups,
    resolve_instructions,
    resolve_max_retries,
    resolve_max_tokens,
    resolve_max_turns,
    resolve_memory,
    resolve_skills_dirs,
    resolve_tools,
    resolve_workspace,
)

HAS_DDGS = importlib.util.find_spec("ddgs") is not None


def _skill(root: Path) -> Path:
    skills = root / ".agents" / "skills"
    (skills / "hello").mkdir(parents=True)
    (skills / "hello" / "SKILL.md").write_text("---\nname: hello\ndescription: say hi\n---\nHi.\n")
    return skills


def test_the_default_agent_composition(tmp_path: Path) -> None:
    skills = resolve_skills_dirs(None, cwd=_skill(tmp_path).parent.parent)
    workspace = resolve_workspace(None, None, cwd=tmp_path)
    agent = build_default_agent(
        ScriptedProvider([text("hi")]),
        instructions=resolve_instructions(None, None, cwd=tmp_path),
        skills_dirs=skills,
        memory_dir=resolve_memory(None, cwd=tmp_path),
        workspace=workspace,
        max_tokens=1234,
    )
    names = [t.name for t in agent.tools]
    assert names[:3] == ["now", "read_page", "http_request"] and names[-1] == "ask_human"
    assert ("web_search" in names) == HAS_DDGS
    kinds = [type(p) for p in agent.plugins]
    assert kinds == [Skills, Todo, Memory, Subagents]
    assert agent.settings.max_tokens == 1234 and agent.name == "lovia"
    assert agent.workspace is workspace and agent.instructions == GENERIC_INSTRUCTIONS
    subagents = agent.plugins[-1]
    assert isinstance(subagents, Subagents) and subagents.max_concurrent == 3
    (child,) = subagents.agents.values() if isinstance(subagents.agents, dict) else subagents.agents
    assert [type(p) for p in child.plugins] == [Skills, Todo]
    assert "ask_human" not in [t.name for t in child.tools]
    assert child.workspace is workspace


def test_switches_drop_plugins_and_add_scheduling_when_available(tmp_path: Path) -> None:
    agent = build_default_agent("openai:m", subagents=False, memory_dir=None)
    assert [type(p) for p in agent.plugins] == [Todo]
    has_scheduling = importlib.util.find_spec("lovia.web.scheduling") is not None
    store = object()
    with_store = build_default_agent("openai:m", subagents=False, scheduling_store=store)
    assert (len(with_store.plugins) == 2) == has_scheduling


def test_instructions_come_from_agents_md(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Be a pirate.")
    assert resolve_instructions(None, None, cwd=tmp_path) == "Be a pirate."
    (tmp_path / "mine.md").write_text("From file.")
    assert resolve_instructions("mine.md", "text", cwd=tmp_path) == "From file."
    assert resolve_instructions(None, "As text.", cwd=tmp_path) == "As text."
    with pytest.raises(UserError, match="instructions file"):
        resolve_instructions("missing.md", None, cwd=tmp_path)


def test_skills_resolution(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert resolve_skills_dirs(None, cwd=tmp_path) == []
    (tmp_path / "skills").mkdir()
    assert resolve_skills_dirs(None, cwd=tmp_path) == []
    assert ".agents/skills" in caplog.text
    assert resolve_skills_dirs(["skills"], cwd=tmp_path) == [tmp_path / "skills"]
    with pytest.raises(UserError, match="does not exist"):
        resolve_skills_dirs(["nope"], cwd=tmp_path)


def test_memory_resolution(tmp_path: Path) -> None:
    assert resolve_memory(None, cwd=tmp_path) == tmp_path / ".lovia" / "memory"
    assert resolve_memory("m", cwd=tmp_path) == tmp_path / "m"
    assert resolve_memory(None, disabled=True, cwd=tmp_path) is None
    (tmp_path / "f").write_text("")
    with pytest.raises(UserError, match="is a file"):
        resolve_memory("f", cwd=tmp_path)


def test_workspace_resolution(tmp_path: Path) -> None:
    assert resolve_workspace(None, "none", cwd=tmp_path) is None
    for mode in ("readonly", "coding", "trusted"):
        assert resolve_workspace(".", mode, cwd=tmp_path) is not None
    with pytest.raises(UserError, match="unknown workspace mode"):
        resolve_workspace(None, "root", cwd=tmp_path)
    with pytest.raises(UserError, match="not a directory"):
        resolve_workspace("missing", None, cwd=tmp_path)


async def test_the_workspace_denies_the_lovia_state_folder(tmp_path: Path) -> None:
    (tmp_path / ".lovia").mkdir()
    (tmp_path / ".lovia" / "config.json").write_text('{"models": [{"api_key": "sk-secret"}]}')
    (tmp_path / "notes.txt").write_text("hello")
    workspace = resolve_workspace(None, "trusted", cwd=tmp_path)
    session = await workspace.open()
    try:
        assert "hello" in (await session.read_text("notes.txt")).content
        with pytest.raises(Exception, match="(?i)denied|not allowed|permission"):
            await session.read_text(".lovia/config.json")
    finally:
        await session.close()


def test_numbers_and_switches() -> None:
    assert (resolve_max_turns(None), resolve_max_turns("7")) == (50, 7)
    assert (resolve_max_retries(None), resolve_max_retries(0)) == (4, 0)
    assert (resolve_max_tokens(None), resolve_max_tokens("99")) == (None, 99)
    with pytest.raises(UserError):
        resolve_max_turns(0)
    with pytest.raises(UserError):
        resolve_max_retries(-1)
    with pytest.raises(UserError):
        resolve_max_tokens("x")
    assert resolve_followups(False, None) and not resolve_followups(True, "1")
    assert not resolve_followups(False, "off")
    assert resolve_followup_model("openai:gpt-4o-mini") == "openai:gpt-4o-mini"
    assert resolve_followup_model("nonsense") is None
    assert resolve_followup_model("warp:m") is None


def test_search_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    off = resolve_tools(SearchConfig(backend="off"), tavily_env="k")
    assert [t.name for t in off] == ["now", "read_page", "http_request"]
    tavily = resolve_tools(SearchConfig(tavily_api_key="tvly-1"))
    assert tavily[-1].name == "web_search"
    assert resolve_tools(SearchConfig(), tavily_env="tvly-env")[-1].name == "web_search"
    with pytest.raises(UserError, match="needs a key"):
        resolve_tools(SearchConfig(backend="tavily"))
    if not HAS_DDGS:
        assert len(resolve_tools(SearchConfig())) == 3
        with pytest.raises(UserError, match="ddgs"):
            resolve_tools(SearchConfig(backend="ddg"))


def test_make_provider_injects_endpoint_key_and_window() -> None:
    profile = ModelProfile(
        model="anthropic:claude-x", base_url="http://127.0.0.1:9", api_key="ak", context_window=4096
    )
    provider = make_provider(profile)
    assert type(provider).__name__ == "AnthropicProvider"
    assert provider.base_url == "http://127.0.0.1:9" and provider.context_window() == 4096
    plain = make_provider(ModelProfile(model="m", base_url="http://127.0.0.1:9/v1", vision="on"))
    assert plain.supports_vision is True and plain.context_window() is None


def test_load_app_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "apps_mod.py").write_text(
        "from lovia import Agent\n"
        "agent = Agent('one')\n"
        "agents = {'a': Agent('a')}\n"
        "def factory():\n    return Agent('f')\n"
        "def broken():\n    raise RuntimeError('boom')\n"
        "empty = {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert isinstance(load_app_target("apps_mod:agent"), Agent)
    assert list(load_app_target("apps_mod:agents")) == ["a"]  # type: ignore[arg-type]
    assert load_app_target("apps_mod:factory").name == "f"  # type: ignore[union-attr]
    for target, needle in [
        ("apps_mod", "MODULE:ATTR"),
        (":x", "MODULE:ATTR"),
        ("apps_mod:nope", "no attribute"),
        ("apps_mod:broken", "raised RuntimeError"),
        ("apps_mod:empty", "not an Agent"),
        ("apps_mod_missing:x", "cannot import"),
    ]:
        with pytest.raises(UserError, match=needle):
            load_app_target(target)


def test_a_vision_role_adds_describe_image_when_the_chat_model_lacks_vision(
    tmp_path: Path,
) -> None:
    workspace = resolve_workspace(None, "readonly", cwd=tmp_path)
    blind = make_provider(ModelProfile(model="m", base_url="http://127.0.0.1:9/v1", vision="off"))
    seeing = make_provider(ModelProfile(model="v", base_url="http://127.0.0.1:9/v1", vision="on"))
    has_tool = importlib.util.find_spec("lovia.web.vision") is not None
    agent = build_default_agent(blind, vision_model=seeing, workspace=workspace, subagents=False)
    assert ("describe_image" in [t.name for t in agent.tools]) == has_tool
    sighted = build_default_agent(seeing, vision_model=seeing, workspace=workspace)
    assert "describe_image" not in [t.name for t in sighted.tools]
    no_role = build_default_agent(blind, workspace=workspace)
    assert "describe_image" not in [t.name for t in no_role.tools]
