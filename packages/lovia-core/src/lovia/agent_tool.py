"""Agents as tools: ``agent_as_tool`` runs another agent as a sub-run through ``Runner``.

The ``ask_<slug>(input)`` tool's child sees only ``input``; it inherits deps, the cancel
token and the tracer, gets its own mailbox (drains are destructive and addressed to one
conversation) and a fresh copy of the budget per call. Its usage folds into the parent even
when it fails (``RunResult.usage``, or the failed run's ``error.run_usage``), and a child
budget trip is a tool error the parent's model can see, not the end of the parent run.

The sub-run goes through the public ``Runner`` facade, never around it, so this module is
the only one that imports the runner from inside a tool (nothing the runtime imports
depends on it: no import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .exceptions import BudgetExceeded, InvalidToolArguments, ToolError
from .handoff import tool_slug
from .tools.base import Tool

if TYPE_CHECKING:
    from .agent import Agent
    from .budget import RunBudget
    from .context_policy import ContextPolicy
    from .retry import RetryPolicy
    from .run_context import RunContext

__all__ = ["agent_as_tool"]


def agent_as_tool(
    agent: Agent[Any],
    *,
    name: str | None = None,
    description: str | None = None,
    max_turns: int = 50,
    budget: RunBudget | None = None,
    retry: RetryPolicy | None = None,
    context_policy: ContextPolicy | None = None,
) -> Tool:
    """``agent`` as an ``ask_<slug>(input)`` tool (see the module docstring).

    The execution-policy keywords (``max_turns``, ``budget``, ``retry``,
    ``context_policy``) are never exposed to the model.
    """

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        text = args.get("input")
        if not isinstance(text, str):
            raise InvalidToolArguments("`input` is required and must be a string")
        from .runner import Runner
        from .steering import Mailbox

        try:
            result = await Runner.run(
                agent,
                text,
                context=ctx.deps,
                cancel_token=ctx.cancel_token,
                mailbox=Mailbox(),
                tracer=ctx.tracer,
                max_turns=max_turns,
                budget=budget.fresh() if budget is not None else None,
                retry=retry,
                context_policy=context_policy,
            )
        except Exception as exc:
            # A failed child's spending still counts: its error carries the usage.
            spent = getattr(exc, "run_usage", None)
            if spent is not None:
                ctx.usage.add(spent)
            if isinstance(exc, BudgetExceeded):
                raise ToolError(
                    f"sub-agent {agent.name!r} exceeded its budget ({exc.limit})",
                    hint="answer with what you have, or ask a narrower question",
                ) from exc
            raise
        ctx.usage.add(result.usage)
        return result.output

    return Tool(
        name=name or tool_slug(agent.name, prefix="ask_"),
        description=description or f"Ask {agent.name} and get its answer.",
        parameters={
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The request."}},
            "required": ["input"],
        },
        invoke=invoke,
    )
