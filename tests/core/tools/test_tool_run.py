"""``run_tool`` and ``parse_tool_arguments``: one call from raw arguments to a ``ToolOutcome``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import logging
from pathlib import PurePosixPath
from typing import Any

import pytest
from lovia.agent import Agent
from lovia.cancellation import CancelToken
from lovia.exceptions import (
    BudgetExceeded,
    InvalidToolArguments,
    RunCancelled,
    ToolError,
)
from lovia.parts import ImagePart, TextPart
from lovia.run_context import RunContext
from lovia.steering import Mailbox
from lovia.tools.base import (
    ToolInvoker,
    ToolOutcome,
    apply_tool_policies,
    default_result_renderer,
    parse_tool_arguments,
    render_tool_result,
    run_tool,
    tool,
    truncate_tool_output,
)
from pydantic import BaseModel


def make_ctx() -> RunContext[Any]:
    return RunContext(
        deps=None, agent=Agent(name="t"), cancel_token=CancelToken(), mailbox=Mailbox()
    )


class Sleeps:
    """An injected backoff sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


# --- parse_tool_arguments ---------------------------------------------------------------


def test_parse_decodes_an_object() -> None:
    assert parse_tool_arguments('{"a": 1, "b": [true]}') == {"a": 1, "b": [True]}


@pytest.mark.parametrize("text", ["", "   "], ids=["empty", "blank"])
def test_parse_treats_empty_arguments_as_no_arguments(text: str) -> None:
    assert parse_tool_arguments(text) == {}


def test_parse_rejects_bad_json() -> None:
    with pytest.raises(InvalidToolArguments, match="not valid JSON") as info:
        parse_tool_arguments('{"a": ')
    assert info.value.hint == "send the arguments as one JSON object"


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[1, 2]", "an array"), ('"x"', "a string"), ("3", "a number"), ("null", "null")],
    ids=["array", "string", "number", "null"],
)
def test_parse_rejects_non_object_json(text: str, kind: str) -> None:
    with pytest.raises(InvalidToolArguments) as info:
        parse_tool_arguments(text)
    assert info.value.message == f"the arguments must be a JSON object, got {kind}"


@pytest.mark.parametrize("opener", ["[", '{"a":'], ids=["arrays", "objects"])
def test_parse_rejects_absurdly_deep_nesting_as_invalid_arguments(opener: str) -> None:
    with pytest.raises(InvalidToolArguments, match="nested too deeply") as info:
        parse_tool_arguments(opener * 100_000)
    assert info.value.hint == "send the arguments as one flat JSON object"


def test_parse_says_a_truncated_call_was_cut_off() -> None:
    with pytest.raises(InvalidToolArguments, match="cut off") as info:
        parse_tool_arguments('{"content": "very long', truncated=True)
    assert info.value.hint == "send shorter arguments, or split the work into smaller calls"


# --- success and rendering --------------------------------------------------------------


async def test_success_outcome_keeps_raw_value_and_renders_json() -> None:
    @tool
    def pair() -> dict[str, int]:
        return {"a": 1}

    outcome = await run_tool(pair, {}, make_ctx())
    assert outcome == ToolOutcome(output='{"a": 1}', raw={"a": 1}, is_error=False)


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    color: Color


class Model(BaseModel):
    when: datetime.date
    path: PurePosixPath


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        (None, "null"),
        (Point(1, Color.RED), '{"x": 1, "color": "red"}'),
        (
            Model(when=datetime.date(2026, 1, 2), path=PurePosixPath("/a")),
            '{"when": "2026-01-02", "path": "/a"}',
        ),
        (
            {"p": PurePosixPath("/tmp/x"), "t": datetime.datetime(2026, 1, 2, 3, 4)},
            '{"p": "/tmp/x", "t": "2026-01-02T03:04:00"}',
        ),
        ({1, 2}, "[1, 2]"),
        ("ünïcode", "ünïcode"),
        ({"blob": b"\x00\x01\x02"}, '{"blob": "<3 bytes>"}'),
    ],
    ids=["str", "none", "dataclass-enum", "pydantic", "path-datetime", "set", "unicode", "bytes"],
)
def test_default_renderer(value: Any, expected: str) -> None:
    assert default_result_renderer(value) == expected


