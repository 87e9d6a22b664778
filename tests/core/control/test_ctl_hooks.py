"""AgentHooks: isinstance subscription, ordering, sync/async handlers, fail-open dispatch."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from lovia.agent import Agent
from lovia.cancellation import CancelToken
from lovia.events import (
    Event,
    RunStarted,
    TextDelta,
    ToolCallCompleted,
    ToolEvent,
    TurnEnded,
    TurnStarted,
)
from lovia.exceptions import UserError
from lovia.hooks import AgentHooks
from lovia.messages import ToolCall
from lovia.run_context import RunContext
from lovia.steering import Mailbox

AGENT: Agent[Any] = Agent(name="hooked")


def make_ctx() -> RunContext[Any]:
    return RunContext(deps=None, agent=AGENT, cancel_token=CancelToken(), mailbox=Mailbox())


def completed() -> ToolCallCompleted:
    call = ToolCall(id="c1", name="add", arguments="{}")
    return ToolCallCompleted(call=call, result=3, is_error=False, output="3")


def test_empty_hooks_have_no_handlers() -> None:
    hooks = AgentHooks()
    assert hooks.has_handlers is False

    @hooks.on(TurnStarted)
    def noop(event: TurnStarted, ctx: RunContext[Any]) -> None: ...

    assert hooks.has_handlers is True


async def test_handlers_match_by_isinstance_so_a_base_catches_its_family() -> None:
    hooks = AgentHooks()
    seen: list[str] = []

    @hooks.on(ToolEvent)
    def on_tool(event: ToolEvent, ctx: RunContext[Any]) -> None:
        seen.append(type(event).__name__)

    ctx = make_ctx()
    await hooks.dispatch(completed(), ctx)
    await hooks.dispatch(TurnStarted(agent=AGENT, turn=1), ctx)
    assert seen == ["ToolCallCompleted"]


async def test_catch_alls_run_first_then_typed_handlers_in_registration_order() -> None:
    hooks = AgentHooks()
    order: list[str] = []

    @hooks.on(TurnStarted)
    def typed_first(event: Event, ctx: RunContext[Any]) -> None:
        order.append("typed_first")

    @hooks.on_any
    def catch_all(event: Event, ctx: RunContext[Any]) -> None:
        order.append("catch_all")

    @hooks.on(Event)
    async def typed_second(event: Event, ctx: RunContext[Any]) -> None:
        order.append("typed_second")

    await hooks.dispatch(TurnStarted(agent=AGENT, turn=1), make_ctx())
    assert order == ["catch_all", "typed_first", "typed_second"]


@pytest.mark.parametrize(
    "register",
    [
        lambda hooks: hooks.on(TurnStarted, TurnEnded),
        lambda hooks: hooks.on((TurnStarted, TurnEnded)),
    ],
    ids=["varargs", "tuple"],
)
async def test_on_accepts_several_types_as_varargs_or_a_tuple(register: Any) -> None:
    hooks = AgentHooks()
    seen: list[str] = []

    @register(hooks)
    def handler(event: Event, ctx: RunContext[Any]) -> None:
        seen.append(type(event).__name__)

    ctx = make_ctx()
    for event in (TurnStarted(agent=AGENT, turn=1), TextDelta("x"), TurnEnded(agent=AGENT, turn=1)):
        await hooks.dispatch(event, ctx)
    assert seen == ["TurnStarted", "TurnEnded"]


async def test_handlers_receive_the_event_and_the_live_context() -> None:
    hooks = AgentHooks()
    received: list[tuple[Event, RunContext[Any]]] = []

    @hooks.on(RunStarted)
    async def handler(event: RunStarted, ctx: RunContext[Any]) -> None:
        received.append((event, ctx))

    event, ctx = RunStarted(agent=AGENT), make_ctx()
    await hooks.dispatch(event, ctx)
    assert received == [(event, ctx)]
    assert received[0][1] is ctx


async def test_a_raising_handler_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hooks = AgentHooks()
    ran: list[str] = []

    @hooks.on_any
    def broken(event: Event, ctx: RunContext[Any]) -> None:
        raise RuntimeError("handler bug")

    @hooks.on(ToolCallCompleted)
    async def broken_async(event: Event, ctx: RunContext[Any]) -> None:
        raise ValueError("async bug")

    @hooks.on(ToolCallCompleted)
    def healthy(event: Event, ctx: RunContext[Any]) -> None:
        ran.append("healthy")

    with caplog.at_level(logging.ERROR, logger="lovia.hooks"):
        await hooks.dispatch(completed(), make_ctx())
    assert ran == ["healthy"]
    failures = [(r.name, r.exc_info[0] if r.exc_info else None) for r in caplog.records]
    assert failures == [("lovia.hooks", RuntimeError), ("lovia.hooks", ValueError)]
    assert "broken" in caplog.records[0].getMessage()


async def test_registering_after_a_dispatch_is_seen_by_the_next_dispatch() -> None:
    hooks = AgentHooks()
    seen: list[str] = []
    ctx = make_ctx()
    await hooks.dispatch(TextDelta("a"), ctx)  # fills the per-type cache

    @hooks.on(TextDelta)
    def late(event: TextDelta, ctx: RunContext[Any]) -> None:
        seen.append(event.delta)

    await hooks.dispatch(TextDelta("b"), ctx)
    assert seen == ["b"]


async def test_merge_keeps_order_and_catch_alls_first() -> None:
    first, second = AgentHooks(), AgentHooks()
    order: list[str] = []

    @first.on(TurnStarted)
    def first_typed(event: Event, ctx: RunContext[Any]) -> None:
        order.append("first_typed")

    @second.on_any
    def second_any(event: Event, ctx: RunContext[Any]) -> None:
        order.append("second_any")

    @second.on(TurnStarted)
    def second_typed(event: Event, ctx: RunContext[Any]) -> None:
        order.append("second_typed")

    merged = AgentHooks.merge(first, None, second)
    await merged.dispatch(TurnStarted(agent=AGENT, turn=1), make_ctx())
    assert order == ["second_any", "first_typed", "second_typed"]
    assert AgentHooks.merge(None).has_handlers is False


def test_decorators_return_the_handler_unchanged() -> None:
    hooks = AgentHooks()

    def handler(event: Event, ctx: RunContext[Any]) -> None: ...

    assert hooks.on(TurnStarted)(handler) is handler
    assert hooks.on_any(handler) is handler


@pytest.mark.parametrize(
    "types",
    [(), (str,), ("TurnStarted",), ((TurnStarted, int),)],
    ids=["none", "not-an-event", "string", "tuple-with-non-event"],
)
def test_on_rejects_missing_or_non_event_types(types: tuple[Any, ...]) -> None:
    with pytest.raises(UserError):
        AgentHooks().on(*types)
