"""Resolving an agent for one run: provider, plugins, workspace, tools, output contract.

``activate_agent`` runs once per agent per run (the loop reuses an activation when a
handoff comes back). Everything that must be closed when the run ends is registered on the
run's ``AsyncExitStack``, so teardown is LIFO: plugin ``aclose`` callbacks, the workspace
session (when ``close_after_run``) and providers the runner built from a model string. A
``Provider`` instance the user passed is never closed.

Tool-set merge (``collect_tools``): ``agent.tools``, plugin tools, workspace tools, handoff
tools, then context-policy tools. Names must be unique across the first four sources (a
clash is a ``UserError`` at run start); a policy tool (``recall_tool_result``) is silently
shadowed by an explicit tool of the same name. Policy tools are offered only where there can
be something to recall: the agent has tools of its own, or the transcript already holds a
tool result when the agent is activated (a cleared or offloaded result is always one of
those). The decision is made once per activation, so the tool list, part of the cached
prefix, stays stable across turns; an agent with no tools sends no ``tools`` at all (small
local models reject the field). Tools that return images and come from a
bundle (workspace, plugins) are not offered to a provider without vision; tools listed in
``agent.tools`` are never filtered.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ..handoff import Handoff, as_handoff, build_handoff_tool
from ..plugin import PluginInstance
from ..providers.base import supports_vision
from .run_state import ActiveAgent

if TYPE_CHECKING:
    from ..agent import Agent
    from ..context_policy import ContextPolicy
    from ..providers.base import Provider
    from ..run_context import RunContext
    from ..tools.base import Tool

__all__ = ["activate_agent", "collect_tools"]


async def activate_agent(
    agent: Agent[Any],
    ctx: RunContext[Any],
    stack: AsyncExitStack,
    *,
    policy: ContextPolicy | None,
    output_type: Any,
    extra_instructions: str | None,
    has_results: bool = False,
) -> ActiveAgent:
    """Resolve ``agent`` for this run (see the module docstring).

    ``has_results``: the transcript already holds a tool result (policy tools may then be
    offered to an agent without tools of its own).
    """
    provider = await _resolve_provider(agent, stack)
    instances: list[PluginInstance] = []
    for plugin in agent.plugins:
        instance = await plugin.setup(ctx)
        if not isinstance(instance, PluginInstance):
            raise UserError(
                f"plugin {plugin!r} returned {type(instance).__name__} from setup()",
                hint="Plugin.setup(ctx) must return a lovia.PluginInstance",
            )
        if instance.aclose is not None:
            stack.push_async_callback(instance.aclose)
        instances.append(instance)
    ws_session, ws_tools, ws_text, ws_injectors = await _open_workspace(agent, stack)
    handoffs = _handoffs_by_tool_name(agent)
    tools = collect_tools(
        agent,
        instances,
        ws_tools,
        handoffs,
        policy,
        vision=supports_vision(provider),
        has_results=has_results,
    )
    return _assemble(
        agent,
        provider,
        tools,
        handoffs,
        instances,
        ws_session=ws_session,
        ws_text=ws_text,
        ws_injectors=ws_injectors,
        output_type=agent.output_type if output_type is None else output_type,
        extra_instructions=extra_instructions,
    )


async def _open_workspace(
    agent: Agent[Any], stack: AsyncExitStack
) -> tuple[Any, Sequence[Tool], str, tuple[Any, ...]]:
    """The agent's workspace session, tools, instructions and view injectors (or nothing)."""
    ws = agent.workspace
    if ws is None:
        return None, (), "", ()
    session = await ws.open()
    if ws.close_after_run:
        stack.push_async_callback(session.close)
    return session, ws.tools(), ws.instructions(), tuple(ws.view_injectors())