def test_render_prefers_tool_then_agent_then_default() -> None:
    def tool_r(value: Any) -> str:
        return "tool"

    def agent_r(value: Any) -> str:
        return "agent"

    assert render_tool_result(1, tool_r, agent_r) == "tool"
    assert render_tool_result(1, None, agent_r) == "agent"
    assert render_tool_result(1, None, None) == "1"


async def test_agent_renderer_is_used_when_the_tool_has_none() -> None:
    @tool
    def value() -> int:
        return 7

    outcome = await run_tool(value, {}, make_ctx(), agent_renderer=lambda v: f"<{v}>")
    assert (outcome.output, outcome.raw) == ("<7>", 7)


async def test_renderers_never_see_errors() -> None:
    seen: list[Any] = []

    def renderer(value: Any) -> str:
        seen.append(value)
        return "rendered"

    @tool(result_renderer=renderer)
    def broken() -> int:
        raise ValueError("boom")

    outcome = await run_tool(broken, {}, make_ctx(), agent_renderer=renderer)
    assert outcome.output == "Tool error: ValueError: boom"
    assert seen == []


async def test_raising_renderer_becomes_an_error_result() -> None:
    errors: list[BaseException] = []

    def renderer(value: Any) -> str:
        raise RuntimeError("cannot render")

    @tool(result_renderer=renderer)
    def value() -> int:
        return 1

    outcome = await run_tool(value, {}, make_ctx(), on_error=errors.append)
    assert outcome.is_error and outcome.raw is None
    assert outcome.output == (
        "Tool error: rendering the result of 'value' failed: RuntimeError: cannot render"
    )
    assert [type(e) for e in errors] == [RuntimeError]


# --- errors -----------------------------------------------------------------------------


async def test_tool_error_message_and_hint_reach_the_model() -> None:
    @tool
    def strict_tool() -> None:
        raise ToolError("no such file 'a.txt'", hint="list the directory first")

    outcome = await run_tool(strict_tool, {}, make_ctx())
    assert outcome.is_error and outcome.raw is None
    assert outcome.output == "Tool error: no such file 'a.txt'\nHint: list the directory first"
    assert isinstance(outcome.error, ToolError)


class Opaque:
    pass


def test_default_renderer_refuses_an_object_it_cannot_serialise() -> None:
    with pytest.raises(TypeError, match="Object of type Opaque is not JSON serializable"):
        default_result_renderer({"value": Opaque()})


async def test_unserialisable_result_becomes_an_error_result() -> None:
    errors: list[BaseException] = []

    @tool
    def opaque() -> Any:
        return Opaque()

    outcome = await run_tool(opaque, {}, make_ctx(), on_error=errors.append)
    assert (outcome.is_error, outcome.raw) == (True, None)
    assert outcome.output == (
        "Tool error: rendering the result of 'opaque' failed: TypeError: Object of type "
        "Opaque is not JSON serializable (return a str, or give the tool a result_renderer)"
    )
    assert [type(e) for e in errors] == [TypeError]


async def test_circular_result_becomes_an_error_result() -> None:
    @tool
    def loop() -> Any:
        value: dict[str, Any] = {}
        value["self"] = value
        return value

    outcome = await run_tool(loop, {}, make_ctx())
    assert outcome.is_error
    assert outcome.output == (
        "Tool error: rendering the result of 'loop' failed: ValueError: Circular reference detected"
    )


