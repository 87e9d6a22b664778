"""Tools: the ``Tool`` value, the ``@tool`` decorator, and how a call becomes a result.

SKELETON NOTE (remove when filled): the ``Tool`` dataclass below is the agreed shape that
other modules build on; ``@tool``, validation, retries, policies, renderers and truncation
are added in this module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from ..run_context import RunContext

__all__ = [
    "ApprovalPredicate",
    "Tool",
    "ToolInvoker",
    "ToolPolicy",
    "ToolResultRenderer",
]

ToolInvoker = Callable[[dict[str, Any], "RunContext[Any]"], Awaitable[Any]]
"""``invoke(args, ctx)``: runs the tool with raw (unvalidated) JSON arguments."""

ApprovalPredicate = Callable[[dict[str, Any], "RunContext[Any]"], Union[bool, Awaitable[bool]]]
"""``predicate(args, ctx) -> bool``: whether this call needs a human decision."""

ToolPolicy = Callable[[ToolInvoker, dict[str, Any], "RunContext[Any]"], Awaitable[Any]]
"""``policy(invoke, args, ctx)``: wraps one attempt; may short-circuit."""

ToolResultRenderer = Callable[[Any], str]
"""Turns a successful result into the string the model sees."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model can call.

    ``parameters`` is the JSON Schema of the arguments object. ``invoke`` receives the raw
    parsed arguments and the ``RunContext``. ``None`` for ``retries``, ``timeout`` and
    ``max_output_chars`` means inherit the agent's default.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    invoke: ToolInvoker
    needs_approval: bool | ApprovalPredicate = False
    retries: int | None = None
    timeout: float | None = None
    max_output_chars: int | None = None
    result_renderer: ToolResultRenderer | None = None
    policies: tuple[ToolPolicy, ...] = ()
    parallel: bool = True
    returns_images: bool = False
    strict: bool = False

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI Chat Completions ``tools`` item."""
        fn: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.strict:
            fn["strict"] = True
        return {"type": "function", "function": fn}
