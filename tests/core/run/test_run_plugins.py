"""The plugin seam, view injectors, workspaces and the tool-set merge in the run loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from lovia import Agent, RunContext, Runner, tool
from lovia.context_policy import NoopContextPolicy
from lovia.events import RunCompleted
from lovia.exceptions import GuardrailTripped, UserError
from lovia.hooks import AgentHooks
from lovia.messages import Message
from lovia.plugin import PluginInstance
from lovia.testing import ScriptedProvider, call, text
from lovia.tools.base import Tool
from lovia.transcript import InputEntry, TranscriptEntry


@tool
async def ping() -> str:
    """Ping."""
    return "pong"


class Recorder:
    """A plugin that logs its lifecycle into a shared list."""

    def __init__(self, name: str, log: list[str], **contrib: Any) -> None:
        self.name = name
        self.log = log
        self.contrib = contrib

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        self.log.append(f"setup {self.name}")

        async def aclose() -> None:
            self.log.append(f"close {self.name}")

        return PluginInstance(aclose=aclose, **self.contrib)


async def test_plugins_set_up_once_per_run_and_close_in_lifo_order() -> None:
    log: list[str] = []
    provider = ScriptedProvider([call("ping", {}), text("ok")])
    agent = Agent(
        "p", model=provider, tools=[ping], plugins=[Recorder("one", log), Recorder("two", log)]
    )
    await Runner.run(agent, "go")
    assert log == ["setup one", "setup two", "close two", "close one"]


async def test_each_run_gets_a_fresh_setup() -> None:
    log: list[str] = []
    agent = Agent("p", plugins=[Recorder("one", log)])
    await Runner.run(agent.clone(model=ScriptedProvider([text("a")])), "go")
    await Runner.run(agent.clone(model=ScriptedProvider([text("b")])), "go")
    assert log == ["setup one", "close one", "setup one", "close one"]


async def test_plugins_close_even_when_the_run_fails() -> None:
    log: list[str] = []
    agent = Agent("p", model=ScriptedProvider([]), plugins=[Recorder("one", log)])
    with pytest.raises(AssertionError):
        await Runner.run(agent, "go")
    assert log == ["setup one", "close one"]


async def test_plugin_contributes_tools_instructions_and_hooks() -> None:
    log: list[str] = []
    seen: list[str] = []
    hooks = AgentHooks()
    hooks.on(RunCompleted)(lambda e, ctx: seen.append("completed"))
    plugin = Recorder("one", log, tools=(ping,), instructions="Plugin rules.", hooks=hooks)
    provider = ScriptedProvider([call("ping", {}), text("ok")])
    await Runner.run(Agent("p", instructions="Base.", model=provider, plugins=[plugin]), "go")
    assert provider.calls[0][0] == Message("system", "Base.\n\nPlugin rules.")
    assert provider.calls[1][-1].content == "pong"
    assert seen == ["completed"]


async def test_plugin_guardrails_are_merged() -> None:
    plugin = Recorder("g", [], input_guardrails=(lambda messages, ctx: "blocked by plugin",))
    provider = ScriptedProvider([text("never")])
    with pytest.raises(GuardrailTripped, match="blocked by plugin"):
        await Runner.run(Agent("p", model=provider, plugins=[plugin]), "go")
    assert len(provider.calls) == 0


async def test_view_injectors_change_the_view_only() -> None:
    def remind(ctx: RunContext[Any]) -> Sequence[TranscriptEntry]:
        return [InputEntry("user", f"reminder {ctx.turn}")]

    plugin = Recorder("r", [], view_injectors=(remind,))
    provider = ScriptedProvider([call("ping", {}), text("ok")])
    agent = Agent("p", model=provider, tools=[ping], plugins=[plugin])
    result = await Runner.run(agent, "go", context_policy=NoopContextPolicy())
    assert provider.calls[0] == [Message("user", "go"), Message("user", "reminder 1")]
    assert provider.calls[1][0] == Message("user", "go")
    assert provider.calls[1][-1] == Message("user", "reminder 2")
    assert provider.calls[1].count(Message("user", "reminder 1")) == 0
    assert len(provider.calls[1]) == 4  # input, call, result, reminder
    assert not any(
        isinstance(e, InputEntry) and "reminder" in str(e.content) for e in result.entries
    )


async def test_a_raising_view_injector_is_skipped() -> None:
    def broken(ctx: RunContext[Any]) -> Sequence[TranscriptEntry]:
        raise RuntimeError("injector broke")

    async def works(ctx: RunContext[Any]) -> Sequence[TranscriptEntry]:
        return [InputEntry("user", "still here")]

    plugin = Recorder("r", [], view_injectors=(broken, works))
    provider = ScriptedProvider([text("ok")])
    result = await Runner.run(Agent("p", model=provider, plugins=[plugin]), "go")
    assert result.output == "ok"
    assert provider.calls[0][-1] == Message("user", "still here")


async def test_tool_name_clash_raises_user_error_mentioning_mcp_prefixes() -> None:
    plugin = Recorder("dup", [], tools=(ping,))
    agent = Agent("p", model=ScriptedProvider([text("never")]), tools=[ping], plugins=[plugin])
    with pytest.raises(UserError, match="'ping'") as info:
        await Runner.run(agent, "go")
    assert "MCP" in (info.value.hint or "")


async def test_policy_tools_are_shadowed_silently_by_explicit_tools() -> None:
    async def explicit_recall(args: dict[str, Any], ctx: RunContext[Any]) -> str:
        return "explicit"

    explicit = Tool(
        name="recall", description="mine", parameters={"type": "object"}, invoke=explicit_recall
    )

    class PolicyWithTools(NoopContextPolicy):
        def tools(self) -> list[Tool]:
            async def policy_recall(args: dict[str, Any], ctx: RunContext[Any]) -> str:
                return "policy"

            other = Tool(
                name="extra", description="", parameters={"type": "object"}, invoke=policy_recall
            )
            return [
                Tool(
                    name="recall",
                    description="theirs",
                    parameters={"type": "object"},
                    invoke=policy_recall,
                ),
                other,
            ]

    provider = ScriptedProvider([call("recall", {}), text("ok")])
    agent = Agent("p", model=provider, tools=[explicit], context_policy=PolicyWithTools())
    result = await Runner.run(agent, "go")
    assert provider.tools[0] == ("recall", "extra")
    assert result.entries[2].output == "explicit"  # type: ignore[union-attr]


async def test_image_tools_from_bundles_are_hidden_from_non_vision_providers() -> None:
    @tool(returns_images=True)
    async def screenshot() -> str:
        """Screenshot."""
        return "img"

    plugin = Recorder("img", [], tools=(screenshot,))
    blind = ScriptedProvider([text("ok")])
    await Runner.run(
        Agent("p", model=blind, plugins=[plugin]), "go", context_policy=NoopContextPolicy()
    )
    seeing = ScriptedProvider([text("ok")], supports_vision=True)
    await Runner.run(
        Agent("p", model=seeing, plugins=[plugin]), "go", context_policy=NoopContextPolicy()
    )
    assert blind.tools[0] == ()
    assert seeing.tools[0] == ("screenshot",)


async def test_explicit_image_tools_are_never_filtered() -> None:
    @tool(returns_images=True)
    async def screenshot() -> str:
        """Screenshot."""
        return "img"

    blind = ScriptedProvider([text("ok")])
    await Runner.run(
        Agent("p", model=blind, tools=[screenshot]), "go", context_policy=NoopContextPolicy()
    )
    assert blind.tools[0] == ("screenshot",)


class FakeWorkspace:
    """A minimal WorkspaceLike: records open/close and contributes a tool and text."""

    def __init__(self, log: list[str], *, close_after_run: bool = True) -> None:
        self.log = log
        self.close_after_run = close_after_run

    async def open(self) -> FakeSession:
        self.log.append("open")
        return FakeSession(self.log)

    def tools(self) -> Sequence[Tool]:
        @tool
        async def where(ctx: RunContext[Any]) -> str:
            """Where."""
            return ctx.workspace.name  # type: ignore[no-any-return]

        return [where]

    def instructions(self) -> str:
        return "Workspace rules."

    def view_injectors(self) -> Sequence[Any]:
        return ()


class FakeSession:
    name = "session-1"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def close(self) -> None:
        self.log.append("close")


async def test_workspace_is_opened_per_run_exposed_and_closed() -> None:
    log: list[str] = []
    provider = ScriptedProvider([call("where", {}), text("ok")])
    agent = Agent("w", instructions="Base.", model=provider, workspace=FakeWorkspace(log))
    result = await Runner.run(agent, "go")
    assert log == ["open", "close"]
    assert provider.calls[0][0] == Message("system", "Base.\n\nWorkspace rules.")
    assert result.entries[2].output == "session-1"  # type: ignore[union-attr]


async def test_a_bound_workspace_session_stays_open() -> None:
    log: list[str] = []
    provider = ScriptedProvider([text("ok")])
    agent = Agent("w", model=provider, workspace=FakeWorkspace(log, close_after_run=False))
    await Runner.run(agent, "go")
    assert log == ["open"]


async def test_provider_built_from_a_string_is_closed_and_an_instance_is_not() -> None:
    closed: list[str] = []

    class Closable(ScriptedProvider):
        async def aclose(self) -> None:
            closed.append("closed")

    await Runner.run(Agent("p", model=Closable([text("ok")])), "go")
    assert closed == []
