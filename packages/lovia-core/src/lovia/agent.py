"""``Agent``: the declarative configuration of an agent.

An agent holds no conversation state, so one instance serves any number of concurrent
runs. It is a plain dataclass treated as frozen: change it only through ``clone()``. Every
collection field is stored as a tuple, so no clone shares a mutable list with its source
(policy *instances*, such as a ``Compaction``, are shared on purpose).

Instructions render on every turn: the base ``instructions`` (a string or a sync/async
callable of ``ctx``), then the fragments registered with ``@agent.instruction`` in
registration order (an empty fragment is skipped), then the run's ``extra_instructions``,
separated by blank lines. That text is ``ctx.system_prompt``; the run appends workspace
text, plugin text and the structured-output contract after it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

from .exceptions import UserError
from .providers.base import ModelSettings
from .retry import RetryPolicy

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .budget import RunBudget
    from .context_policy import ContextPolicy
    from .guardrails import InputGuardrail, OutputGuardrail
    from .handoff import Handoff
    from .hooks import AgentHooks
    from .output import OutputRepairStrategy
    from .plugin import Plugin
    from .providers.base import Provider
    from .run_context import RunContext
    from .runner import RunInput, RunOptions
    from .runtime.result import RunHandle, RunResult
    from .tools.base import Tool, ToolResultRenderer
    from .workspace_seam import WorkspaceLike

__all__ = ["Agent", "ApprovalHandler", "ApprovalVerdict", "InstructionFragment", "Instructions"]

if TYPE_CHECKING:
    # A default lets `Agent("name", ...)` type-check without spelling out its deps type.
    from typing_extensions import TypeVar as _DefaultingTypeVar

    DepsT = _DefaultingTypeVar("DepsT", default=Any)
else:
    DepsT = TypeVar("DepsT")

InstructionFragment = Callable[["RunContext[Any]"], Union[str, Awaitable[str]]]
"""``fragment(ctx) -> str`` (sync or async), rendered on every turn."""

Instructions = Union[str, InstructionFragment]
"""Base instructions: fixed text or a sync/async callable of ``ctx``."""

ApprovalVerdict = Union[bool, str]
"""``True``/``"allow"``, ``False``/``"deny"``, or ``"ask"`` (defer to the stream consumer)."""

ApprovalHandler = Callable[
    [Any, "RunContext[Any]"], Union[ApprovalVerdict, Awaitable[ApprovalVerdict]]
]
"""``handler(call, ctx)``: decides a gated tool call (``call`` is a ``ToolCall``)."""


@dataclass(eq=False)
class Agent(Generic[DepsT]):
    """An agent: instructions, a model, tools and the policies that shape its runs.

    ``model`` is a ``Provider`` instance or a ``"vendor:model"`` string (resolved per run
    and closed by the runner); ``None`` raises ``UserError`` when the agent runs.
    ``context_policy=None`` resolves the installed default (``Compaction`` when
    lovia-context is installed, else ``NoopContextPolicy``). ``retry=None`` disables
    provider retries. ``output_type=str`` means plain text (no contract).
    """

    name: str
    """Shown to the model in handoff and agent-as-tool names; also the resume key."""
    instructions: Instructions = ""
    """Fixed text, or a sync/async ``fn(ctx) -> str`` rendered on every turn."""
    model: Provider | str | None = None
    """A ``Provider`` (never closed by lovia) or ``"vendor:model"`` (built and closed per run)."""
    tools: Sequence[Tool] = ()
    """Tools listed explicitly (never filtered for vision); stored as a tuple."""
    output_type: Any = str
    """The final output's type; ``str`` means no contract (never parsed or repaired)."""
    output_repair: bool | OutputRepairStrategy = True
    """``True``: one corrective turn quoting the error; ``False``: raise at once."""
    handoffs: Sequence[Agent[Any] | Handoff] = ()
    """Agents (or ``Handoff`` configs) this agent may hand the conversation to."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """Sampling settings sent with every model call of this agent."""
    retry: RetryPolicy | None = field(default_factory=RetryPolicy)
    """Provider-retry posture (the entry agent's governs the run); ``None``: no retries."""
    context_policy: ContextPolicy | None = None
    """Builds each call's view (the entry agent's governs the run); ``None``: the default."""
    workspace: WorkspaceLike[Any] | None = None
    """Opened per run: tools, instructions and view injectors; ``ctx.workspace``."""
    plugins: Sequence[Plugin] = ()
    """Set up once per run (per agent reached); torn down LIFO when the run ends."""
    hooks: AgentHooks | None = None
    """Event handlers, awaited at the single dispatch point in stream order."""
    approval_handler: ApprovalHandler | None = None
    """Decides gated calls the stream consumer left undecided; ``None``: deny."""
    input_guardrails: Sequence[InputGuardrail] = ()
    """Run once on the initial chat view, before the first model call."""
    output_guardrails: Sequence[OutputGuardrail] = ()
    """Run on the validated final output."""
    default_tool_retries: int = 0
    """Retries for tools that say ``retries=None``."""
    default_tool_timeout: float | None = None
    """Per-attempt timeout (seconds) for tools that say ``timeout=None``; ``None``: none."""
    max_tool_output_chars: int | None = 200_000
    """Cap on a tool result's rendered text (head + tail kept); ``None`` turns it off."""
    tool_result_renderer: ToolResultRenderer | None = None
    """Renders successful results of tools without their own renderer; ``None``: default."""
    _fragments: tuple[InstructionFragment, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.model, (list, tuple)):
            raise UserError(
                f"Agent {self.name!r}: model= takes one model, got a {type(self.model).__name__}",
                hint="lovia no longer accepts a list of fallback models; pass one Provider or "
                "'vendor:model' string, and use retry=RetryPolicy(...) for resilience",
            )
        for attr in ("tools", "handoffs", "plugins", "input_guardrails", "output_guardrails"):
            value = getattr(self, attr)
            if isinstance(value, tuple):
                continue
            if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
                raise UserError(
                    f"Agent {self.name!r}: {attr}= takes a list, got a {type(value).__name__}",
                    hint=f"wrap a single item in a list: {attr}=[item]",
                )
            setattr(self, attr, tuple(value))
        repair = self.output_repair
        if not isinstance(repair, bool) and not callable(getattr(repair, "build_prompt", None)):
            # Checked here, not when an output first fails to parse, so a typo fails fast.
            raise UserError(
                f"Agent {self.name!r}: output_repair must be True, False or an "
                f"OutputRepairStrategy, got {repair!r}",
                hint="pass an object with a build_prompt(exc, attempt) method",
            )
        self._fragments = tuple(self._fragments)

    def __repr__(self) -> str:
        model = (
            self.model
            if isinstance(self.model, str) or self.model is None
            else type(self.model).__name__
        )
        return f"Agent(name={self.name!r}, model={model!r}, tools={len(self.tools)})"

    # -- copies -----------------------------------------------------------------------

    def clone(self, **overrides: Any) -> Agent[DepsT]:
        """A copy with ``overrides`` applied; fragments registered so far are carried over."""
        return dataclasses.replace(self, **overrides)

    def instruction(self, fn: InstructionFragment) -> InstructionFragment:
        """Decorator: register an instruction fragment ``fn(ctx) -> str`` on this agent.

        Copy-on-register: clones made earlier are unaffected, clones made later carry it.
        """
        self._fragments = (*self._fragments, fn)
        return fn

    def with_instructions(self, fn: InstructionFragment) -> Agent[DepsT]:
        """A clone with ``fn`` added as an instruction fragment; this agent is unchanged."""
        return self.clone(_fragments=(*self._fragments, fn))

    # -- rendering --------------------------------------------------------------------

    @property
    def has_dynamic_instructions(self) -> bool:
        """Whether the prompt can change between turns (callables are involved)."""
        return bool(self._fragments) or callable(self.instructions)

    async def render_instructions(self, ctx: RunContext[Any], extra: str | None = None) -> str:
        """The base text, the fragments and ``extra``, joined by blank lines (empty skipped)."""
        parts: list[str] = []
        base = self.instructions
        if callable(base):
            base = await _call_fragment(base, ctx)
        if base:
            parts.append(base)
        for fragment in self._fragments:
            text = await _call_fragment(fragment, ctx)
            if text:
                parts.append(text)
        if extra:
            parts.append(extra)
        return "\n\n".join(parts)

    # -- shortcuts --------------------------------------------------------------------

    async def run(self, input: RunInput, **options: Unpack[RunOptions]) -> RunResult[Any]:
        """``await Runner.run(self, input, **options)``."""
        from .runner import Runner

        return await Runner.run(self, input, **options)

    def run_sync(self, input: RunInput, **options: Unpack[RunOptions]) -> RunResult[Any]:
        """``Runner.run_sync(self, input, **options)``."""
        from .runner import Runner

        return Runner.run_sync(self, input, **options)

    def stream(self, input: RunInput, **options: Unpack[RunOptions]) -> RunHandle[Any]:
        """``Runner.stream(self, input, **options)``."""
        from .runner import Runner

        return Runner.stream(self, input, **options)

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        max_turns: int = 50,
        budget: RunBudget | None = None,
        retry: RetryPolicy | None = None,
        context_policy: ContextPolicy | None = None,
    ) -> Tool:
        """This agent as a tool ``ask_<name>(input)`` that runs it as a sub-run.

        The child sees only ``input``; it inherits deps, cancel token and tracer, gets its
        own mailbox and a fresh copy of ``budget`` per call; its usage folds into the parent.
        """
        from .agent_tool import agent_as_tool

        return agent_as_tool(
            self,
            name=name,
            description=description,
            max_turns=max_turns,
            budget=budget,
            retry=retry,
            context_policy=context_policy,
        )


async def _call_fragment(fn: InstructionFragment, ctx: RunContext[Any]) -> str:
    value = fn(ctx)
    if inspect.isawaitable(value):
        value = await value
    return str(value) if value else ""
