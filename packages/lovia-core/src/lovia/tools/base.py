"""Tools: the ``Tool`` value, the ``@tool`` decorator, and how one call becomes a result.

One call runs through layers, outermost first::

    retries (backoff capped at 5 s)  ->  timeout (per attempt)
      ->  policies (list order, raw args)  ->  validation  ->  the function

so each policy sees exactly one attempt and only validated arguments reach user code.
Invalid arguments, ``RunCancelled``, ``BudgetExceeded`` and task cancellation are never
retried; the last three are never turned into results either. Every other failure becomes a
``"Tool error: ..."`` result the model sees, and the run goes on.

A successful value is rendered (tool renderer, then the agent's, then
``default_result_renderer``), capped by ``truncate_tool_output``, and kept as ``raw`` only
when it was neither truncated nor large. This module must not import pydantic at import
time: ``lovia.schema`` is imported on the first decoration.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import inspect
import json
import logging
import re
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, TypeVar, Union, overload

from ..exceptions import BudgetExceeded, InvalidToolArguments, RunCancelled, ToolError, UserError
from ..parts import FilePart, ImagePart, TextPart, project_parts

if TYPE_CHECKING:
    from ..parts import ContentPart
    from ..run_context import RunContext

__all__ = [
    "ApprovalPredicate",
    "Tool",
    "ToolInvoker",
    "ToolOutcome",
    "ToolPolicy",
    "ToolResultRenderer",
    "apply_tool_policies",
    "default_result_renderer",
    "parse_tool_arguments",
    "render_tool_result",
    "run_tool",
    "tool",
    "truncate_tool_output",
]

ToolInvoker = Callable[[dict[str, Any], "RunContext[Any]"], Awaitable[Any]]
"""``invoke(args, ctx)``: runs the tool with raw (unvalidated) JSON arguments."""

ApprovalPredicate = Callable[[dict[str, Any], "RunContext[Any]"], Union[bool, Awaitable[bool]]]
"""``predicate(args, ctx) -> bool``: whether this call needs a human decision."""

ToolPolicy = Callable[[ToolInvoker, dict[str, Any], "RunContext[Any]"], Awaitable[Any]]
"""``policy(invoke, args, ctx)``: wraps one attempt; may short-circuit."""

ToolResultRenderer = Callable[[Any], str]
"""Turns a successful result into the string the model sees."""

_log = logging.getLogger("lovia.tools")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_BACKOFF_SECONDS = 5.0
_BACKOFF_BASE_SECONDS = 0.5
_LARGE_OUTPUT_CHARS = 64 * 1024
"""Rendered outputs longer than this drop ``raw`` even under the cap (memory, checkpoints)."""

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model can call.

    ``parameters`` is the JSON Schema of the arguments object. ``invoke`` receives the raw
    parsed arguments and the ``RunContext``. ``None`` for ``retries``, ``timeout`` and
    ``max_output_chars`` means inherit the agent's default.
    """

    name: str
    """Unique across the agent's tool sources; providers allow ``[A-Za-z0-9_-]{1,64}``."""
    description: str
    """What the model reads to decide when to call the tool."""
    parameters: dict[str, Any]
    """The JSON Schema of the arguments object."""
    invoke: ToolInvoker
    """Runs one attempt with the raw arguments; validation (if any) happens inside."""
    needs_approval: bool | ApprovalPredicate = False
    """``True``, or a predicate over (args, ctx), to gate the call on a human decision."""
    retries: int | None = None
    """Attempts after the first on failure; ``None`` inherits ``Agent.default_tool_retries``."""
    timeout: float | None = None
    """Seconds per attempt; ``None`` inherits ``Agent.default_tool_timeout``."""
    max_output_chars: int | None = None
    """Cap on the rendered output; ``None`` inherits ``Agent.max_tool_output_chars``."""
    result_renderer: ToolResultRenderer | None = None
    """Renders successful results; ``None`` falls back to the agent's, then the default."""
    policies: tuple[ToolPolicy, ...] = ()
    """Wrappers around each attempt, first outermost; they receive the raw arguments."""
    parallel: bool = True
    """``False`` makes the tool an execution barrier: it runs alone within its turn."""
    returns_images: bool = False
    """Declares image results, so bundles hide the tool from non-vision providers."""
    strict: bool = False
    """Ask providers to enforce ``parameters`` exactly (OpenAI strict function calling)."""

    def schema_json(self) -> str:
        """The tool's declaration (name, description, parameters) as compact JSON: what
        every provider sends for a tool, whatever its wire framing (token counting)."""
        declaration = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        return json.dumps(declaration, ensure_ascii=False, separators=(",", ":"), default=str)


