"""Subagents inside Runner.run with ScriptedProvider: reports arrive through the parent's
mailbox at a turn boundary (never as a tool result), and every parent transcript pairs its
calls with results."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lovia import Agent, Mailbox, NoopContextPolicy, RunBudget, Runner, tool
from lovia.exceptions import ProviderError, RunCancelled, UserError
from lovia.plugins.subagents import ChildSpec, SubagentReport, Subagents
from lovia.run_context import RunContext
from lovia.testing import ScriptedProvider, batch, call, text
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry


def assert_paired(entries: list[TranscriptEntry]) -> None:
    calls = [e.call_id for e in entries if isinstance(e, ToolCallEntry)]
    results = [e.call_id for e in entries if isinstance(e, ToolResultEntry)]
    assert sorted(calls) == sorted(results)
    for entry in entries:  # a report is never a tool result
        if isinstance(entry, ToolResultEntry):
            assert "<subagent-report" not in entry.output or entry.call_id.startswith("w")


def outputs(entries: list[TranscriptEntry]) -> dict[str, str]:
    return {e.call_id: e.output for e in entries if isinstance(e, ToolResultEntry)}


def reports_in(entries: list[TranscriptEntry]) -> list[str]:
    return [
        e.content
        for e in entries
        if isinstance(e, InputEntry)
        and isinstance(e.content, str)
        and "<subagent-report" in e.content
    ]


@tool(parallel=False)
async def await_mail(ctx: RunContext[Any]) -> str:
    """Block until something is waiting in this run's mailbox (a barrier: runs alone)."""

    async def mail() -> None:  # polled with a deadline: the mailbox has no event to wait on
        while not len(ctx.mailbox):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(mail(), 10)
    return "mail is waiting"


def child(script: list[Any], name: str = "worker", **options: Any) -> Agent[Any]:
    return Agent(
        name=name, model=ScriptedProvider(script), context_policy=NoopContextPolicy(), **options
    )


async def run_parent(
    plugin: Subagents, script: list[Any], *, tools: list[Any] | None = None, **options: Any
) -> tuple[Any, ScriptedProvider]:
    model = ScriptedProvider(script)
    agent = Agent(
        name="parent",
        model=model,
        plugins=[plugin],
        tools=tools or [await_mail],
        context_policy=NoopContextPolicy(),
    )
    result = await Runner.run(agent, "go", **options)
    assert_paired(result.entries)
    return result, model


