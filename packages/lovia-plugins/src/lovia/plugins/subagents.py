"""``Subagents``: background child runs the model starts, steers, waits for and cancels.

Deliberately loop-invisible (01-internals, "Subagents"): a child is a plain ``Runner.run``
coroutine on an asyncio task, and its report re-enters the parent only through seams the
loop already has. A finished child pushes its report into the parent's mailbox, which the
loop drains at the next turn boundary; ``wait_subagents`` collects a report directly and
withdraws the undelivered mailbox copy (``Mailbox.remove``), so nothing arrives twice. A
report is never a late tool result, which would break call/result pairing.

Two modes. *Bounded* (``deliver=None``): children belong to the run, and the instance's
``aclose`` cancels those still running when the run ends. *Detached* (``deliver=`` set):
reports go to ``deliver(report)`` instead of the mailbox, and the tasks are parked on the
plugin object, so children outlive the run (``drain()`` waits for them, ``aclose()`` cancels
them).

``run_child`` (``ChildSpec -> RunResult``) swaps the execution vehicle (lovia.web runs
children through its supervisor). The default runs ``Runner.run`` with the parent's deps and
tracer, the child's own cancel token, mailbox and budget copy; it is not interactive, so an
approval nobody decides is denied and a headless child never hangs.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from lovia.budget import RunBudget
from lovia.cancellation import CancelToken
from lovia.exceptions import InvalidToolArguments, RunCancelled, UserError
from lovia.plugin import PluginInstance
from lovia.steering import Mailbox
from lovia.tools.base import Tool, truncate_tool_output
from lovia.transcript import InputEntry

if TYPE_CHECKING:
    from lovia.agent import Agent
    from lovia.run_context import RunContext
    from lovia.runtime.result import RunResult
    from lovia.transcript import TranscriptEntry

__all__ = ["ChildSpec", "DeliverFn", "RunChildFn", "SubagentReport", "Subagents"]

_log = logging.getLogger("lovia.plugins.subagents")

_MAX_WAIT_SECONDS = 600.0
_PROMPT_PREVIEW = 80

DEFAULT_INSTRUCTIONS = """\
You can delegate work to background subagents. spawn_subagent(prompt, agent) starts one and
returns at once with its id; give it a complete, self-contained prompt (it sees nothing else).
Its report arrives later as a <subagent-report> message. Keep working meanwhile, or call
wait_subagents to block until reports are ready. send_to_subagent adds instructions to a
running subagent; cancel_subagent stops one (a cancelled subagent sends no report)."""


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """Everything a ``run_child`` vehicle needs to run one child."""

    id: str
    agent: Agent[Any]
    prompt: str
    token: CancelToken
    """The child's own token: ``cancel_subagent`` and bounded teardown fire it."""
    parent_session_id: str | None
    max_turns: int
    budget: RunBudget | None
    """A fresh copy of the plugin's (or else the parent run's) budget."""
    mailbox: Mailbox
    """The child's own mailbox: ``send_to_subagent`` pushes here."""


@dataclass(frozen=True, slots=True)
class SubagentReport:
    """What a finished child reports (a cancelled child reports nothing)."""

    id: str
    agent: str
    status: Literal["completed", "failed"]
    output: str
    """The child's final output (truncated), or the failure's description."""
    parent_session_id: str | None = None
    """The parent run's session (``ChildSpec.parent_session_id``): where a detached
    ``deliver`` routes the report."""

    def render(self) -> str:
        """The report as the parent's model reads it."""
        return (
            f'<subagent-report id="{self.id}" agent="{self.agent}" status="{self.status}">\n'
            f"{self.output}\n</subagent-report>"
        )


DeliverFn = Callable[[SubagentReport], Union[None, Awaitable[None]]]
"""Detached mode: receives each report (sync or async)."""

RunChildFn = Callable[[ChildSpec], Awaitable["RunResult[Any]"]]
"""The execution vehicle: runs one child and returns its ``RunResult``."""


@dataclass(eq=False)
class _Child:
    spec: ChildSpec
    started: float
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    report: SubagentReport | None = None
    cancelled: bool = False
    collected: bool = False
    """``wait_subagents`` has shown the report: it must not be delivered again."""
    waiters: int = 0
    held: bool = False
    """Finished while a wait was running: that wait shows the report (not the mailbox)."""
    mail_token: int | None = None

    @property
    def running(self) -> bool:
        return not self.done.is_set()