def _assemble(
    agent: Agent[Any],
    provider: Provider,
    tools: tuple[dict[str, Tool], tuple[Tool, ...]],
    handoffs: dict[str, Handoff],
    instances: list[PluginInstance],
    *,
    ws_session: Any,
    ws_text: str,
    ws_injectors: tuple[Any, ...],
    output_type: Any,
    extra_instructions: str | None,
) -> ActiveAgent:
    from ..output import format_output_instructions, is_text_output, response_format_for

    text_output = is_text_output(output_type)
    response_format = None
    contract = ""
    if not text_output:
        if getattr(provider, "supports_json_schema", False):
            response_format = response_format_for(output_type)
        else:
            contract = format_output_instructions(output_type)
    suffix = "\n\n".join(
        text for text in (ws_text, *(i.instructions for i in instances), contract) if text
    )
    static_prompt = None
    if not agent.has_dynamic_instructions:
        static_prompt = "\n\n".join(
            text for text in (str(agent.instructions), extra_instructions or "") if text
        )
    hooks = tuple(
        h for h in (agent.hooks, *(i.hooks for i in instances)) if h is not None and h.has_handlers
    )
    by_name, offered = tools
    return ActiveAgent(
        agent=agent,
        provider=provider,
        tools=by_name,
        tool_names=frozenset(by_name),
        offered=offered,
        handoffs=handoffs,
        prompt_suffix=suffix,
        output_type=output_type,
        text_output=text_output,
        response_format=response_format,
        view_injectors=(*ws_injectors, *(v for i in instances for v in i.view_injectors)),
        hooks=hooks,
        input_guardrails=(
            *agent.input_guardrails,
            *(g for i in instances for g in i.input_guardrails),
        ),
        output_guardrails=(
            *agent.output_guardrails,
            *(g for i in instances for g in i.output_guardrails),
        ),
        workspace_session=ws_session,
        static_prompt=static_prompt,
    )


def _handoffs_by_tool_name(agent: Agent[Any]) -> dict[str, Handoff]:
    """The agent's handoffs by tool name; two with one name are a ``UserError``."""
    handoffs: dict[str, Handoff] = {}
    for item in agent.handoffs:
        handoff = as_handoff(item)
        name = handoff.tool_name
        if name in handoffs:
            raise UserError(
                f"two handoffs of agent {agent.name!r} get the tool name {name!r}",
                hint="give one of them a distinct name with Handoff(agent, name='transfer_to_...')",
            )
        handoffs[name] = handoff
    return handoffs


def collect_tools(
    agent: Agent[Any],
    instances: Sequence[PluginInstance],
    ws_tools: Sequence[Tool],
    handoffs: dict[str, Handoff],
    policy: ContextPolicy | None,
    *,
    vision: bool,
    has_results: bool = False,
) -> tuple[dict[str, Tool], tuple[Tool, ...]]:
    """The merged tool set by name, and the tools offered to the provider."""
    by_name: dict[str, Tool] = {}
    sources: dict[str, str] = {}
    offered: list[Tool] = []

    def add(tool: Tool, source: str, *, ambient: bool) -> None:
        if tool.name in by_name:
            raise UserError(
                f"two tools are named {tool.name!r} (from {sources[tool.name]} and {source}) "
                f"on agent {agent.name!r}",
                hint="rename one of them; for MCP servers, give each plugin a distinct "
                "tool-name prefix",
            )
        by_name[tool.name] = tool
        sources[tool.name] = source
        if not (ambient and tool.returns_images and not vision):
            offered.append(tool)

    for tool in agent.tools:
        add(tool, "agent.tools", ambient=False)
    for instance in instances:
        for tool in instance.tools:
            add(tool, "a plugin", ambient=True)
    for tool in ws_tools:
        add(tool, "the workspace", ambient=True)
    for handoff in handoffs.values():
        add(build_handoff_tool(handoff), "handoffs", ambient=False)
    policy_tools = getattr(policy, "tools", None)
    if callable(policy_tools) and (by_name or has_results):
        for tool in policy_tools():
            if tool.name not in by_name:  # an explicit tool of the same name wins, silently
                by_name[tool.name] = tool
                offered.append(tool)
    return by_name, tuple(offered)


async def _resolve_provider(agent: Agent[Any], stack: AsyncExitStack) -> Provider:
    model = agent.model
    if model is None:
        raise UserError(
            f"agent {agent.name!r} has no model",
            hint="pass model= a Provider instance or a 'vendor:model' string",
        )
    if not isinstance(model, str):
        return model
    from ..providers.registry import provider_from_string

    provider = provider_from_string(model)
    close = getattr(provider, "aclose", None)
    if callable(close):
        stack.push_async_callback(close)
    return provider
