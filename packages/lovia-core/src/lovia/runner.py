"""``Runner``: the stateless public facade over ``RunLoop``.

``run`` returns a ``RunResult`` (or raises the run's ``LoviaError``), ``stream`` returns a
``RunHandle`` to iterate and/or await, and ``run_sync`` only wraps ``asyncio.run``. All the
orchestration lives in ``lovia.runtime.loop.RunLoop``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Union

from .exceptions import UserError
from .runtime.config import build_run_config
from .runtime.loop import RunLoop
from .runtime.result import RunHandle, RunResult

if TYPE_CHECKING:
    from typing_extensions import Unpack

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

__all__ = ["RunInput", "RunOptions", "Runner"]

RunInput = Union[str, Sequence["Message"], Sequence["TranscriptEntry"]]
"""What a run takes: a user message as text, or messages/entries seeding the transcript."""


class RunOptions(TypedDict, total=False):
    """The keyword options every run method takes (see ``Runner`` for their meaning).

    Defined once, so ``Runner.run``, ``run_sync``, ``stream`` and the ``Agent`` shortcuts
    cannot drift apart; an omitted key takes ``RunLoop``'s default.
    """

    context: Any
    output_type: Any
    extra_instructions: str | None
    max_turns: int
    budget: RunBudget | None
    cancel_token: CancelToken | None
    mailbox: Mailbox | None
    retry: RetryPolicy | None
    context_policy: ContextPolicy | None
    session: Session | None
    session_id: str | None
    lease_timeout: float | None
    checkpoint: CheckpointOptions | None
    tracer: Tracer | None


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
        cls, agent: Agent[Any], input: RunInput, options: RunOptions, *, interactive: bool
    ) -> RunLoop[Any]:
        config = build_run_config(agent, input, options, interactive=interactive)
        return RunLoop(config)

    @classmethod
    async def run(
        cls, agent: Agent[Any], input: RunInput, **options: Unpack[RunOptions]
    ) -> RunResult[Any]:
        """Run ``agent`` to completion and return its ``RunResult``.

        Run options (keywords; see the class docstring for each one's meaning):
        ``context``, ``output_type``, ``extra_instructions``, ``max_turns`` (50), ``budget``,
        ``cancel_token``, ``mailbox``, ``retry``, ``context_policy``, ``session``,
        ``session_id``, ``lease_timeout``, ``checkpoint``, ``tracer``. They are validated
        before anything runs: an unknown name (with a "did you mean"), a wrong type or an
        out-of-range value raises ``UserError`` naming the option.

        Failures raise typed ``LoviaError`` subclasses; a failed run's error carries its
        usage as ``run_usage``. Gated tool calls are decided by hooks or
        ``Agent.approval_handler``; with neither, they are denied.
        """
        loop = cls._loop(agent, input, options, interactive=False)
        return await loop.run()

    @classmethod
    def run_sync(
        cls, agent: Agent[Any], input: RunInput, **options: Unpack[RunOptions]
    ) -> RunResult[Any]:
        """``asyncio.run(Runner.run(...))``; raises ``UserError`` inside a running loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(cls.run(agent, input, **options))
        raise UserError(
            "Runner.run_sync() was called inside a running event loop",
            hint="use `await Runner.run(...)` in async code",
        )

    @classmethod
    def stream(
        cls, agent: Agent[Any], input: RunInput, **options: Unpack[RunOptions]
    ) -> RunHandle[Any]:
        """Start ``agent`` lazily and return its ``RunHandle`` (iterate it, await it, or both).

        Usage mistakes (``session`` without ``session_id``, ``checkpoint=``) raise here.
        """
        return RunHandle(cls._loop(agent, input, options, interactive=True))
