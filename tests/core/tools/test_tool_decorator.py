"""``@tool``: building a ``Tool`` from a function (schema, description, injection, threads)."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from typing import Annotated, Any

import pytest
from lovia.agent import Agent
from lovia.cancellation import CancelToken
from lovia.exceptions import InvalidToolArguments, UserError
from lovia.providers.openai_chat import openai_tool_schema
from lovia.run_context import RunContext
from lovia.steering import Mailbox
from lovia.tools.base import Tool, tool
from pydantic import Field


def make_ctx(deps: Any = None) -> RunContext[Any]:
    return RunContext(
        deps=deps, agent=Agent(name="t"), cancel_token=CancelToken(), mailbox=Mailbox()
    )


def test_bare_decorator_builds_a_tool_named_after_the_function() -> None:
    @tool
    def lookup(city: str) -> str:
        """Look up a city."""
        return city

    assert isinstance(lookup, Tool)
    assert (lookup.name, lookup.description) == ("lookup", "Look up a city.")
    assert lookup.parameters == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }


def test_decorator_with_options_sets_every_field() -> None:
    def renderer(value: Any) -> str:
        return "rendered"

    async def policy(invoke: Any, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        return await invoke(args, ctx)

    @tool(
        name="find",
        description="Find things.",
        needs_approval=True,
        retries=2,
        timeout=1.5,
        max_output_chars=100,
        result_renderer=renderer,
        policies=[policy],
        parallel=False,
        returns_images=True,
        strict=True,
    )
    def lookup(q: str) -> str:
        """Ignored docstring."""
        return q

    assert (lookup.name, lookup.description, lookup.needs_approval) == (
        "find",
        "Find things.",
        True,
    )
    assert (lookup.retries, lookup.timeout, lookup.max_output_chars) == (2, 1.5, 100)
    assert lookup.result_renderer is renderer
    assert lookup.policies == (policy,)
    assert (lookup.parallel, lookup.returns_images, lookup.strict) == (False, True, True)
    assert openai_tool_schema(lookup)["function"]["strict"] is True


def test_defaults_inherit_agent_settings() -> None:
    @tool
    def noop() -> None:
        pass

    assert (noop.retries, noop.timeout, noop.max_output_chars) == (None, None, None)
    assert (noop.parallel, noop.returns_images, noop.strict, noop.needs_approval) == (
        True,
        False,
        False,
        False,
    )
    assert noop.description == ""
    assert noop.parameters == {"type": "object", "properties": {}}


def test_explicit_empty_description_is_respected() -> None:
    @tool(description="")
    def documented() -> None:
        """This docstring must not become the description."""

    assert documented.description == ""


def test_description_is_the_docstring_prose_without_sections() -> None:
    @tool
    def search(query: str) -> str:
        """Search the index.

        Results are ranked by recency.

        Args:
            query: what to look for.

        Returns:
            The hits.
        """
        return query

    assert search.description == "Search the index.\n\nResults are ranked by recency."
    assert search.parameters["properties"]["query"]["description"] == "what to look for."


async def test_sync_tool_runs_on_a_worker_thread() -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        seen.append(threading.get_ident())
        return "ok"

    assert await where.invoke({}, make_ctx()) == "ok"
    assert seen and seen[0] != threading.get_ident()


async def test_async_tool_is_awaited_on_the_loop_thread() -> None:
    seen: list[int] = []

    @tool
    async def where() -> str:
        seen.append(threading.get_ident())
        return "ok"

    assert await where.invoke({}, make_ctx()) == "ok"
    assert seen == [threading.get_ident()]


async def test_async_callable_object_is_awaited() -> None:
    class Echo:
        __name__ = "echo"

        async def __call__(self, text: str) -> str:
            return text * 2

    echo = tool(Echo())
    assert await echo.invoke({"text": "ab"}, make_ctx()) == "abab"


async def test_sync_wrapper_returning_a_coroutine_is_awaited() -> None:
    async def inner(x: int) -> int:
        return x + 1

    def wrapper(x: int) -> Any:
        return inner(x)

    assert await tool(wrapper).invoke({"x": 1}, make_ctx()) == 2


async def test_invoke_validates_and_coerces_raw_args() -> None:
    @tool
    def add(a: int, b: int = 10) -> int:
        return a + b

    assert await add.invoke({"a": "5"}, make_ctx()) == 15


async def test_invalid_args_never_reach_the_function() -> None:
    calls: list[Any] = []

    @tool
    def add(a: int, b: Annotated[int, Field(ge=0)]) -> int:
        calls.append((a, b))
        return a + b

    with pytest.raises(InvalidToolArguments) as info:
        await add.invoke({"a": "nope", "b": -1}, make_ctx())
    assert calls == []
    assert info.value.message == (
        "invalid arguments for 'add': a: Input should be a valid integer, unable to parse "
        "string as an integer; b: Input should be greater than or equal to 0"
    )
    assert info.value.hint == "call the tool again with arguments that match its JSON Schema"


async def test_missing_required_argument_is_reported_by_name() -> None:
    @tool
    def greet(name: str) -> str:
        return name

    with pytest.raises(InvalidToolArguments, match="name: Field required"):
        await greet.invoke({}, make_ctx())


async def test_run_context_parameter_is_injected_whatever_its_name() -> None:
    @tool
    async def whoami(run: RunContext[str], greeting: str) -> str:
        return f"{greeting} {run.deps}"

    assert whoami.parameters["properties"] == {"greeting": {"type": "string"}}
    assert await whoami.invoke({"greeting": "hi"}, make_ctx("ada")) == "hi ada"


async def test_positional_only_run_context_is_passed_positionally() -> None:
    @tool
    def whoami(ctx: RunContext[str], /, suffix: str) -> str:
        return ctx.deps + suffix

    assert await whoami.invoke({"suffix": "!"}, make_ctx("ada")) == "ada!"


def test_parameter_merely_named_ctx_is_an_ordinary_argument() -> None:
    @tool
    def echo(ctx: str) -> str:
        return ctx

    assert echo.parameters["properties"] == {"ctx": {"type": "string"}}
    assert echo.parameters["required"] == ["ctx"]


def test_two_run_context_parameters_raise_user_error() -> None:
    def both(a: RunContext[Any], b: RunContext[Any]) -> None:
        pass

    with pytest.raises(UserError, match="two RunContext parameters") as info:
        tool(both)
    assert info.value.hint == "annotate exactly one parameter as RunContext"


def test_var_keyword_parameters_raise_user_error() -> None:
    def loose(**kwargs: Any) -> None:
        pass

    with pytest.raises(UserError, match="kwargs") as info:
        tool(loose)
    assert info.value.hint == "declare each argument explicitly"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "has space"}, "invalid tool name 'has space'"),
        ({"name": "x" * 65}, "invalid tool name"),
        ({"retries": -1}, "retries must be >= 0"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"max_output_chars": 0}, "max_output_chars must be > 0"),
    ],
    ids=["space", "too-long", "negative-retries", "zero-timeout", "zero-cap"],
)
def test_invalid_options_raise_user_error(options: dict[str, Any], message: str) -> None:
    def fn() -> None:
        pass

    with pytest.raises(UserError, match=message):
        tool(**options)(fn)


def test_unresolvable_hints_raise_user_error() -> None:
    def fn(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821 - on purpose
        pass

    with pytest.raises(UserError, match="cannot resolve the type hints") as info:
        tool(fn)
    assert info.value.hint is not None


def test_decorating_a_tool_twice_raises() -> None:
    @tool
    def once() -> None:
        pass

    with pytest.raises(UserError, match="already a Tool"):
        tool(once)  # type: ignore[call-overload]  # the mistake under test


def test_plain_typed_tools_load_pydantic_only_on_their_first_call() -> None:
    # Issue 11: a program that defines plain-typed tools pays for pydantic only when a tool
    # first validates arguments; what the call validates is unchanged (pydantic's model).
    code = (
        "import asyncio, sys\n"
        "from lovia.tools.base import tool, run_tool, parse_tool_arguments\n"
        "assert 'pydantic' not in sys.modules, 'pydantic imported eagerly'\n"
        "@tool\n"
        "def f(x: int, tags: list[str] | None = None) -> int:\n"
        "    return x\n"
        "assert 'pydantic' not in sys.modules, 'pydantic imported by a plain-typed @tool'\n"
        "assert f.parameters['properties']['x'] == {'type': 'integer'}\n"
        "print(asyncio.run(f.invoke({'x': '7'}, None)))\n"
        "assert 'pydantic' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "7"  # lax coercion by pydantic, as before


def test_a_tool_typed_with_a_model_loads_pydantic_at_decoration() -> None:
    code = (
        "import sys\n"
        "from dataclasses import dataclass\n"
        "from lovia.tools.base import tool\n"
        "@dataclass\n"
        "class Span:\n"
        "    start: int\n"
        "@tool\n"
        "def f(span: Span) -> int:\n"
        "    return span.start\n"
        "assert 'pydantic' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("value", ["search", 42], ids=["name-positional", "int"])
def test_decorating_something_that_is_not_a_function_raises(value: Any) -> None:
    with pytest.raises(UserError, match="@tool takes a function") as info:
        tool(value)
    assert info.value.hint == "pass options by keyword, e.g. @tool(name='search')"


def test_generator_functions_are_rejected_at_decoration() -> None:
    def lines() -> Any:
        yield "a"

    async def alines() -> Any:
        yield "a"

    for fn in (lines, alines):
        with pytest.raises(UserError, match="is a generator function") as info:
            tool(fn)
        assert info.value.hint == (
            "return the whole result (a str, a list, a model) instead of yielding it"
        )


async def test_a_partial_takes_name_docstring_and_types_from_its_function() -> None:
    def scale(value: int, factor: int) -> int:
        """Multiply a value.

        Args:
            value: the number to scale.
        """
        return value * factor

    doubled = tool(functools.partial(scale, factor=2))
    assert (doubled.name, doubled.description) == ("scale", "Multiply a value.")
    assert doubled.parameters["properties"]["value"] == {
        "type": "integer",
        "description": "the number to scale.",
    }
    assert await doubled.invoke({"value": "21"}, make_ctx()) == 42


def test_openai_schema_of_a_non_strict_tool() -> None:
    @tool
    def ping(host: str) -> str:
        """Ping a host."""
        return host

    assert openai_tool_schema(ping) == {
        "type": "function",
        "function": {
            "name": "ping",
            "description": "Ping a host.",
            "parameters": {
                "type": "object",
                "properties": {"host": {"type": "string"}},
                "required": ["host"],
            },
        },
    }
