"""``RunLoop``: the only owner of a run's mutable state.

Start reading at ``stream()``: it wraps ``_run()`` (the phases) with the single dispatch
point (hooks are awaited there, in stream order, right before the consumer sees each event)
and with the terminal event, which is also the run's one outcome state (``terminal``).
``_run()`` is a sequence of small phases per turn:

1. between turns: cancel check, budget check, ``max_turns``;
2. ``TurnStarted`` (its hooks run before the drain, so a push from one lands this turn),
   then the mailbox drain into user entries (``UserMessageInjected``);
3. the system head re-rendered (instructions callables run every turn);
4. the view: the context policy, then view injectors on the view only (fail-open);
5. the model call (``model_turn.ModelTurn``: deltas forwarded unchanged, retries);
6. the reply appended (``MessageCompleted``), the budget checked again;
7. tool calls, then a pending handoff applied;
8. or, with no calls, the final output: parse, repair turn, output guardrails; then finish.

The phase interface (``run_tools``, ``apply_handoff``, ``final_output``, ``finish``) is what
``runtime/resume.py`` drives to finish an interrupted turn (``resume.TurnPhases``); nothing
outside this class touches its private members.

The run's options arrive as one frozen, validated ``RunConfig`` (``runtime/config.py``).
Per-turn work is O(new entries): the transcript is the live ``ctx.entries`` list and
``RunState`` keeps what the turn needs incrementally; nothing re-walks it.

Persistence seams: ``_open()`` takes the session lease and the run-id lease on the
checkpointer (a run id is an idempotency key, across processes) and applies the checkpoint policy
(a completed ``run_id`` is replayed there, ``runtime/resume.py``); ``_save_progress()``
runs after each model output and each tool result (``runtime/checkpoint.py``);
``finish()`` runs once on success: checkpoint finalised, then the session append
(``record_in_session``, shared with the replay).

Why this module is longer than 600 lines: it is the one owner of a run's mutable state
(01-internals, "Runner split"), so every phase that reads or writes that state is a short
method here; the work that needs no loop state lives in the other ``runtime/`` modules.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import warnings
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import AsyncExitStack, aclosing
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_args

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
from ..messages import ToolCall, Usage
from ..run_context import RunContext
from ..steering import Mailbox
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entries_to_messages,
    input_to_entries,
)
from ._views import LiveView, ViewWithTail
from .config import RunConfig
from .model_turn import ModelTurn, TurnAssembly
from .result import RunResult, build_result
from .run_state import ActiveAgent, RunState
from .tool_calls import PlannedCall, ToolCallProcessor

if TYPE_CHECKING:
    from ..agent import Agent
    from ..approvals import ApprovalChannel
    from ..checkpointer import RunSnapshot
    from ..session import Segment
    from ..tracing import Tracer
    from .checkpoint import CheckpointWriter

__all__ = ["RunLoop"]

_log = logging.getLogger("lovia.runtime")

T = TypeVar("T")

_NO_OUTPUT: Any = object()  # sentinel: the turn produced no final output
_ENTRY_CLASSES: tuple[type[Any], ...] = get_args(TranscriptEntry)


class RunLoop(Generic[T]):
    """One run, as ``config`` describes it (built by ``Runner``; see the module docstring).

    ``terminal`` is the run's one outcome state: ``None`` while it runs, then the
    ``RunCompleted`` or ``RunFailed`` the stream ended with.
    """

    def __init__(self, config: RunConfig) -> None:
        from ..approvals import ApprovalChannel
        from ..tracing import NoopTracer

        agent = config.agent
        self.config = config
        self.agent = agent
        self.retry = config.retry if config.retry is not None else agent.retry
        self.session = config.session
        self.session_id = config.session_id
        self.lease_timeout = config.lease_timeout
        self.checkpoint = config.checkpoint
        self.cancel_token = (
            config.cancel_token if config.cancel_token is not None else CancelToken()
        )
        self.mailbox = config.mailbox if config.mailbox is not None else Mailbox()
        self.tracer: Tracer = config.tracer if config.tracer is not None else NoopTracer()
        self.approvals: ApprovalChannel = ApprovalChannel()
        self.usage = Usage()
        self.writer: CheckpointWriter | None = None
        self._resume: RunSnapshot | None = None
        """The interrupted run this loop resumes (set by ``_open``)."""
        self._segments: list[Segment] | None = None
        checkpoint = config.checkpoint
        self.run_id = (checkpoint.run_id if checkpoint else None) or _new_run_id()
        self.transcript: list[TranscriptEntry] = []
        self._live_view = LiveView(self.transcript)
        self.ctx: RunContext[Any] = RunContext(
            deps=config.context,
            agent=agent,
            cancel_token=self.cancel_token,
            mailbox=self.mailbox,
            entries=self.transcript,
            usage=self.usage,
            session_id=config.session_id,
            run_id=self.run_id,
            budget=config.budget,
            tracer=self.tracer,
        )
        self.state: RunState | None = None
        self.policy: ContextPolicy | None = None
        self.terminal: RunCompleted | RunFailed | None = None
        self._settled: RunResult[T] | None = None
        """The success result, once ``finish`` (or a replay) settled it."""
        self._terminal_reached: asyncio.Future[None] | None = None
        self._stack: AsyncExitStack | None = None
        self._dispatching = False
        """Whether any activated agent or plugin has hook handlers (else dispatch is skipped)."""
        self._late_events: list[Event] = []

    # -- driving ----------------------------------------------------------------------

    async def run(self) -> RunResult[T]:
        """Drive the run to its end; return the result or raise its error.

        A failed run's error carries the run's usage as ``run_usage`` (agent-as-tool folds
        a failed child's spending into its parent from there).
        """
        async for _ in self.stream():
            pass
        terminal = self.terminal
        if isinstance(terminal, RunFailed):
            raise terminal.error
        assert terminal is not None
        return terminal.result

    def terminal_reached(self) -> asyncio.Future[None]:
        """A future done once the terminal event is settled (for a second awaiting task)."""
        if self._terminal_reached is None:
            self._terminal_reached = asyncio.get_running_loop().create_future()
            if self.terminal is not None:
                self._terminal_reached.set_result(None)
        return self._terminal_reached

    async def stream(self) -> AsyncGenerator[Event, None]:
        """Every event of the run, ending with exactly one ``RunCompleted``/``RunFailed``.

        Run failures become ``RunFailed``; ``BaseException``s (task cancellation, an
        abandoned stream's ``GeneratorExit``) tear the run down and propagate. The terminal
        event reaches hooks before teardown (plugin hooks may still use their resources)
        and the consumer after it, so a consumer that stops at the terminal event leaves
        nothing open.
        """
        terminal: RunCompleted | RunFailed
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
                result = self._settled
                assert result is not None
                terminal = RunCompleted(result)
                _log.info("run.done: agent=%s turns=%d", result.final_agent.name, result.turns)
            except Exception as exc:  # noqa: BLE001 - the stream contract: a failure is RunFailed
                _carry_usage(exc, self.usage)
                if self.writer is not None:
                    await self.writer.save_failure(self.state, exc)
                terminal = RunFailed(exc)
                _log.info("run.failed: %s: %s", type(exc).__name__, exc)
            self.terminal = terminal
            if self._dispatching:
                await self._dispatch(terminal)
        finally:
            await self._teardown()
        if self._terminal_reached is not None and not self._terminal_reached.done():
            self._terminal_reached.set_result(None)  # after teardown: nothing is left open
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
        """Open, start (or catch up a resumed turn), then turns until the run is settled."""
        replayed = await self._open()
        if replayed is not None:
            self._settled = replayed
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
        while self._settled is None:
            self._between_turns(state)
            state.turn += 1
            ctx.turn = state.turn
            agent = state.active.agent
            yield TurnStarted(agent, state.turn)
            if len(self.mailbox):
                for event in self._drain_mailbox(state):
                    yield event
                await self._save_progress()  # injected messages are durable before the call
            if state.active.static_prompt is None:
                await self._render_system(state)
            else:
                self._set_system(state, state.active.static_prompt)  # (no coroutine per turn)
            view, compacted = await self._build_view(state)
            if compacted is not None:
                yield compacted
            model_turn = self._model_turn(state, view)
            # Deltas are forwarded from here, not from a helper: each generator layer costs
            # per delta, and deltas are the hot path. (try/finally is ``aclosing`` without
            # its context-manager calls, twice a turn.)
            deltas = model_turn.stream()
            try:
                async for event in deltas:
                    yield event
            finally:
                await deltas.aclose()
            # 6-8, after the reply (here too rather than in a helper generator: a layer
            # costs per tool event as well).
            if self._late_events:
                for event in self._late_events:
                    yield event
                self._late_events.clear()
            entries, calls = self._record_reply(state, model_turn.assembly)
            if entries:
                yield MessageCompleted(entries)
            if self.writer is not None:  # (no checkpoint, no save: no coroutine per turn)
                await self._save_progress()
            if ctx.budget is not None:
                ctx.budget.check(state.budget_usage())
            output: Any = _NO_OUTPUT
            if calls:
                tool_events = self.run_tools(state, calls)
                try:
                    async for event in tool_events:
                        yield event
                finally:
                    await tool_events.aclose()
                handoff = await self.apply_handoff(state)
                if handoff is not None:
                    yield handoff
            elif state.finish_reason != "pause_turn":
                # (A paused turn, Anthropic server tools, is not a final answer: sending the
                # partial reply back is how the vendor continues it, and the answer is the
                # paused text plus the continuation: the whole trailing reply.)
                done, value = await self.final_output(state, state.trailing_reply())
                if done:
                    output = value
            yield TurnEnded(agent, state.turn)
            if output is not _NO_OUTPUT:
                await self.finish(state, output)

    async def _open(self) -> RunResult[T] | None:
        """Take the session lease and the run-id lease, then open the checkpoint; the result
        of a replay."""
        assert self._stack is not None
        from ..session import hold_lease, read_segments

        if self.session is not None:
            assert self.session_id is not None
            lease = hold_lease(self.session, self.session_id, timeout=self.lease_timeout)
            # Waiting for another run's lease is cancellable through this run's token.
            await self.cancel_token.race(self._stack.enter_async_context(lease))
        if self.checkpoint is None:
            return None
        from .resume import open_checkpoint, replay

        if self.checkpoint.checkpointer is not None:  # a run id is an idempotency key
            assert self.checkpoint.run_id is not None
            run_lease = hold_lease(
                self.checkpoint.checkpointer, self.checkpoint.run_id, timeout=self.lease_timeout
            )
            await self.cancel_token.race(self._stack.enter_async_context(run_lease))
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
            return await replay(
                self.config, snapshot, usage=self.usage, writer=self.writer, heal=not in_session
            )
        self._resume = snapshot
        return None

    async def _start(self) -> RunState:
        """Resolve the agent (a resumed run's active one) and posture, build the transcript."""
        policy = self.config.context_policy
        if policy is None:
            policy = self.agent.context_policy
        self.policy = policy if policy is not None else _default_policy()
        release = getattr(self.policy, "release", None)  # optional seam method
        if callable(release) and self._stack is not None:
            # A policy instance shared across runs drops this run's per-run state at its end.
            self._stack.callback(release, self.run_id)
        snapshot = self._resume
        agent = self.agent
        history, scratch, carried_input = await self._load_session()
        if snapshot is None:
            own = input_to_entries(self.config.input)
        else:
            from .resume import agent_to_resume, restored_entries

            agent = self.ctx.agent = agent_to_resume(self.agent, snapshot)
            own = restored_entries(snapshot)
        active = await self._activate(agent, has_results=_has_results(history, own))
        transcript = self.transcript
        transcript.extend(history)
        transcript.extend(own)
        state = self.state = RunState(
            active=active, transcript=transcript, usage=self.usage, run_start=len(history)
        )
        state.context_scratch = scratch
        state.last_input_tokens = carried_input  # the policy's first calibration sample
        state.call_ids.update((e.call_id, 1) for e in own if isinstance(e, ToolCallEntry))
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
            budget.check(state.budget_usage())
        max_turns = self.config.max_turns
        if state.turn >= max_turns:
            _log.warning("run.max_turns: agent=%s max_turns=%d", state.active.agent.name, max_turns)
            raise MaxTurnsExceeded(
                f"the run reached max_turns={max_turns} without a final answer",
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
            text = await active.agent.render_instructions(self.ctx, self.config.extra_instructions)
        self._set_system(state, text)

    def _set_system(self, state: RunState, text: str) -> None:
        self.ctx.system_prompt = text
        suffix = state.active.prompt_suffix
        state.set_system_head(f"{text}\n\n{suffix}" if text and suffix else text or suffix)

    async def _build_view(
        self, state: RunState
    ) -> tuple[Sequence[TranscriptEntry], ContextCompacted | None]:
        result = await self._compact(state, overflow=False, reported_window=None)
        event = self._note_compaction(result, reactive=False) if result.compacted else None
        if not state.active.view_injectors:
            return result.entries, event  # (the usual agent: no ``_augment_view`` coroutine)
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
        result = await self.policy.compact(request)
        if not isinstance(result, ContextResult):
            raise UserError(
                f"context policy {self.policy!r} returned {type(result).__name__} from "
                "compact(); the contract is `async def compact(self, req) -> ContextResult`",
                hint="wrap the view: return ContextResult(entries=view, changed=True)",
            )
        if result.entries is not request.entries:
            # A view the policy built (O(n) to build, so O(n) to check): it must be entries,
            # or it fails later in a provider's request builder, far from its cause.
            _check_view(self.policy, result.entries)
        return result

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
        entries = asm.entries(state.active.provider.name, state.call_ids)
        start = len(self.transcript)
        if state.finish_reason != "pause_turn":  # (still the previous turn's reason here)
            state.reply_floor = start - state.run_start
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
        if _log.isEnabledFor(logging.INFO):  # (every turn: no Logger.info call when it is off)
            _log.info(
                "model.done: turn=%d tokens=%d calls=%d",
                state.turn,
                self.usage.total_tokens,
                len(calls),
            )
        return entries, calls

    # -- the phase interface (also driven by ``resume.catch_up``) ---------------------

    def run_tools(self, state: RunState, calls: list[PlannedCall]) -> AsyncGenerator[Event, None]:
        """The tool phase: run ``calls`` (see ``runtime/tool_calls.py``), yielding events.

        Returns the processor's own generator: no extra layer per tool event.
        """
        processor = ToolCallProcessor(
            state,
            self.ctx,
            approvals=self.approvals,
            interactive=self.config.interactive,
            truncated=state.finish_reason == "length",
            on_result=self._save_progress if self.writer is not None else None,
        )
        return processor.run_batch(calls)

    async def apply_handoff(self, state: RunState) -> HandoffOccurred | None:
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
                active = await self._activate(target, has_results=_has_results(self.transcript, ()))
            state.activate(active)
            self.ctx.agent = target
            self.ctx.workspace = active.workspace_session
            await self._render_system(state)
        _log.info("run.handoff: %s -> %s", source.name, target.name)
        return HandoffOccurred(source, target)

    async def final_output(
        self, state: RunState, entries: Sequence[TranscriptEntry]
    ) -> tuple[bool, Any]:
        """``(True, output)`` when the reply ``entries`` are final (parsed, output guardrails
        passed), ``(False, None)`` after a repair prompt was appended."""
        text = "".join(e.content for e in entries if isinstance(e, AssistantTextEntry))
        active = state.active
        if active.text_output:
            if not text:
                _log.warning("run.empty_reply: agent=%s turn=%d", active.agent.name, state.turn)
                warnings.warn(
                    f"agent {active.agent.name!r} ended its run with an empty reply "
                    f"(turn {state.turn}); check its model and instructions",
                    UserWarning,
                    stacklevel=2,
                )
            output: Any = text
        else:
            from ..output import parse_structured_output, resolve_output_repair

            try:
                output = parse_structured_output(text, active.output_type)
            except OutputValidationError as exc:
                strategy = resolve_output_repair(active.agent.output_repair)
                state.repair_attempts += 1
                prompt = strategy.build_prompt(exc, state.repair_attempts) if strategy else None
                if prompt is None:
                    raise
                state.append(InputEntry("user", prompt))
                return False, None
        guardrails = active.output_guardrails
        if guardrails:
            from ..guardrails import run_output_guardrails

            await run_output_guardrails(guardrails, output, self.ctx)
        return True, output

    async def finish(self, state: RunState, output: Any) -> None:
        """Settle the run on ``output``, then persist it, in this order: finalise the
        checkpoint, append this run's own entries to the session as one segment, then
        ``delete_on_success``."""
        entries = state.own_entries()
        result: RunResult[T] = build_result(
            output,
            entries,
            agent=state.active.agent,
            usage=self.usage,
            turns=state.turn,
            finish_reason=state.finish_reason,
            last_input_tokens=state.last_input_tokens,
            run_id=self.run_id,
            session_id=self.session_id,
        )
        from .checkpoint import record_in_session, segment_meta

        if self.writer is not None:
            await self.writer.finalise(state, output)
        await record_in_session(
            self.session,
            self.session_id,
            entries,
            run_id=self.run_id,
            meta=segment_meta(state.context_scratch, state.notices, state.last_input_tokens),
            writer=self.writer,
        )
        self._settled = result

    # -- persistence seams ------------------------------------------------------------

    async def _load_session(self) -> tuple[list[TranscriptEntry], dict[str, Any], int | None]:
        """History, the carried context scratch and the previous run's last prompt size."""
        if self.session is None:
            return [], {}, None
        assert self.session_id is not None
        segments = self._segments
        if segments is None:
            from ..session import read_segments

            segments = await read_segments(self.session, self.session_id)
        history = [entry for segment in segments for entry in segment.entries]
        scratch: dict[str, Any] = {}
        last_input: int | None = None
        if segments:
            carried = segments[-1].meta.get("context")
            if isinstance(carried, dict):
                scratch = dict(carried)
            tokens = segments[-1].meta.get("last_input_tokens")
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
                last_input = tokens
        return history, scratch, last_input

    async def _save_progress(self) -> None:
        """After each model output and each tool result: the checkpoint save."""
        if self.writer is not None:
            assert self.state is not None
            await self.writer.save_running(self.state)

    # -- agent activation -------------------------------------------------------------

    async def _activate(self, agent: Agent[Any], *, has_results: bool) -> ActiveAgent:
        from ._activation import activate_agent

        assert self._stack is not None
        active = await activate_agent(
            agent,
            self.ctx,
            self._stack,
            policy=self.policy,
            output_type=self.config.output_type,
            extra_instructions=self.config.extra_instructions,
            has_results=has_results,
        )
        if active.hooks:
            self._dispatching = True
        return active


def _check_view(policy: ContextPolicy, entries: object) -> None:
    """Raise ``UserError`` unless ``entries`` is a sequence of transcript entries."""
    bad: object = entries
    if isinstance(entries, Sequence) and not isinstance(entries, (str, bytes)):
        bad = next((e for e in entries if not isinstance(e, _ENTRY_CLASSES)), _NO_OUTPUT)
        if bad is _NO_OUTPUT:
            return
    raise UserError(
        f"context policy {policy!r} returned a ContextResult whose entries hold "
        f"{type(bad).__name__} {bad!r:.60}; compact() must return transcript entries",
        hint="return ContextResult(entries=...) with a sequence of lovia.transcript entries "
        "(req.entries, a slice of it, or entries you built)",
    )


def _has_results(*parts: Sequence[TranscriptEntry]) -> bool:
    """Whether a tool result is in ``parts`` (so a recall tool may have something to recall)."""
    return any(isinstance(e, ToolResultEntry) for part in parts for e in part)


def _carry_usage(error: BaseException, usage: Usage) -> None:
    """Put the failed run's usage on its error as ``run_usage`` (best effort)."""
    try:
        error.run_usage = usage  # type: ignore[attr-defined]  # documented extra attribute
    except AttributeError:  # an exception type with __slots__: nothing to carry it on
        pass


def _default_policy() -> ContextPolicy:
    from ..context_policy import default_context_policy

    return default_context_policy()


def _new_run_id() -> str:
    import uuid

    return uuid.uuid4().hex