async def test_message_less_tool_error_still_names_the_failure() -> None:
    @tool
    def silent() -> None:
        raise ToolError()

    outcome = await run_tool(silent, {}, make_ctx())
    assert outcome.output == "Tool error: ToolError"


async def test_a_failure_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def boom() -> None:
        raise RuntimeError("disk full")

    with caplog.at_level(logging.DEBUG, logger="lovia.tools"):
        await run_tool(boom, {}, make_ctx())
    (record,) = [r for r in caplog.records if r.name == "lovia.tools"]
    assert record.getMessage() == "tool 'boom' failed on attempt 1 of 1"
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError


async def test_message_less_error_names_the_exception_type() -> None:
    @tool
    def silent() -> None:
        raise KeyError()

    outcome = await run_tool(silent, {}, make_ctx())
    assert outcome.output == "Tool error: KeyError"


async def test_invalid_arguments_become_an_error_result_and_are_not_retried() -> None:
    calls: list[int] = []
    errors: list[BaseException] = []

    async def counting(invoke: ToolInvoker, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        calls.append(1)
        return await invoke(args, ctx)

    @tool(retries=3, policies=[counting])
    def add(a: int) -> int:
        return a

    sleeps = Sleeps()
    outcome = await run_tool(add, {"a": "x"}, make_ctx(), on_error=errors.append, sleep=sleeps)
    assert outcome.is_error
    assert outcome.output.startswith("Tool error: invalid arguments for 'add': a: Input should")
    assert (calls, sleeps.delays) == ([1], [])
    assert [type(e) for e in errors] == [InvalidToolArguments]


@pytest.mark.parametrize(
    "exc",
    [RunCancelled(reason="stop"), BudgetExceeded("over", limit="max_tool_calls")],
    ids=["cancelled", "budget"],
)
async def test_run_ending_errors_are_reraised_and_never_retried(exc: Exception) -> None:
    calls: list[int] = []

    @tool(retries=3)
    async def ender() -> None:
        calls.append(1)
        raise exc

    with pytest.raises(type(exc)):
        await run_tool(ender, {}, make_ctx(), sleep=Sleeps())
    assert calls == [1]


async def test_cancelled_token_stops_retrying() -> None:
    attempts: list[int] = []
    ctx = make_ctx()

    @tool(retries=3)
    def cancels_then_fails() -> None:
        attempts.append(1)
        ctx.cancel_token.cancel("user stop")
        raise ValueError("failed")

    with pytest.raises(RunCancelled) as info:
        await run_tool(cancels_then_fails, {}, ctx, sleep=Sleeps())
    assert (attempts, info.value.reason) == ([1], "user stop")


async def test_task_cancellation_propagates() -> None:
    started = asyncio.Event()

    @tool(retries=3)
    async def waits() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(run_tool(waits, {}, make_ctx(), sleep=Sleeps()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- retries and timeouts ---------------------------------------------------------------


async def test_retries_count_attempts_after_the_first_with_capped_backoff() -> None:
    attempts: list[int] = []
    errors: list[BaseException] = []

    @tool(retries=5)
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 6:
            raise ConnectionError(f"try {len(attempts)}")
        return "done"

    sleeps = Sleeps()
    outcome = await run_tool(flaky, {}, make_ctx(), on_error=errors.append, sleep=sleeps)
    assert (outcome.output, outcome.is_error) == ("done", False)
    assert len(attempts) == 6
    assert sleeps.delays == [0.5, 1.0, 2.0, 4.0, 5.0]
    assert [str(e) for e in errors] == [f"try {i}" for i in range(1, 6)]


async def test_exhausted_retries_surface_as_a_tool_error_result() -> None:
    @tool(retries=2)
    def always() -> None:
        raise ValueError("down")

    outcome = await run_tool(always, {}, make_ctx(), sleep=Sleeps())
    assert outcome.is_error
    assert outcome.output == "Tool error: ValueError: down (gave up after 3 attempts)"
    assert isinstance(outcome.error, ToolError)
    assert isinstance(outcome.error.__cause__, ValueError)


async def test_none_retries_inherit_the_agent_default() -> None:
    attempts: list[int] = []

    @tool
    def always() -> None:
        attempts.append(1)
        raise ValueError("down")

    await run_tool(always, {}, make_ctx(), default_retries=2, sleep=Sleeps())
    assert len(attempts) == 3


async def test_tool_retries_override_the_agent_default() -> None:
    attempts: list[int] = []

    @tool(retries=0)
    def always() -> None:
        attempts.append(1)
        raise ValueError("down")

    outcome = await run_tool(always, {}, make_ctx(), default_retries=4, sleep=Sleeps())
    assert len(attempts) == 1
    assert outcome.output == "Tool error: ValueError: down"


async def test_each_retry_gets_fresh_top_level_args() -> None:
    seen: list[dict[str, Any]] = []

    async def mutating(invoke: ToolInvoker, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        seen.append(dict(args))
        args["injected"] = True
        raise ValueError("again")

    @tool(retries=1, policies=[mutating])
    def f(a: int) -> int:
        return a

    original = {"a": 1}
    await run_tool(f, original, make_ctx(), sleep=Sleeps())
    assert seen == [{"a": 1}, {"a": 1}]
    assert original == {"a": 1}


async def test_timeout_applies_per_attempt() -> None:
    attempts: list[int] = []

    @tool(timeout=0.01, retries=1)
    async def hangs() -> None:
        attempts.append(1)
        await asyncio.Event().wait()

    outcome = await run_tool(hangs, {}, make_ctx(), sleep=Sleeps())
    assert len(attempts) == 2
    assert outcome.output == (
        "Tool error: tool 'hangs' timed out after 0.01 s\n"
        "Hint: retry with a smaller request, or raise the tool's timeout "
        "(gave up after 2 attempts)"
    )


async def test_agent_default_timeout_applies_when_the_tool_has_none() -> None:
    @tool
    async def hangs() -> None:
        await asyncio.Event().wait()

    outcome = await run_tool(hangs, {}, make_ctx(), default_timeout=0.01)
    assert outcome.is_error
    assert outcome.output.startswith("Tool error: tool 'hangs' timed out after 0.01 s")


async def test_timeout_wraps_the_policy_chain() -> None:
    async def stalls(invoke: ToolInvoker, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        await asyncio.Event().wait()  # a policy that never returns is cut off too

    @tool(timeout=0.01, policies=[stalls])
    def fast() -> str:
        return "never reached"

    outcome = await run_tool(fast, {}, make_ctx())
    assert outcome.is_error
    assert outcome.output.startswith("Tool error: tool 'fast' timed out after 0.01 s")


async def test_timeout_error_raised_by_the_tool_is_not_reported_as_a_timeout() -> None:
    @tool(timeout=5)
    async def own() -> None:
        raise TimeoutError("upstream slow")

    outcome = await run_tool(own, {}, make_ctx())
    assert outcome.output == "Tool error: TimeoutError: upstream slow"


# --- policies ---------------------------------------------------------------------------


async def test_policies_compose_first_outermost_and_see_raw_args() -> None:
    log: list[str] = []

    def make(label: str) -> Any:
        async def policy(invoke: ToolInvoker, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
            log.append(f"{label}>{args['n']!r}")
            result = await invoke(args, ctx)
            log.append(f"{label}<")
            return result

        return policy

    @tool(policies=[make("outer"), make("inner")])
    def double(n: int) -> int:
        log.append("fn")
        return n * 2

    outcome = await run_tool(double, {"n": "4"}, make_ctx())
    assert outcome.raw == 8
    assert log == ["outer>'4'", "inner>'4'", "fn", "inner<", "outer<"]


async def test_policy_can_short_circuit() -> None:
    calls: list[int] = []

    async def cached(invoke: ToolInvoker, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        return "from cache"

    @tool(policies=[cached])
    def expensive() -> str:
        calls.append(1)
        return "computed"

    outcome = await run_tool(expensive, {}, make_ctx())
    assert (outcome.output, calls) == ("from cache", [])


async def test_retries_wrap_the_policy_chain_one_attempt_each() -> None:
    seen: list[int] = []

    async def count(invoke: ToolInvoker, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        seen.append(1)
        return await invoke(args, ctx)

    @tool(retries=2, policies=[count])
    def always() -> None:
        raise ValueError("x")

    await run_tool(always, {}, make_ctx(), sleep=Sleeps())
    assert len(seen) == 3


async def test_apply_tool_policies_without_policies_returns_invoke() -> None:
    async def invoke(args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        return args

    assert apply_tool_policies(invoke, ()) is invoke


# --- truncation, large outputs, parts ---------------------------------------------------


def test_truncate_keeps_head_and_tail_and_states_the_cut() -> None:
    text = "a" * 50 + "b" * 50
    assert (
        truncate_tool_output(text, 20)
        == "a" * 10 + "\n[... 80 characters truncated ...]\n" + "b" * 10
    )


def test_truncate_leaves_short_text_alone() -> None:
    assert truncate_tool_output("short", 5) == "short"


async def test_output_over_the_cap_is_truncated_and_drops_raw() -> None:
    @tool
    def big() -> str:
        return "x" * 1000

    outcome = await run_tool(big, {}, make_ctx(), max_output_chars=100)
    assert outcome.raw is None and not outcome.is_error
    assert outcome.output == "x" * 50 + "\n[... 900 characters truncated ...]\n" + "x" * 50


async def test_tool_cap_overrides_the_agent_cap() -> None:
    @tool(max_output_chars=10)
    def big() -> str:
        return "y" * 30

    outcome = await run_tool(big, {}, make_ctx(), max_output_chars=None)
    assert outcome.output == "y" * 5 + "\n[... 20 characters truncated ...]\n" + "y" * 5


async def test_no_cap_keeps_long_output_whole() -> None:
    @tool
    def big() -> str:
        return "z" * 1000

    outcome = await run_tool(big, {}, make_ctx(), max_output_chars=None)
    assert (outcome.output, outcome.raw) == ("z" * 1000, "z" * 1000)


async def test_large_output_under_the_cap_drops_raw_but_keeps_text() -> None:
    payload = ["w" * 100] * 1000

    @tool
    def large() -> list[str]:
        return payload

    outcome = await run_tool(large, {}, make_ctx())
    assert outcome.raw is None
    assert json.loads(outcome.output) == payload


async def test_long_error_output_is_capped() -> None:
    @tool
    def noisy() -> None:
        raise ToolError("e" * 500)

    outcome = await run_tool(noisy, {}, make_ctx(), max_output_chars=40)
    assert outcome.output.startswith("Tool error: e")
    assert "[... 472 characters truncated ...]" in outcome.output


async def test_image_parts_are_stored_and_projected() -> None:
    image = ImagePart.from_bytes(b"\x89PNG\r\n", "image/png")  # 6 bytes: no base64 padding

    @tool(returns_images=True)
    def screenshot() -> list[Any]:
        return [TextPart("the page"), image]

    outcome = await run_tool(screenshot, {}, make_ctx())
    assert outcome.parts == (TextPart("the page"), image)
    assert outcome.output == "the page\n[image: image/png, 6 bytes]"
    assert (outcome.raw, outcome.is_error) == (None, False)


async def test_a_single_part_is_stored_as_parts() -> None:
    @tool
    def one() -> ImagePart:
        return ImagePart(url="https://example.test/a.png")

    outcome = await run_tool(one, {}, make_ctx())
    assert outcome.parts == (ImagePart(url="https://example.test/a.png"),)
    assert outcome.output == "[image: https://example.test/a.png]"
