"""``Runner``: the stateless public facade over ``RunLoop``.

``run`` returns a ``RunResult`` (or raises the run's ``LoviaError``), ``stream`` returns a
``RunHandle`` to iterate and/or await, and ``run_sync`` only wraps ``asyncio.run``. All the
orchestration lives in ``lovia.runtime.loop.RunLoop``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

from .exceptions import UserError
from .runtime.loop import RunLoop
from .runtime.result import RunHandle, RunResult

if TYPE_CHECKING:
    from .agent import Agent
    from .budget import RunBudget
    from .cancellation import CancelToken
    from .checkpointer import CheckpointOptions
    from .context_policy import ContextPolicy
    from .messages import Message
    from .retry import RetryPolicy
    from .session import Session
    from .steering import Mailbox
    from .tracing import Tracer
    from .transcript import TranscriptEntry

__all__ = ["RunInput", "Runner"]

RunInput = Union[str, Sequence["Message"], Sequence["TranscriptEntry"]]
"""What a run takes: a user message as text, or messages/entries seeding the transcript."""


class Runner:
    """Run agents (class methods only; holds no state).

    Options shared by every method:

    * ``context``: deps handed to tools, hooks and guardrails as ``ctx.deps``.
    * ``output_type``: overrides every reached agent's type (``str`` forces text).
    * ``extra_instructions``: appended to every reached agent's prompt.
    * ``max_turns`` (50): model calls allowed; more raises ``MaxTurnsExceeded``.
    * ``budget``, ``cancel_token``, ``mailbox`` (a runner-created one when ``None``; its
      leftovers are dropped), ``tracer`` (``NoopTracer`` when ``None``).
    * ``retry``, ``context_policy``: override the entry agent's posture for the whole run.
    * ``session`` + ``session_id``: load history at start, append this run on success
      (``session`` without ``session_id`` raises ``UserError``). The run holds the
      session's lease throughout, so two runs on one session never interleave.
    * ``lease_timeout``: how long a run waits for a session another run holds: ``None``
      (the default) waits without limit, ``0`` fails at once; a session that stays busy
      raises ``SessionBusyError``.
    * ``checkpoint``: a ``CheckpointOptions``: save the run as it goes (after each model
      output and tool result) so it can be resumed after a crash, and replay it without
      calling the model when its ``run_id`` already completed (``if_run_exists``).
    """

    @classmethod
    def _loop(
        cls,
        agent: Agent[Any],
        input: RunInput,
        *,
        interactive: bool,
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
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
    ) -> RunLoop[Any]:
        if checkpoint is not None:
            from .checkpointer import CheckpointOptions

            if not isinstance(checkpoint, CheckpointOptions):
                raise UserError(
                    f"checkpoint= takes a CheckpointOptions, got {type(checkpoint).__name__}",
                    hint="pass checkpoint=CheckpointOptions(checkpointer=..., run_id=...)",
                )
        return RunLoop(
            agent,
            input,
            deps=context,
            output_type=output_type,
            extra_instructions=extra_instructions,
            max_turns=max_turns,
            budget=budget,
            cancel_token=cancel_token,
            mailbox=mailbox,
            retry=retry,
            context_policy=context_policy,
            session=session,
            session_id=session_id,
            lease_timeout=lease_timeout,
            tracer=tracer,
            interactive=interactive,
            checkpoint=checkpoint,
        )

    @classmethod
    async def run(
        cls,
        agent: Agent[Any],
        input: RunInput,
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
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
    ) -> RunResult[Any]:
        """Run ``agent`` to completion and return its ``RunResult``.

        Failures raise typed ``LoviaError`` subclasses. Gated tool calls are decided by
        hooks or ``Agent.approval_handler``; with neither, they are denied.
        """
        loop = cls._loop(
            agent,
            input,
            interactive=False,
            context=context,
            output_type=output_type,
            extra_instructions=extra_instructions,
            max_turns=max_turns,
            budget=budget,
            cancel_token=cancel_token,
            mailbox=mailbox,
            retry=retry,
            context_policy=context_policy,
            session=session,
            session_id=session_id,
            lease_timeout=lease_timeout,
            checkpoint=checkpoint,
            tracer=tracer,
        )
        return await loop.run()

    @classmethod
    def run_sync(
        cls,
        agent: Agent[Any],
        input: RunInput,
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
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
    ) -> RunResult[Any]:
        """``asyncio.run(Runner.run(...))``; raises ``UserError`` inside a running loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(
                cls.run(
                    agent,
                    input,
                    context=context,
                    output_type=output_type,
                    extra_instructions=extra_instructions,
                    max_turns=max_turns,
                    budget=budget,
                    cancel_token=cancel_token,
                    mailbox=mailbox,
                    retry=retry,
                    context_policy=context_policy,
                    session=session,
                    session_id=session_id,
                    lease_timeout=lease_timeout,
                    checkpoint=checkpoint,
                    tracer=tracer,
                )
            )
        raise UserError(
            "Runner.run_sync() was called inside a running event loop",
            hint="use `await Runner.run(...)` in async code",
        )

    @classmethod
    def stream(
        cls,
        agent: Agent[Any],
        input: RunInput,
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
        checkpoint: CheckpointOptions | None = None,
        tracer: Tracer | None = None,
    ) -> RunHandle[Any]:
        """Start ``agent`` lazily and return its ``RunHandle`` (iterate it, await it, or both).

        Usage mistakes (``session`` without ``session_id``, ``checkpoint=``) raise here.
        """
        loop = cls._loop(
            agent,
            input,
            interactive=True,
            context=context,
            output_type=output_type,
            extra_instructions=extra_instructions,
            max_turns=max_turns,
            budget=budget,
            cancel_token=cancel_token,
            mailbox=mailbox,
            retry=retry,
            context_policy=context_policy,
            session=session,
            session_id=session_id,
            lease_timeout=lease_timeout,
            checkpoint=checkpoint,
            tracer=tracer,
        )
        return RunHandle(loop)