class Gate:
    """A child tool that blocks until released, and records whether it was cancelled."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

        @tool
        async def block() -> str:
            """Block until released."""
            self.entered.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            return "released"

        self.tool = block


# -- delivery -------------------------------------------------------------------------------


async def test_a_report_arrives_through_the_mailbox_at_the_next_turn() -> None:
    plugin = Subagents([child([text("the child found 42")])])
    result, model = await run_parent(
        plugin,
        [
            call("spawn_subagent", {"prompt": "find the answer"}, call_id="c1"),
            call("await_mail", {}, call_id="c2"),
            text("parent done"),
        ],
    )
    assert outputs(result.entries)["c1"].startswith("Started subagent sa_1 (worker)")
    (report,) = reports_in(result.entries)  # a user message in the transcript, exactly once
    assert report.startswith('<subagent-report id="sa_1" agent="worker" status="completed">')
    assert "the child found 42" in report
    assert any("the child found 42" in str(m.content) for m in model.calls[2])
    assert result.output == "parent done"


async def test_wait_withdraws_an_undelivered_report_so_it_arrives_once() -> None:
    gate = Gate()
    plugin = Subagents([child([call("block", {}), text("child output")], tools=[gate.tool])])

    @tool(parallel=False)
    async def finish_child(ctx: RunContext[Any]) -> str:
        """Release the child and return once its report sits in the mailbox (a barrier)."""
        gate.release.set()
        return str(await await_mail.invoke({}, ctx))

    box = Mailbox()
    result, model = await run_parent(
        plugin,
        [
            call("spawn_subagent", {"prompt": "work"}, call_id="c1"),
            # The barrier runs alone first, so the report is in the mailbox when wait runs.
            batch(("finish_child", {}, "c2"), ("wait_subagents", {}, "w1")),
            call("wait_subagents", {}, call_id="w2"),
            text("done"),
        ],
        tools=[finish_child],
        mailbox=box,
    )
    by_id = outputs(result.entries)
    assert "child output" in by_id["w1"]
    assert by_id["w2"] == "No subagents to wait for."
    assert reports_in(result.entries) == []  # withdrawn: never injected
    assert len(box) == 0


async def test_a_wait_in_progress_takes_the_report_before_the_mailbox() -> None:
    plugin = Subagents([child([text("waited for")])])
    box = Mailbox()
    result, _ = await run_parent(
        plugin,
        [
            batch(("spawn_subagent", {"prompt": "work"}, "c1"), ("wait_subagents", {}, "w1")),
            text("done"),
        ],
        mailbox=box,
    )
    assert "waited for" in outputs(result.entries)["w1"]
    assert reports_in(result.entries) == [] and len(box) == 0


async def test_wait_reports_still_running_on_timeout_and_bounded_mode_cancels_at_run_end() -> None:
    gate = Gate()
    worker = child([call("block", {}), text("never")], tools=[gate.tool])
    plugin = Subagents([worker])
    result, model = await run_parent(
        plugin,
        [
            call("spawn_subagent", {"prompt": "long job"}, call_id="c1"),
            call("wait_subagents", {"ids": ["sa_1"], "timeout_seconds": 0.2}, call_id="w1"),
            text("leaving"),
        ],
    )
    assert "sa_1: still running" in outputs(result.entries)["w1"]
    assert gate.cancelled  # the run ended, so its child was cancelled and awaited
    # The per-turn injector listed the running child, on the view only.
    reminder = model.calls[1][-1].content
    assert "<system-reminder>Subagents still running:" in reminder and "long job" in reminder
    assert not any("system-reminder" in str(getattr(e, "content", "")) for e in result.entries)


async def test_cancel_produces_no_report() -> None:
    gate = Gate()
    plugin = Subagents([child([call("block", {}), text("never")], tools=[gate.tool])])
    box = Mailbox()
    result, _ = await run_parent(
        plugin,
        [
            call("spawn_subagent", {"prompt": "job"}, call_id="c1"),
            call("cancel_subagent", {"id": "sa_1"}, call_id="c2"),
            call("wait_subagents", {"timeout_seconds": 5}, call_id="w1"),
            call("cancel_subagent", {"id": "sa_9"}, call_id="c3"),
            text("done"),
        ],
        mailbox=box,
    )
    by_id = outputs(result.entries)
    assert by_id["c2"] == "Cancelled sa_1; it will send no report."
    assert by_id["w1"] == "sa_1: cancelled (no report)."
    assert by_id["c3"].startswith("No subagent 'sa_9'")
    assert reports_in(result.entries) == [] and len(box) == 0


async def test_send_reaches_the_childs_next_turn_and_errors_are_soft() -> None:
    gate = Gate()
    child_model = ScriptedProvider([call("block", {}), text("child saw the note")])
    worker = Agent(
        name="worker", model=child_model, tools=[gate.tool], context_policy=NoopContextPolicy()
    )

    @tool
    async def release() -> str:
        """Let the child's blocking tool return."""
        await gate.entered.wait()
        gate.release.set()
        return "released"

    result, _ = await run_parent(
        Subagents([worker]),
        [
            call("spawn_subagent", {"prompt": "job"}, call_id="c1"),
            call(
                "send_to_subagent", {"id": "sa_1", "message": "also check the tests"}, call_id="c2"
            ),
            call("send_to_subagent", {"id": "nope", "message": "x"}, call_id="c3"),
            call("release", {}, call_id="c4"),
            call("wait_subagents", {}, call_id="w1"),
            text("done"),
        ],
        tools=[release],
    )
    by_id = outputs(result.entries)
    assert by_id["c2"].startswith("Sent to sa_1")
    assert by_id["c3"].startswith("No subagent 'nope'")  # soft: a plain result
    assert not any(e.is_error for e in result.entries if isinstance(e, ToolResultEntry))
    assert "child saw the note" in by_id["w1"]
    assert any(m.content == "also check the tests" for m in child_model.calls[1])


