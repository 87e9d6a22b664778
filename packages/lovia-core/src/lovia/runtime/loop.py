"""``RunLoop``: the only owner of a run's mutable state.

Start reading at ``stream()``: it wraps ``_run()`` (the phases) with the single dispatch
point (hooks are awaited there, in stream order, right before the consumer sees each event)
and with the terminal event. ``_run()`` is a sequence of small phases per turn:

1. between turns: cancel check, budget check, ``max_turns``;
2. ``TurnStarted`` (its hooks run before the drain, so a push from one lands this turn),
   then the mailbox drain into user entries (``UserMessageInjected``);
3. the system head re-rendered (instructions callables run every turn);
4. the view: the context policy, then view injectors on the view only (fail-open);
5. the model call (``model_turn.ModelTurn``: deltas forwarded unchanged, retries);
6. (``_end_turn()`` from here) the reply appended (``MessageCompleted``), the budget
   checked again;
7. tool calls (``tool_calls.ToolCallProcessor``), then a pending handoff applied;
8. or, with no calls, the final output: parse, repair turn, output guardrails.

Per-turn work is O(new entries): the transcript is the live ``ctx.entries`` list and
``RunState`` keeps what the turn needs incrementally; nothing re-walks it.

Persistence seams: ``_open()`` takes the session lease and applies the checkpoint policy
(a completed ``run_id`` is replayed there, ``runtime/resume.py``); ``_save_progress()``
runs after each model output and each tool result (``runtime/checkpoint.py``);
``_persist_success()`` runs once on success: checkpoint finalised, then the session append.

Why this module is longer than 600 lines: it is the one owner of a run's mutable state
(01-internals, "Runner split"), so every phase that reads or writes that state is a short
method here; the work that needs no loop state lives in the other ``runtime/`` modules.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import AsyncExitStack, aclosing
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..cancellation import CancelToken
from ..context_policy import CompactionRequest, ContextPolicy, ContextResult
from ..events import (
    CompactionNotice,
    ContextCompacted,
    Event,
    HandoffOccurred,
    MessageCompleted,
    RunCompleted,
    RunFailed,
    RunStarted,
    TurnEnded,
    TurnStarted,
    UserMessageInjected,
)
from ..exceptions import ContextOverflowError, MaxTurnsExceeded, OutputValidationError, UserError
from ..messages import Message, ToolCall, Usage
from ..run_context import RunContext
from ..steering import Mailbox
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    TranscriptEntry,
    entries_to_messages,
    input_to_entries,
)
from ._views import LiveView, ViewWithTail
from .model_turn import ModelTurn, TurnAssembly
from .result import RunResult
from .run_state import ActiveAgent, RunState
from .tool_calls import PlannedCall, ToolCallProcessor

if TYPE_CHECKING:
    from ..agent import Agent
    from ..approvals import ApprovalChannel
    from ..budget import RunBudget
    from ..checkpointer import CheckpointOptions, RunSnapshot
    from ..retry import RetryPolicy
    from ..session import Segment, Session
    from ..tracing import Tracer
    from .checkpoint import CheckpointWriter

__all__ = ["RunLoop"]

_log = logging.getLogger("lovia.runtime")

T = TypeVar("T")

_NO_OUTPUT: Any = object()  # sentinel: the turn produced no final output


class RunLoop(Generic[T]):
    """One run of ``agent`` on ``input`` (built by ``Runner``; see the module docstring)."""

    def __init__(
        self,
        agent: Agent[Any],
        input: str | Sequence[Message] | Sequence[TranscriptEntry],
        *,
        context: Any = None,
        output_type: Any = None,
        extra_instructions: str | None = None,
        max_turns: int = 50,
        budget: RunBudget | None = None,
        cancel_token: CancelToken | None = None,
        mailbox: Mailbox | None = None,
        retry: RetryPolicy | None = None,
        context_policy: ContextPolicy | None = None,
        session: Session | None = None,
        session_id: str | None = None,
        lease_timeout: float | None = None,
        tracer: Tracer | None = None,
        run_id: str | None = None,
        interactive: bool = True,
        checkpoint: CheckpointOptions | None = None,
    ) -> None:
        _check_options(session, session_id, lease_timeout, max_turns)
        from ..approvals import ApprovalChannel
        from ..tracing import NoopTracer

        self.agent = agent
        self.input = input
        self.output_type = output_type
        self.extra_instructions = extra_instructions
        self.max_turns = max_turns
        self.retry = retry if retry is not None else agent.retry
        self.context_policy = context_policy
        self.session = session
        self.session_id = session_id
        self.lease_timeout = lease_timeout
        """How long to wait for the session lease (``None``: no limit; ``0``: fail at once)."""
        self.interactive = interactive
        """A consumer may decide approvals late (out of band) while other calls run."""
        self.cancel_token = cancel_token if cancel_token is not None else CancelToken()
        self.mailbox = mailbox if mailbox is not None else Mailbox()
        self.tracer: Tracer = tracer if tracer is not None else NoopTracer()
        self.approvals: ApprovalChannel = ApprovalChannel()
        self.usage = Usage()
        self.checkpoint = checkpoint
        self.writer: CheckpointWriter | None = None
        self._resume: RunSnapshot | None = None
        """The interrupted run this loop resumes (set by ``_open``)."""
        self._segments: list[Segment] | None = None
        self.run_id = run_id or (checkpoint.run_id if checkpoint else None) or _new_run_id()
        self.transcript: list[TranscriptEntry] = []
        self._live_view = LiveView(self.transcript)
        self.ctx: RunContext[Any] = RunContext(
            deps=context,
            agent=agent,
            cancel_token=self.cancel_token,
            mailbox=self.mailbox,
            entries=self.transcript,
            usage=self.usage,
            session_id=session_id,
            run_id=self.run_id,
            budget=budget,
            tracer=self.tracer,
        )
        self.state: RunState | None = None
        self.policy: ContextPolicy | None = None
        self.finished = False
        self.result: RunResult[T] | None = None
        self.error: BaseException | None = None
        self._stack: AsyncExitStack | None = None
        self._dispatching = False
        """Whether any activated agent or plugin has hook handlers (else dispatch is skipped)."""
        self._late_events: list[Event] = []

    # -- driving ----------------------------------------------------------------------

    async def run(self) -> RunResult[T]:
        """Drive the run to its end; return the result or raise its error."""
        async for _ in self.stream():
            pass
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    async def stream(self) -> AsyncGenerator[Event, None]:
        """Every event of the run, ending with exactly one ``RunCompleted``/``RunFailed``.

        Run failures become ``RunFailed``; ``BaseException``s (task cancellation, an
        abandoned stream's ``GeneratorExit``) tear the run down and propagate. The terminal
        event reaches hooks before teardown (plugin hooks may still use their resources)
        and the consumer after it, so a consumer that stops at the terminal event leaves
        nothing open.
        """
        terminal: Event
        self._stack = AsyncExitStack()
        try:
            try:
                with self.tracer.span(
                    "run", agent=self.agent.name, run_id=self.run_id, resumed=False
                ) as span:
                    try:
                        async with aclosing(self._run()) as events:
                            async for event in events:
                                if self._dispatching:
                                    await self._dispatch(event)
                                yield event
                    finally:
                        span.set_attribute("turns", self.state.turn if self.state else 0)
                        span.set_attribute("total_tokens", self.usage.total_tokens)
                        if self._resume is not None:
                            span.set_attribute("resumed", True)
                assert self.result is not None
                terminal = RunCompleted(self.result)
                _log.info(
                    "run.done: agent=%s turns=%d", self.result.final_agent.name, self.result.turns
                )
            except Exception as exc:  # noqa: BLE001 - the stream contract: a failure is RunFailed
                self.error = exc
                if self.writer is not None:
                    await self.writer.save_failure(self.state, exc)
                terminal = RunFailed(exc)
                _log.info("run.failed: %s: %s", type(exc).__name__, exc)
            self.finished = True
            if self._dispatching:
                await self._dispatch(terminal)
        finally:
            await self._teardown()
        yield terminal

    async def _teardown(self) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            return
        try:
            await stack.aclose()
        except Exception:  # noqa: BLE001 - fail-open: the run already has its outcome
            _log.warning(
                "run teardown failed (plugin aclose, workspace or provider close)", exc_info=True
            )

    async def _dispatch(self, event: Event) -> None:
        state = self.state
        if state is None:
            return
        hooks = state.active.hooks
        if isinstance(event, HandoffOccurred):
            source = state.activations.get(id(event.from_agent))
            extra = source.hooks if source is not None else ()
            hooks = tuple(dict.fromkeys((*extra, *hooks)))
        for h in hooks:
            await h.dispatch(event, self.ctx)

    # -- the phases -------------------------------------------------------------------

    async def _run(self) -> AsyncGenerator[Event, None]:
        """Open, start (or catch up a resumed turn), then turns until ``self.result`` is set."""
        if await self._open():
            return  # a replay: the stored result, and no event but the terminal one
        state = await self._start()
        ctx = self.ctx
        yield RunStarted(self.agent)
        _log.info("run.start: agent=%s run_id=%s", self.agent.name, self.run_id)
        if self._resume is None:
            await self._check_input()
        else:
            async with aclosing(self._catch_up(state)) as caught_up:
                async for event in caught_up:
                    yield event
        while self.result is None:
            self._between_turns(state)
            state.turn += 1
            ctx.turn = state.turn
            agent = state.active.agent
            yield TurnStarted(agent, state.turn)
            if len(self.mailbox):
                for event in self._drain_mailbox(state):
                    yield event
                await self._save_progress()  # injected messages are durable before the call
            await self._render_system(state)
            view, compacted = await self._build_view(state)
            if compacted is not None:
                yield compacted
            model_turn = self._model_turn(state, view)
            # Deltas are forwarded from here, not from a helper: each generator layer costs
            # per delta, and deltas are the hot path.
            async with aclosing(model_turn.stream()) as deltas:
                async for event in deltas:
                    yield event
            async with aclosing(self._end_turn(state, agent, model_turn.assembly)) as events:
                async for event in events:
                    yield event

    async def _end_turn(
        self, state: RunState, agent: Agent[Any], asm: TurnAssembly
    ) -> AsyncGenerator[Event, None]:
        """After the reply: record it, then run its tool calls (and apply a handoff) or
        settle the final output; on success set ``self.result`` and persist the run."""
        for event in self._late_events:
            yield event
        self._late_events.clear()
        entries, calls = self._record_reply(state, asm)
        if entries:
            yield MessageCompleted(entries)
        await self._save_progress()
        if self.ctx.budget is not None:
            self.ctx.budget.check(self.usage)
        output: Any = _NO_OUTPUT
        if calls:
            async with aclosing(self._tool_phase(state, calls)) as tool_events:
                async for event in tool_events:
                    yield event
            handoff = await self._apply_handoff(state)
            if handoff is not None:
                yield handoff
        elif state.finish_reason != "pause_turn":
            # (A paused turn, Anthropic server tools, is not a final answer: sending the
            # partial reply back is how the vendor continues it.)
            done, value = await self._final_output(state, entries)
            if done:
                await self._check_output(state, value)
                output = value
        yield TurnEnded(agent, state.turn)
        if output is not _NO_OUTPUT:
            self.result = self._build_result(state, output)
            await self._persist_success()

    async def _open(self) -> bool:
        """Take the session lease and the run-id lease, then open the checkpoint; ``True``
        for a replay."""
        assert self._stack is not None
        from ..session import hold_lease, read_segments

        if self.session is not None:
            assert self.session_id is not None
            lease = hold_lease(self.session, self.session_id, timeout=self.lease_timeout)
            await self._stack.enter_async_context(lease)
        if self.checkpoint is None:
            return False
        from .resume import open_checkpoint, replay

        if self.checkpoint.checkpointer is not None:  # a run id is an idempotency key
            assert self.checkpoint.run_id is not None
            run_lease = hold_lease(
                self.checkpoint.checkpointer, self.checkpoint.run_id, timeout=self.lease_timeout
            )
            await self._stack.enter_async_context(run_lease)
        if self.session is not None:
            assert self.session_id is not None
            self._segments = await read_segments(self.session, self.session_id)
        in_session = any(s.run_id == self.run_id for s in self._segments or ())
        opening = await open_checkpoint(
            self.checkpoint, in_session=in_session, session_id=self.session_id
        )
        self.writer = opening.writer
        snapshot = opening.snapshot
        if snapshot is not None and snapshot.head.status == "completed":
            self.result = await replay(self, snapshot, heal=not in_session)
            return True
        self._resume = snapshot
        return False

    async def _start(self) -> RunState:
        """Resolve the agent (a resumed run's active one) and posture, build the transcript."""
        policy = self.context_policy
        if policy is None:
            policy = self.agent.context_policy
        self.policy = policy if policy is not None else _default_policy()
        release = getattr(self.policy, "release", None)  # optional seam method
        if callable(release) and self._stack is not None:
            # A policy instance shared across runs drops this run's per-run state at its end.
            self._stack.callback(release, self.run_id)
        snapshot = self._resume
        agent = self.agent
        if snapshot is not None:
            from .resume import agent_to_resume

            agent = self.ctx.agent = agent_to_resume(self.agent, snapshot)
        active = await self._activate(agent)
        history, scratch = await self._load_session()
        transcript = self.transcript
        transcript.extend(history)
        if snapshot is None:
            transcript.extend(input_to_entries(self.input))
        else:
            from .resume import restored_entries

            transcript.extend(restored_entries(snapshot))
        state = self.state = RunState(
            active=active, transcript=transcript, usage=self.usage, run_start=len(history)
        )
        state.context_scratch = scratch
        state.activations[id(agent)] = active
        if snapshot is not None:
            from .resume import restore_head

            restore_head(state, snapshot.head)
            self.ctx.turn = state.turn
        self.ctx.workspace = active.workspace_session
        await self._render_system(state)
        return state

    async def _catch_up(self, state: RunState) -> AsyncGenerator[Event, None]:
        """A resumed run: finish the interrupted turn (see ``runtime/resume.py``)."""
        from .resume import catch_up, plan_resume

        plan = plan_resume(state.own_entries(), state.active.handoffs)
        async with aclosing(catch_up(self, state, plan)) as events:
            async for event in events:
                yield event

    async def _check_input(self) -> None:
        assert self.state is not None
        guardrails = self.state.active.input_guardrails
        if guardrails:
            from ..guardrails import run_input_guardrails

            await run_input_guardrails(guardrails, entries_to_messages(self.transcript), self.ctx)

    def _between_turns(self, state: RunState) -> None:
        self.cancel_token.check()
        budget = self.ctx.budget
        if budget is not None:
            budget.check(self.usage)
        if state.turn >= self.max_turns:
            _log.warning(
                "run.max_turns: agent=%s max_turns=%d", state.active.agent.name, self.max_turns
            )
            raise MaxTurnsExceeded(
                f"the run reached max_turns={self.max_turns} without a final answer",
                hint="raise max_turns=, or check whether the agent loops on a tool",
            )

    def _drain_mailbox(self, state: RunState) -> Iterator[Event]:
        for content in self.mailbox.drain():
            state.append(InputEntry("user", content))  # already str or a tuple of parts
            yield UserMessageInjected(content, state.turn)

    async def _render_system(self, state: RunState) -> None:
        active = state.active
        text = active.static_prompt
        if text is None:
            text = await active.agent.render_instructions(self.ctx, self.extra_instructions)
        self.ctx.system_prompt = text
        suffix = active.prompt_suffix
        state.set_system_head(f"{text}\n\n{suffix}" if text and suffix else text or suffix)

    async def _build_view(
        self, state: RunState
    ) -> tuple[Sequence[TranscriptEntry], ContextCompacted | None]:
        result = await self._compact(state, overflow=False, reported_window=None)
        event = self._note_compaction(result, reactive=False) if result.compacted else None
        return await self._augment_view(state, result.entries), event

    async def _compact(
        self, state: RunState, *, overflow: bool, reported_window: int | None
    ) -> ContextResult:
        active = state.active
        assert self.policy is not None
        request = CompactionRequest(
            # Never the list itself: a policy mutating its request cannot hurt the record.
            # The proactive path gets an O(1) read-only view; the rare reactive one a copy.
            entries=tuple(self.transcript) if overflow else self._live_view,
            provider=active.provider,
            model=active.provider.model,
            tools=active.offered,
            tool_names=active.tool_names,
            last_input_tokens=state.last_input_tokens,
            overflow=overflow,
            reported_window=reported_window,
            scratch=state.context_scratch,
            session_id=self.session_id,
            run_id=self.run_id,
        )
        return await self.policy.compact(request)

    def _note_compaction(self, result: ContextResult, *, reactive: bool) -> ContextCompacted:
        notice = CompactionNotice(
            reason=result.reason or ("overflow" if reactive else "threshold"),
            reactive=reactive,
            summary=result.summary,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            detail=tuple(result.detail),
        )
        assert self.state is not None
        self.state.notices.append(notice.to_dict())
        return ContextCompacted(self.session_id, len(self.transcript), len(result.entries), notice)

    async def _augment_view(
        self, state: RunState, view: Sequence[TranscriptEntry]
    ) -> Sequence[TranscriptEntry]:
        """Append view injectors' entries to this call's view only (fail-open)."""
        injectors = state.active.view_injectors
        if not injectors:
            return view
        extra: list[TranscriptEntry] = []
        for injector in injectors:
            try:
                produced = injector(self.ctx)
                if inspect.isawaitable(produced):
                    produced = await produced
                extra.extend(produced)
            except Exception:  # noqa: BLE001 - fail-open: a broken injector is skipped
                _log.warning("view injector %r raised; skipped", injector, exc_info=True)
        return ViewWithTail(view, tuple(extra)) if extra else view

    async def _on_overflow(self, exc: ContextOverflowError) -> Sequence[TranscriptEntry] | None:
        assert self.state is not None
        result = await self._compact(self.state, overflow=True, reported_window=exc.reported_window)
        if not result.compacted:
            return None
        self._late_events.append(self._note_compaction(result, reactive=True))
        return await self._augment_view(self.state, result.entries)

    def _model_turn(self, state: RunState, view: Sequence[TranscriptEntry]) -> ModelTurn:
        active = state.active
        return ModelTurn(
            active.provider,
            view,
            tools=active.offered,
            response_format=active.response_format,
            settings=active.agent.settings,
            retry=self.retry,
            token=self.cancel_token,
            tracer=self.tracer,
            turn=state.turn,
            on_overflow=self._on_overflow,
        )

    def _record_reply(
        self, state: RunState, asm: TurnAssembly
    ) -> tuple[list[TranscriptEntry], list[PlannedCall]]:
        entries = asm.entries(state.active.provider.name)
        start = len(self.transcript)
        self.transcript.extend(entries)
        usage = asm.usage
        if usage is not None:
            self.usage.add(usage)
            state.last_input_tokens = usage.input_tokens
        self.usage.requests += 1
        state.finish_reason = asm.finish_reason
        calls = [
            PlannedCall(ToolCall(e.call_id, e.name, e.arguments), start + i)
            for i, e in enumerate(entries)
            if isinstance(e, ToolCallEntry)
        ]
        _log.info(
            "model.done: turn=%d tokens=%d calls=%d",
            state.turn,
            self.usage.total_tokens,
            len(calls),
        )
        return entries, calls

    async def _tool_phase(
        self, state: RunState, calls: list[PlannedCall]
    ) -> AsyncGenerator[Event, None]:
        processor = ToolCallProcessor(
            state,
            self.ctx,
            approvals=self.approvals,
            interactive=self.interactive,
            truncated=state.finish_reason == "length",
            on_result=self._save_progress,
        )
        async with aclosing(processor.run_batch(calls)) as events:
            async for event in events:
                yield event

    async def _apply_handoff(self, state: RunState) -> HandoffOccurred | None:
        """Swap to a pending handoff's target at turn end; the body of the transcript stays."""
        signal = state.pending_handoff
        if signal is None:
            return None
        state.pending_handoff = None
        source = state.active.agent
        target = signal.handoff.target
        with self.tracer.span("handoff", from_agent=source.name, to_agent=target.name):
            active = state.activations.get(id(target))
            if active is None:
                self.ctx.agent = target  # plugins set up for the target see it as the agent
                active = await self._activate(target)
            state.activate(active)
            self.ctx.agent = target
            self.ctx.workspace = active.workspace_session
            await self._render_system(state)
        _log.info("run.handoff: %s -> %s", source.name, target.name)
        return HandoffOccurred(source, target)

    async def _final_output(
        self, state: RunState, entries: list[TranscriptEntry]
    ) -> tuple[bool, Any]:
        """``(True, output)`` when the reply is final, ``(False, None)`` after a repair prompt."""
        text = "".join(e.content for e in entries if isinstance(e, AssistantTextEntry))
        active = state.active
        if active.text_output:
            if not text:
                _log.warning("run.empty_reply: agent=%s turn=%d", active.agent.name, state.turn)
            return True, text
        from ..output import parse_structured_output, resolve_output_repair

        try:
            return True, parse_structured_output(text, active.output_type)
        except OutputValidationError as exc:
            strategy = resolve_output_repair(active.agent.output_repair)
            state.repair_attempts += 1
            prompt = strategy.build_prompt(exc, state.repair_attempts) if strategy else None
            if prompt is None:
                raise
            state.append(InputEntry("user", prompt))
            return False, None

    async def _check_output(self, state: RunState, output: Any) -> None:
        guardrails = state.active.output_guardrails
        if guardrails:
            from ..guardrails import run_output_guardrails

            await run_output_guardrails(guardrails, output, self.ctx)

    def _build_result(self, state: RunState, output: Any) -> RunResult[T]:
        return RunResult(
            output=output,
            entries=state.own_entries(),
            final_agent=state.active.agent,
            usage=self.usage,
            turns=state.turn,
            finish_reason=state.finish_reason,
            last_input_tokens=state.last_input_tokens,
            run_id=self.run_id,
            session_id=self.session_id,
        )

    # -- persistence seams ------------------------------------------------------------

    async def _load_session(self) -> tuple[list[TranscriptEntry], dict[str, Any]]:
        if self.session is None:
            return [], {}
        assert self.session_id is not None
        segments = self._segments
        if segments is None:
            from ..session import read_segments

            segments = await read_segments(self.session, self.session_id)
        history = [entry for segment in segments for entry in segment.entries]
        scratch: dict[str, Any] = {}
        if segments:
            carried = segments[-1].meta.get("context")
            if isinstance(carried, dict):
                scratch = dict(carried)
        return history, scratch

    async def _save_progress(self) -> None:
        """After each model output and each tool result: the checkpoint save."""
        if self.writer is not None:
            assert self.state is not None
            await self.writer.save_running(self.state)

    async def _persist_success(self) -> None:
        """On success, in this order: finalise the checkpoint, append this run's own
        entries to the session as one segment, then ``delete_on_success``."""
        state = self.state
        assert state is not None and self.result is not None
        if self.writer is not None:
            await self.writer.finalise(state, self.result.output)
        if self.session is not None:
            assert self.session_id is not None
            meta: dict[str, Any] = {"context": state.context_scratch}
            if state.notices:
                meta["notices"] = list(state.notices)
            await self.session.append(
                self.session_id, state.own_entries(), run_id=self.run_id, meta=meta
            )
        if self.writer is not None:
            await self.writer.after_session()

    # -- agent activation -------------------------------------------------------------

    async def _activate(self, agent: Agent[Any]) -> ActiveAgent:
        from ._activation import activate_agent

        assert self._stack is not None
        active = await activate_agent(
            agent,
            self.ctx,
            self._stack,
            policy=self.policy,
            output_type=self.output_type,
            extra_instructions=self.extra_instructions,
        )
        if active.hooks:
            self._dispatching = True
        return active


def _check_options(
    session: Session | None, session_id: str | None, lease_timeout: float | None, max_turns: int
) -> None:
    """Usage mistakes fail before anything runs (``UserError`` with a hint)."""
    if session is not None and not session_id:
        raise UserError(
            "session= was given without session_id=",
            hint="pass session_id='...' to name the conversation in the session store",
        )
    if lease_timeout is not None and (session is None or lease_timeout < 0):
        raise UserError(
            f"lease_timeout={lease_timeout!r} needs a session= and must not be negative",
            hint="0 fails at once when another run holds the session; None waits for it",
        )
    if max_turns < 1:
        raise UserError(
            f"max_turns must be at least 1, got {max_turns!r}",
            hint="a turn is one model call plus its tool calls; pass max_turns=1 or more",
        )


def _default_policy() -> ContextPolicy:
    from ..context_policy import default_context_policy

    return default_context_policy()


def _new_run_id() -> str:
    import uuid

    return uuid.uuid4().hex