# --- @tool ------------------------------------------------------------------------------


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool | ApprovalPredicate = False,
    retries: int | None = None,
    timeout: float | None = None,
    max_output_chars: int | None = None,
    result_renderer: ToolResultRenderer | None = None,
    policies: Sequence[ToolPolicy] = (),
    parallel: bool = True,
    returns_images: bool = False,
    strict: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool | ApprovalPredicate = False,
    retries: int | None = None,
    timeout: float | None = None,
    max_output_chars: int | None = None,
    result_renderer: ToolResultRenderer | None = None,
    policies: Sequence[ToolPolicy] = (),
    parallel: bool = True,
    returns_images: bool = False,
    strict: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a ``Tool``; use bare (``@tool``) or with options (``@tool(...)``).

    The schema comes from the signature and docstring (``lovia.schema``), and the validator
    is built here, once. ``name`` defaults to the function name and ``description`` to the
    docstring's prose (an explicit ``""`` is kept). Sync functions run on a worker thread;
    async functions are awaited. ``retries``, ``timeout`` (seconds per attempt) and
    ``max_output_chars`` default to ``None``: inherit the agent's setting. ``strict=True``
    closes the schema and marks the tool strict for providers that support it.

    Raises ``UserError`` for something that is not a function (or is a generator function),
    an invalid name or option, ``*args``/``**kwargs``, two ``RunContext`` parameters, or
    types that have no JSON Schema.
    """

    def decorate(func: Callable[..., Any]) -> Tool:
        return _build_tool(
            func,
            name=name,
            description=description,
            needs_approval=needs_approval,
            retries=retries,
            timeout=timeout,
            max_output_chars=max_output_chars,
            result_renderer=result_renderer,
            policies=tuple(policies),
            parallel=parallel,
            returns_images=returns_images,
            strict=strict,
        )

    if fn is not None:
        return decorate(fn)
    return decorate


def _build_tool(
    func: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    retries: int | None,
    timeout: float | None,
    max_output_chars: int | None,
    strict: bool,
    **options: Any,
) -> Tool:
    from ..schema import function_args_schema

    if isinstance(func, Tool):
        raise UserError(f"{func.name!r} is already a Tool", hint="apply @tool once")
    if not callable(func):
        raise UserError(
            f"@tool takes a function, got {func!r}",
            hint="pass options by keyword, e.g. @tool(name='search')",
        )
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise UserError(
            f"tool {getattr(func, '__name__', func)!r} is a generator function",
            hint="return the whole result (a str, a list, a model) instead of yielding it",
        )
    _check_options(name, retries, timeout, max_output_chars)
    fs = function_args_schema(func, name=name, strict=strict)
    if not _NAME.match(fs.name):
        raise UserError(
            f"invalid tool name {fs.name!r}",
            hint="use 1-64 characters from A-Z, a-z, 0-9, '_' and '-' (pass name=)",
        )
    is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - async callable objects, not callability
    )

    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        positional, kwargs = fs.bind(args, ctx)
        if is_async:
            return await func(*positional, **kwargs)
        result = await asyncio.to_thread(func, *positional, **kwargs)
        if inspect.isawaitable(result):  # a sync wrapper around an async function
            return await result
        return result

    return Tool(
        name=fs.name,
        description=fs.description if description is None else description,
        parameters=fs.parameters,
        invoke=invoke,
        retries=retries,
        timeout=timeout,
        max_output_chars=max_output_chars,
        strict=strict,
        **options,
    )


def _check_options(
    name: str | None, retries: int | None, timeout: float | None, max_output_chars: int | None
) -> None:
    if retries is not None and retries < 0:
        raise UserError(
            f"retries must be >= 0, got {retries!r}", hint="retries counts extra attempts"
        )
    if timeout is not None and timeout <= 0:
        raise UserError(f"timeout must be > 0 seconds, got {timeout!r}", hint="use None for none")
    if max_output_chars is not None and max_output_chars <= 0:
        raise UserError(
            f"max_output_chars must be > 0, got {max_output_chars!r}",
            hint="use None to inherit the agent's cap",
        )
    if name is not None and not name:
        raise UserError("a tool name cannot be empty", hint="omit name= to use the function name")


# --- arguments --------------------------------------------------------------------------


def parse_tool_arguments(arguments: str, *, truncated: bool = False) -> dict[str, Any]:
    """Decode a call's JSON arguments string into the arguments object.

    An empty string means no arguments. Raises ``InvalidToolArguments`` for bad JSON or JSON
    that is not an object; with ``truncated=True`` (the reply hit its token limit) the
    message says the call was cut off.
    """
    if arguments == "{}" or not arguments.strip():
        return {}  # (no arguments: the common case of a no-argument tool skips the decoder)
    try:
        value = json.loads(arguments)
    except RecursionError:
        raise InvalidToolArguments(
            "the arguments are nested too deeply to decode",
            hint="send the arguments as one flat JSON object",
        ) from None
    except ValueError as exc:
        if truncated:
            raise InvalidToolArguments(
                "the tool call was cut off: the reply hit the output token limit "
                "before its arguments were complete",
                hint="send shorter arguments, or split the work into smaller calls",
            ) from None
        raise InvalidToolArguments(
            f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})"
            if isinstance(exc, json.JSONDecodeError)
            else "the arguments are not valid JSON",
            hint="send the arguments as one JSON object",
        ) from None
    if not isinstance(value, dict):
        raise InvalidToolArguments(
            f"the arguments must be a JSON object, got {_json_kind(value)}",
            hint="send the arguments as one JSON object",
        )
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


# --- execution --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call produced, ready to become a ``ToolResultEntry``."""

    output: str
    """The string the model sees."""
    raw: Any
    """The tool's return value; ``None`` when dropped (error, truncated, large, parts)."""
    is_error: bool
    """Whether ``output`` reports a failure (``"Tool error: ..."``)."""
    parts: tuple[ContentPart, ...] | None = None
    """Images or files the tool returned; ``output`` is then their text projection."""
    error: BaseException | None = None
    """The failure behind an error outcome."""