# -- limits and bad input -------------------------------------------------------------------


async def test_capacity_empty_prompt_and_unknown_agent() -> None:
    gate = Gate()
    a = child([call("block", {}), text("x")], name="a", tools=[gate.tool])
    b = child([text("y")], name="b")
    result, _ = await run_parent(
        Subagents([a, b], max_concurrent=1),
        [
            batch(
                ("spawn_subagent", {"prompt": "one", "agent": "a"}, "c1"),
                ("spawn_subagent", {"prompt": "two", "agent": "b"}, "c2"),
                ("spawn_subagent", {"prompt": "  ", "agent": "b"}, "c3"),
                ("spawn_subagent", {"prompt": "three", "agent": "zed"}, "c4"),
            ),
            text("done"),
        ],
    )
    by_id = outputs(result.entries)
    assert by_id["c1"].startswith("Started subagent")
    assert by_id["c2"].startswith("Not started: 1 subagents are already running")
    assert "nothing was spawned" in by_id["c3"]
    assert "unknown subagent 'zed'; available: a, b" in by_id["c4"]


def test_duplicate_child_names_are_rejected() -> None:
    with pytest.raises(UserError, match="two agents named 'w'"):
        Subagents([child([], name="w"), child([], name="w")])


async def test_a_failed_child_delivers_a_failure_report_and_bodies_are_truncated() -> None:
    failing = child([ProviderError("model down")], name="failing", retry=None)
    chatty = child([text("x" * 500)], name="chatty")
    result, _ = await run_parent(
        Subagents([failing, chatty], max_result_chars=60),
        [
            batch(
                ("spawn_subagent", {"prompt": "a", "agent": "failing"}, "c1"),
                ("spawn_subagent", {"prompt": "b", "agent": "chatty"}, "c2"),
            ),
            call("wait_subagents", {}, call_id="w1"),
            text("done"),
        ],
    )
    # Each report arrives once: by the wait, or (when both finished first) as a message.
    waited = outputs(result.entries)["w1"] + "".join(reports_in(result.entries))
    assert waited.count("<subagent-report") == 2
    assert 'agent="failing" status="failed"' in waited and "model down" in waited
    assert 'agent="chatty" status="completed"' in waited and "characters truncated" in waited


async def test_children_get_their_own_token_mailbox_and_budget_copy_and_approvals_deny() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete_everything() -> str:
        """Dangerous."""
        ran.append("deleted")
        return "deleted"

    worker = child(
        [call("delete_everything", {}), text("I was not allowed")], tools=[delete_everything]
    )
    specs: list[ChildSpec] = []

    async def vehicle(spec: ChildSpec) -> Any:
        specs.append(spec)
        return await Runner.run(
            spec.agent,
            spec.prompt,
            cancel_token=spec.token,
            mailbox=spec.mailbox,
            budget=spec.budget,
        )

    budget = RunBudget(max_tool_calls=5)
    result, _ = await run_parent(
        Subagents([worker], run_child=vehicle, budget=budget),
        [
            batch(("spawn_subagent", {"prompt": "clean up"}, "c1"), ("wait_subagents", {}, "w1")),
            text("ok"),
        ],
    )
    assert ran == []  # headless: nobody approved, so the call was denied
    assert "I was not allowed" in outputs(result.entries)["w1"]
    (spec,) = specs
    assert spec.id == "sa_1" and spec.prompt == "clean up" and spec.max_turns == 50
    assert spec.budget is not budget and spec.budget is not None
    assert spec.budget.max_tool_calls == 5 and budget.tool_calls == 0
    assert spec.budget.tool_calls == 1