class Subagents:
    """Background subagents as a plugin (see the module docstring).

    ``agents`` is the catalog the model picks from by name (names must be unique); with
    none, a child is the current agent minus its plugins and handoffs. ``max_concurrent``
    caps running children per run; ``max_turns`` and ``budget`` bound each child;
    ``max_result_chars`` truncates report bodies. ``instructions=None`` uses the default
    guidance and ``""`` adds none.
    """

    def __init__(
        self,
        agents: Sequence[Agent[Any]] = (),
        *,
        deliver: DeliverFn | None = None,
        run_child: RunChildFn | None = None,
        max_concurrent: int = 4,
        max_turns: int = 50,
        budget: RunBudget | None = None,
        max_result_chars: int = 16_000,
        instructions: str | None = None,
        name: str = "subagents",
    ) -> None:
        names = [a.name for a in agents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UserError(
                f"Subagents got two agents named {duplicates[0]!r}",
                hint="the model picks a subagent by name, so give each a distinct name",
            )
        for option, value in (
            ("max_concurrent", max_concurrent),
            ("max_turns", max_turns),
            ("max_result_chars", max_result_chars),
        ):
            if value < 1:
                raise UserError(f"{option} must be >= 1, got {value!r}", hint="use 1 or more")
        self.name = name
        self.agents: dict[str, Agent[Any]] = {a.name: a for a in agents}
        self.deliver = deliver
        self.run_child = run_child
        self.max_concurrent = max_concurrent
        self.max_turns = max_turns
        self.budget = budget
        self.max_result_chars = max_result_chars
        self.instructions = DEFAULT_INSTRUCTIONS if instructions is None else instructions
        self._ids = itertools.count(1)
        self._detached: set[asyncio.Task[None]] = set()  # strong refs: children outlive runs

    def __repr__(self) -> str:
        mode = "detached" if self.deliver is not None else "bounded"
        return f"Subagents(agents={list(self.agents)}, mode={mode})"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        run = _Run(self, ctx)
        lines = [self.instructions] if self.instructions else []
        if self.agents:
            lines.append("Subagents you can start: " + ", ".join(self.agents) + ".")
        return PluginInstance(
            tools=run.tools(),
            instructions="\n\n".join(lines),
            view_injectors=(run.reminder,),
            aclose=run.aclose,
        )

    async def drain(self) -> None:
        """Wait for every detached child to finish (and be delivered)."""
        while self._detached:
            await asyncio.gather(*list(self._detached), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the detached children still running, and wait for them."""
        tasks = list(self._detached)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Run:
    """One run's children and the four tools over them."""

    def __init__(self, plugin: Subagents, ctx: RunContext[Any]) -> None:
        self.plugin = plugin
        self.ctx = ctx
        self.children: dict[str, _Child] = {}
        deps, tracer = ctx.deps, ctx.tracer

        async def default_vehicle(spec: ChildSpec) -> RunResult[Any]:
            from lovia.runner import Runner

            return await Runner.run(
                spec.agent,
                spec.prompt,
                context=deps,
                tracer=tracer,
                cancel_token=spec.token,
                mailbox=spec.mailbox,
                max_turns=spec.max_turns,
                budget=spec.budget,
            )

        self.vehicle: RunChildFn = plugin.run_child or default_vehicle

    # -- lifecycle ----------------------------------------------------------------------

    def _running(self) -> list[_Child]:
        return [c for c in self.children.values() if c.running]

    async def aclose(self) -> None:
        if self.plugin.deliver is not None:
            return  # detached: the children outlive the run
        running = self._running()
        for child in running:
            self._cancel(child, "the parent run ended")
        tasks = [c.task for c in running if c.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    def _cancel(self, child: _Child, reason: str) -> None:
        child.cancelled = True
        child.spec.token.cancel(reason)
        if child.task is not None:
            child.task.cancel()  # the token is cooperative; this stops a provider call too

    # -- a child's life -----------------------------------------------------------------

    def _resolve_agent(self, name: object) -> Agent[Any]:
        agents = self.plugin.agents
        if not agents:
            # No catalog: the current agent, without what would let a child recurse or hand off.
            return self.ctx.agent.clone(plugins=(), handoffs=())
        if name is None and len(agents) == 1:
            return next(iter(agents.values()))
        if not isinstance(name, str) or name not in agents:
            raise InvalidToolArguments(
                f"unknown subagent {name!r}; available: {', '.join(agents)}",
            )
        return agents[name]

    def spawn(self, prompt: str, agent_name: object) -> str:
        if not prompt.strip():
            raise InvalidToolArguments("`prompt` is empty: nothing was spawned")
        agent = self._resolve_agent(agent_name)
        running = self._running()
        if len(running) >= self.plugin.max_concurrent:
            ids = ", ".join(c.spec.id for c in running)
            return (
                f"Not started: {len(running)} subagents are already running ({ids}), the "
                f"limit is {self.plugin.max_concurrent}. Wait for one with wait_subagents, "
                "or cancel one."
            )
        budget = self.plugin.budget or self.ctx.budget
        spec = ChildSpec(
            id=f"sa_{next(self.plugin._ids)}",
            agent=agent,
            prompt=prompt,
            token=CancelToken(),
            parent_session_id=self.ctx.session_id,
            max_turns=self.plugin.max_turns,
            budget=budget.fresh() if budget is not None else None,
            mailbox=Mailbox(),
        )
        child = _Child(spec, time.monotonic())
        self.children[spec.id] = child
        child.task = asyncio.get_running_loop().create_task(
            self._life(child), name=f"subagent:{spec.id}"
        )
        # A task cancelled before its first step never runs `_life` (nor its `finally`): mark
        # the child done when the task ends, however it ends. The run loop can go from this
        # tool to a `cancel_subagent` call without yielding to the event loop in between.
        child.task.add_done_callback(lambda _task: child.done.set())
        if self.plugin.deliver is not None:
            self.plugin._detached.add(child.task)
            child.task.add_done_callback(self.plugin._detached.discard)
        _log.info("subagent %s (%s) started", spec.id, agent.name)
        return (
            f"Started subagent {spec.id} ({agent.name}). Its report will arrive as a message "
            "when it finishes; call wait_subagents to wait for it."
        )

    async def _life(self, child: _Child) -> None:
        spec = child.spec
        report: SubagentReport | None = None
        try:
            result = await self.vehicle(spec)
            output = result.output if isinstance(result.output, str) else repr(result.output)
            report = self._report(spec, "completed", output)
            if self.plugin.deliver is None:
                self.ctx.usage.add(result.usage)
        except RunCancelled:
            child.cancelled = True  # a cancelled outcome is silent, whoever cancelled it
            _log.info("subagent %s cancelled", spec.id)
        except asyncio.CancelledError:
            if not child.cancelled:
                raise  # the task was cancelled from outside the plugin: propagate
            _log.info("subagent %s cancelled", spec.id)
        except Exception as exc:  # noqa: BLE001 - a failed child is a failure report
            _log.warning("subagent %s failed: %s", spec.id, exc)
            report = self._report(spec, "failed", f"{type(exc).__name__}: {exc}")
        finally:
            child.report = report
            child.done.set()
        if report is not None and not child.cancelled:
            await self._deliver(child, report)

    def _report(self, spec: ChildSpec, status: Any, body: str) -> SubagentReport:
        text = truncate_tool_output(body, self.plugin.max_result_chars)
        return SubagentReport(spec.id, spec.agent.name, status, text, spec.parent_session_id)

    async def _deliver(self, child: _Child, report: SubagentReport) -> None:
        if child.waiters:
            child.held = True  # a wait_subagents call is about to show it
            return
        deliver = self.plugin.deliver
        if deliver is None:
            child.mail_token = self.ctx.mailbox.push(report.render())
            return
        try:
            outcome = deliver(report)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # noqa: BLE001 - a delivery failure must not kill the other children
            _log.exception("delivering the report of subagent %s failed", report.id)
        child.collected = True

    # -- the tools ----------------------------------------------------------------------

    async def wait(self, ids: list[str] | None, timeout: float) -> str:
        if ids is None:
            chosen = [c for c in self.children.values() if not c.collected]
        else:
            unknown = [i for i in ids if i not in self.children]
            if unknown:
                raise InvalidToolArguments(
                    f"unknown subagent id(s): {', '.join(unknown)}; known: "
                    f"{', '.join(self.children) or 'none'}"
                )
            chosen = [self.children[i] for i in ids]
        if not chosen:
            return "No subagents to wait for."
        pending = [c for c in chosen if c.running]
        for child in pending:
            child.waiters += 1
        try:
            if pending:
                await self.ctx.cancel_token.race(_all_done(pending, timeout))
        except BaseException:
            # This wait will show nothing: hand held reports back to the normal route.
            for child in pending:
                child.waiters -= 1
                if child.held and not child.waiters and child.report is not None:
                    child.held = False
                    await self._deliver(child, child.report)
            raise
        for child in pending:
            child.waiters -= 1
        return "\n\n".join(self._collect(c) for c in chosen)

    def _collect(self, child: _Child) -> str:
        cid = child.spec.id
        if child.running:
            seconds = time.monotonic() - child.started
            return f"{cid}: still running ({seconds:.0f} s so far)."
        if child.cancelled:
            return f"{cid}: cancelled (no report)."
        if child.collected:
            return f"{cid}: its report was already delivered."
        if child.held and child.waiters:
            return f"{cid}: its report is being shown by another wait_subagents call."
        if child.mail_token is not None and not self.ctx.mailbox.remove(child.mail_token):
            child.collected = True
            return f"{cid}: its report was already delivered as a message."
        child.collected = True
        assert child.report is not None
        return child.report.render()

    def send(self, cid: str, message: str) -> str:
        child = self.children.get(cid)
        if child is None:
            return f"No subagent {cid!r}; known: {', '.join(self.children) or 'none'}."
        if not child.running:
            return f"Subagent {cid} has already finished; the message was not sent."
        if not message.strip():
            return "The message is empty; nothing was sent."
        child.spec.mailbox.push(message)
        return f"Sent to {cid}; it reads the message at its next turn."

    def cancel(self, cid: str) -> str:
        child = self.children.get(cid)
        if child is None:
            return f"No subagent {cid!r}; known: {', '.join(self.children) or 'none'}."
        if not child.running:
            return f"Subagent {cid} has already finished."
        self._cancel(child, "cancelled by the parent")
        return f"Cancelled {cid}; it will send no report."

    def reminder(self, ctx: RunContext[Any]) -> list[TranscriptEntry]:
        running = self._running()
        if not running:
            return []
        now = time.monotonic()
        lines = [
            f"- {c.spec.id} ({c.spec.agent.name}, {now - c.started:.0f} s): "
            f"{_preview(c.spec.prompt)}"
            for c in running
        ]
        text = "Subagents still running:\n" + "\n".join(lines)
        return [InputEntry(role="user", content=f"<system-reminder>{text}</system-reminder>")]

    def tools(self) -> tuple[Tool, ...]:
        agents = self.plugin.agents

        async def spawn(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            prompt = args.get("prompt")
            if not isinstance(prompt, str):
                raise InvalidToolArguments("`prompt` is required and must be a string")
            return self.spawn(prompt, args.get("agent"))

        async def wait(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            ids = args.get("ids")
            if ids is not None and not (
                isinstance(ids, list) and all(isinstance(i, str) for i in ids)
            ):
                raise InvalidToolArguments("`ids` must be a list of subagent ids")
            timeout = args.get("timeout_seconds", 60)
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
                raise InvalidToolArguments("`timeout_seconds` must be a number >= 0")
            return await self.wait(ids, min(float(timeout), _MAX_WAIT_SECONDS))

        async def send(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            cid, message = args.get("id"), args.get("message")
            if not isinstance(cid, str) or not isinstance(message, str):
                raise InvalidToolArguments("`id` and `message` are required strings")
            return self.send(cid, message)

        async def cancel(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            cid = args.get("id")
            if not isinstance(cid, str):
                raise InvalidToolArguments("`id` is required and must be a string")
            return self.cancel(cid)

        spawn_properties: dict[str, Any] = {
            "prompt": {"type": "string", "description": "The complete task."}
        }
        if agents:  # without a catalog every child is a copy of the current agent
            spawn_properties["agent"] = {
                "type": "string",
                "enum": list(agents),
                "description": "Which subagent.",
            }
        required = ["prompt", "agent"] if len(agents) > 1 else ["prompt"]
        ident = {"type": "string", "description": "The subagent id (from spawn_subagent)."}
        return (
            Tool(
                name="spawn_subagent",
                description="Start a background subagent on a self-contained task; returns its "
                "id at once. Its report arrives later as a message.",
                parameters={
                    "type": "object",
                    "properties": spawn_properties,
                    "required": required,
                },
                invoke=spawn,
            ),
            Tool(
                name="wait_subagents",
                description="Wait until the given subagents (default: all) finish, or the "
                "timeout passes; returns their reports and who is still running.",
                parameters={
                    "type": "object",
                    "properties": {
                        "ids": {"type": "array", "items": {"type": "string"}},
                        "timeout_seconds": {"type": "number", "default": 60},
                    },
                },
                invoke=wait,
            ),
            Tool(
                name="send_to_subagent",
                description="Send a message to a running subagent (read at its next turn).",
                parameters={
                    "type": "object",
                    "properties": {"id": ident, "message": {"type": "string"}},
                    "required": ["id", "message"],
                },
                invoke=send,
            ),
            Tool(
                name="cancel_subagent",
                description="Stop a running subagent; it sends no report.",
                parameters={
                    "type": "object",
                    "properties": {"id": ident},
                    "required": ["id"],
                },
                invoke=cancel,
            ),
        )


def _preview(prompt: str) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= _PROMPT_PREVIEW else flat[: _PROMPT_PREVIEW - 3] + "..."


async def _all_done(children: list[_Child], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for every child to finish.

    Not ``gather`` inside ``wait_for``: a cancelled gather keeps its ``CancelledError`` as
    an exception nobody retrieves, and the loop logs it when the parent is cancelled.
    """
    waits = [asyncio.ensure_future(c.done.wait()) for c in children]
    try:
        await asyncio.wait(waits, timeout=timeout)
    finally:
        for w in waits:
            w.cancel()
        await asyncio.wait(waits)