def apply_tool_policies(invoke: ToolInvoker, policies: Sequence[ToolPolicy]) -> ToolInvoker:
    """Wrap ``invoke`` in ``policies``; the first policy is the outermost.

    Each policy is called as ``policy(next_invoke, args, ctx)`` with the raw arguments and
    may return without calling ``next_invoke`` (a short-circuit).
    """
    chain = invoke
    for policy in reversed(policies):
        chain = _bind_policy(policy, chain)
    return chain


def _bind_policy(policy: ToolPolicy, inner: ToolInvoker) -> ToolInvoker:
    def call(args: dict[str, Any], ctx: RunContext[Any]) -> Awaitable[Any]:
        return policy(inner, args, ctx)

    return call


async def run_tool(
    tool: Tool,
    args: dict[str, Any],
    ctx: RunContext[Any],
    *,
    default_retries: int = 0,
    default_timeout: float | None = None,
    max_output_chars: int | None = 200_000,
    agent_renderer: ToolResultRenderer | None = None,
    on_error: Callable[[BaseException], None] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> ToolOutcome:
    """Run one call of ``tool`` with raw ``args`` and return its outcome (see module docs).

    ``default_retries``, ``default_timeout`` and ``max_output_chars`` are the agent's values,
    used where the tool says ``None`` (``max_output_chars=None`` here means no cap).
    ``on_error`` is told about every failed attempt. ``sleep`` waits out the backoff
    (injectable for tests); ``ctx.cancel_token`` interrupts it. A timed-out sync tool's
    worker thread runs on to completion (threads cannot be interrupted). Raises only
    ``RunCancelled``, ``BudgetExceeded`` and ``asyncio.CancelledError``.
    """
    retries = default_retries if tool.retries is None else tool.retries
    timeout = default_timeout if tool.timeout is None else tool.timeout
    cap = max_output_chars if tool.max_output_chars is None else tool.max_output_chars
    chain = apply_tool_policies(tool.invoke, tool.policies) if tool.policies else tool.invoke
    attempts = retries + 1
    for attempt in range(1, attempts + 1):
        try:
            if timeout is None:
                value = await chain(dict(args), ctx)  # (``_attempt`` inlined: every call)
            else:
                value = await _attempt(chain, tool.name, dict(args), ctx, timeout)
        except (RunCancelled, BudgetExceeded):
            raise
        except InvalidToolArguments as exc:
            _notify(on_error, exc)
            return _error_outcome(exc, cap)
        except Exception as exc:  # noqa: BLE001 - fail-open: a tool failure becomes a result
            _log.debug(
                "tool %r failed on attempt %d of %d", tool.name, attempt, attempts, exc_info=exc
            )
            _notify(on_error, exc)
            if attempt < attempts:
                # The run's token interrupts the backoff: a cancelled run never retries.
                delay = min(_MAX_BACKOFF_SECONDS, _BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
                await ctx.cancel_token.race(sleep(delay))
                continue
            if attempts > 1:
                exhausted = ToolError(f"{_describe(exc)} (gave up after {attempts} attempts)")
                exhausted.__cause__ = exc
                return _error_outcome(exhausted, cap)
            return _error_outcome(exc, cap)
        return _success_outcome(value, tool, agent_renderer, cap, on_error)
    raise AssertionError("unreachable: the loop returns on its last attempt")


async def _attempt(
    chain: ToolInvoker,
    name: str,
    args: dict[str, Any],
    ctx: RunContext[Any],
    timeout: float | None,
) -> Any:
    if timeout is None:
        return await chain(args, ctx)
    try:
        return await asyncio.wait_for(chain(args, ctx), timeout)
    except asyncio.TimeoutError as exc:
        # wait_for's own timeout chains from the CancelledError it used; anything else is
        # a TimeoutError the tool raised and is reported as such.
        if not isinstance(exc.__cause__, asyncio.CancelledError):
            raise
        raise ToolError(
            f"tool {name!r} timed out after {timeout:g} s",
            hint="retry with a smaller request, or raise the tool's timeout",
        ) from None


def _notify(on_error: Callable[[BaseException], None] | None, exc: BaseException) -> None:
    if on_error is not None:
        on_error(exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        return str(exc)  # the tool author's words (and hint) are for the model
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _error_outcome(exc: BaseException, cap: int | None) -> ToolOutcome:
    output = f"Tool error: {_describe(exc)}"
    if cap is not None:
        output = truncate_tool_output(output, cap)
    return ToolOutcome(output=output, raw=None, is_error=True, error=exc)


def _success_outcome(
    value: Any,
    tool: Tool,
    agent_renderer: ToolResultRenderer | None,
    cap: int | None,
    on_error: Callable[[BaseException], None] | None,
) -> ToolOutcome:
    parts = _as_parts(value)
    if parts is not None:
        output = project_parts(parts)
        raw = None  # the parts are the value; keeping both would store images twice
    else:
        try:
            output = render_tool_result(value, tool.result_renderer, agent_renderer)
        except Exception as exc:  # noqa: BLE001 - fail-open: a renderer failure becomes a result
            _log.debug("rendering the result of tool %r failed", tool.name, exc_info=exc)
            _notify(on_error, exc)
            return _error_outcome(
                ToolError(f"rendering the result of {tool.name!r} failed: {_describe(exc)}"), cap
            )
        raw = value
    if cap is not None and len(output) > cap:
        output, raw = truncate_tool_output(output, cap), None
    elif len(output) > _LARGE_OUTPUT_CHARS:
        raw = None
    return ToolOutcome(output=output, raw=raw, is_error=False, parts=parts)


def _as_parts(value: Any) -> tuple[ContentPart, ...] | None:
    if isinstance(value, (TextPart, ImagePart, FilePart)):
        return (value,)
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (TextPart, ImagePart, FilePart)) for v in value)
    ):
        return tuple(value)
    return None