async def test_no_catalog_clones_the_current_agent_without_plugins_or_handoffs() -> None:
    specs: list[ChildSpec] = []

    async def vehicle(spec: ChildSpec) -> Any:
        specs.append(spec)
        raise RunCancelled("the vehicle gave up")  # a cancelled outcome is silent

    box = Mailbox()
    result, _ = await run_parent(
        Subagents(run_child=vehicle),
        [
            batch(("spawn_subagent", {"prompt": "p"}, "c1"), ("wait_subagents", {}, "w1")),
            text("ok"),
        ],
        mailbox=box,
    )
    (spec,) = specs
    assert spec.agent.name == "parent" and spec.agent.plugins == () and spec.agent.handoffs == ()
    assert spec.parent_session_id is None
    assert outputs(result.entries)["w1"] == "sa_1: cancelled (no report)."
    assert reports_in(result.entries) == [] and len(box) == 0


async def test_detached_children_outlive_the_run_and_deliver() -> None:
    gate = Gate()
    delivered: list[SubagentReport] = []
    worker = child([call("block", {}), text("finished later")], tools=[gate.tool])
    plugin = Subagents([worker], deliver=delivered.append)
    result, _ = await run_parent(
        plugin, [call("spawn_subagent", {"prompt": "job"}, call_id="c1"), text("bye")]
    )
    assert result.output == "bye" and delivered == []
    assert not gate.cancelled  # the run ended; the detached child did not
    gate.release.set()
    await asyncio.wait_for(plugin.drain(), 10)
    (report,) = delivered
    assert (
        report.id == "sa_1" and report.status == "completed" and report.output == "finished later"
    )


async def test_a_detached_report_names_the_parent_session() -> None:
    # Detached delivery runs outside the parent run: the report says which session it
    # belongs to, so a server can route it back (lovia.web's subagent_deliver).
    from lovia.stores.memory import InMemorySession

    delivered: list[SubagentReport] = []
    plugin = Subagents([child([text("done")])], deliver=delivered.append)
    await run_parent(
        plugin,
        [call("spawn_subagent", {"prompt": "job"}, call_id="c1"), text("bye")],
        session=InMemorySession(),
        session_id="chat-7",
    )
    await asyncio.wait_for(plugin.drain(), 10)
    (report,) = delivered
    assert report.parent_session_id == "chat-7"
    assert "chat-7" not in report.render()  # the model's view is unchanged


async def test_detached_aclose_cancels_children_silently() -> None:
    gate = Gate()
    delivered: list[SubagentReport] = []
    plugin = Subagents(
        [child([call("block", {}), text("x")], tools=[gate.tool])], deliver=delivered.append
    )
    await run_parent(plugin, [call("spawn_subagent", {"prompt": "job"}, call_id="c1"), text("bye")])
    await gate.entered.wait()
    await plugin.aclose()
    assert gate.cancelled and delivered == []


async def test_children_inherit_deps_and_tracer() -> None:
    from lovia import InMemoryTracer

    seen: list[Any] = []

    @tool
    def read_deps(ctx: RunContext[Any]) -> str:
        """Report the deps."""
        seen.append(ctx.deps)
        return "ok"

    worker = child([call("read_deps", {}), text("done")], tools=[read_deps])
    tracer = InMemoryTracer()
    await run_parent(
        Subagents([worker]),
        [
            batch(("spawn_subagent", {"prompt": "p"}, "c1"), ("wait_subagents", {}, "w1")),
            text("ok"),
        ],
        context={"user": "ada"},
        tracer=tracer,
    )
    assert seen == [{"user": "ada"}]
    runs = [s for s in tracer.spans if s.name == "run"]
    assert {s.attributes.get("agent") for s in runs} == {"parent", "worker"}


async def test_cancelling_the_parent_mid_wait_cancels_its_children() -> None:
    from lovia import CancelToken

    gate = Gate()
    plugin = Subagents([child([call("block", {}), text("never")], tools=[gate.tool])])
    model = ScriptedProvider(
        [
            batch(("spawn_subagent", {"prompt": "job"}, "c1"), ("wait_subagents", {}, "w1")),
            text("never"),
        ]
    )
    agent = Agent(name="parent", model=model, plugins=[plugin], context_policy=NoopContextPolicy())
    token = CancelToken()
    running = asyncio.ensure_future(Runner.run(agent, "go", cancel_token=token))
    await asyncio.wait_for(gate.entered.wait(), 10)
    token.cancel("stop")
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(running, 10)  # the wait gave way at once
    assert gate.cancelled