# --- rendering --------------------------------------------------------------------------


def render_tool_result(
    value: Any,
    tool_renderer: ToolResultRenderer | None = None,
    agent_renderer: ToolResultRenderer | None = None,
) -> str:
    """Render a successful result: the tool's renderer, else the agent's, else the default.

    Exceptions from a renderer propagate (``run_tool`` turns them into an error result).
    """
    renderer = tool_renderer or agent_renderer or default_result_renderer
    return renderer(value)


def default_result_renderer(value: Any) -> str:
    """A string as is; anything else as JSON.

    pydantic models, dataclasses, enums, dates, paths, UUIDs, decimals and sets are
    converted, and ``bytes`` become a size marker. Raises ``TypeError`` for any other
    object (and ``ValueError`` for a circular structure); ``run_tool`` turns that into an
    error result, so an unserialisable return value never reaches the model as a repr.
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, default=_to_jsonable, ensure_ascii=False)


def _to_jsonable(value: Any) -> Any:
    pydantic = sys.modules.get("pydantic")  # a model can only exist if pydantic is loaded
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (PurePath, uuid.UUID, Decimal)):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    raise TypeError(
        f"Object of type {type(value).__name__} is not JSON serializable "
        "(return a str, or give the tool a result_renderer)"
    )


def truncate_tool_output(text: str, max_chars: int) -> str:
    """``text`` if it fits in ``max_chars``; otherwise its head and tail around a marker.

    Head and tail together keep ``max_chars`` characters; the marker states how many were
    cut. Deliberately lossy: nothing keeps the cut middle.
    """
    if len(text) <= max_chars:
        return text
    head = max_chars // 2
    tail = max_chars - head
    cut = len(text) - max_chars
    marker = f"\n[... {cut} characters truncated ...]\n"
    return text[:head] + marker + (text[-tail:] if tail else "")
