"""``RunConfig``: one run's options, validated once and frozen.

``Runner`` builds it from the ``RunOptions`` keywords (``build_run_config``) and hands it
to ``RunLoop``; nothing downstream re-checks an option. Validation raises ``UserError``
naming the option: an unknown name (with a "did you mean" suggestion), a value of the wrong
type (``max_turns="3"``), or one out of range (a negative ``lease_timeout``). Duck-typed
seams (``context_policy``, ``session``, ``tracer``) are checked for the methods the run
calls, not for a base class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError

if TYPE_CHECKING:
    from ..agent import Agent
    from ..budget import RunBudget
    from ..cancellation import CancelToken
    from ..checkpointer import CheckpointOptions
    from ..context_policy import ContextPolicy
    from ..messages import Message
    from ..retry import RetryPolicy
    from ..session import Session
    from ..steering import Mailbox
    from ..tracing import Tracer
    from ..transcript import TranscriptEntry

__all__ = ["RUN_OPTIONS", "RunConfig", "build_run_config"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """Everything one run was asked to do (see ``Runner`` for each option's meaning)."""

    agent: Agent[Any]
    input: str | Sequence[Message] | Sequence[TranscriptEntry]
    interactive: bool = True
    """A consumer may decide approvals late (out of band) while other calls run."""
    context: Any = None
    output_type: Any = None
    extra_instructions: str | None = None
    max_turns: int = 50
    budget: RunBudget | None = None
    cancel_token: CancelToken | None = None
    mailbox: Mailbox | None = None
    retry: RetryPolicy | None = None
    context_policy: ContextPolicy | None = None
    session: Session | None = None
    session_id: str | None = None
    lease_timeout: float | None = None
    """How long to wait for the session lease (``None``: no limit; ``0``: fail at once)."""
    checkpoint: CheckpointOptions | None = None
    tracer: Tracer | None = None


RUN_OPTIONS: tuple[str, ...] = tuple(
    f.name for f in fields(RunConfig) if f.name not in ("agent", "input", "interactive")
)
"""The run options (``Runner.RunOptions``' keys), in the order ``RunConfig`` declares them."""


def build_run_config(
    agent: Agent[Any],
    input: Any,
    options: Mapping[str, Any],
    *,
    interactive: bool,
) -> RunConfig:
    """Validate ``options`` (see the module docstring) and freeze them with the run's input."""
    unknown = sorted(set(options) - set(RUN_OPTIONS))
    if unknown:
        raise UserError(
            f"unknown run option(s): {', '.join(_with_suggestion(name) for name in unknown)}",
            hint=f"run options are: {', '.join(RUN_OPTIONS)}",
        )
    for name, value in options.items():
        if value is not None:
            _CHECKS[name](value)
    config = RunConfig(agent=agent, input=input, interactive=interactive, **options)
    _check_combinations(config)
    return config


def _with_suggestion(name: str) -> str:
    import difflib  # only on the error path: it is not cheap to import

    close = difflib.get_close_matches(name, RUN_OPTIONS, n=1)
    return f"{name} (did you mean {close[0]}?)" if close else name


def _check_combinations(config: RunConfig) -> None:
    if config.session is not None and not config.session_id:
        raise UserError(
            "session= was given without session_id=",
            hint="pass session_id='...' to name the conversation in the session store",
        )
    if config.lease_timeout is not None and config.session is None:
        raise UserError(
            f"lease_timeout={config.lease_timeout!r} needs a session=",
            hint="0 fails at once when another run holds the session; None waits for it",
        )


def _bad(name: str, expected: str, value: Any, hint: str) -> UserError:
    return UserError(
        f"run option {name}= takes {expected}, got {value!r} ({type(value).__name__})",
        hint=hint,
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_max_turns(value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad("max_turns", "an int", value, "pass max_turns=10 (a number, not a string)")
    if value < 1:
        raise UserError(
            f"max_turns must be at least 1, got {value!r}",
            hint="a turn is one model call plus its tool calls; pass max_turns=1 or more",
        )


def _check_lease_timeout(value: Any) -> None:
    if not _is_number(value) or value < 0:
        raise UserError(
            f"lease_timeout={value!r} must be a number of seconds, not negative",
            hint="0 fails at once when another run holds the session; None waits for it",
        )


def _check_session_id(value: Any) -> None:
    if not isinstance(value, str):
        raise _bad("session_id", "a str", value, "name the conversation: session_id='user-42'")


def _check_text(value: Any) -> None:
    if not isinstance(value, str):
        raise _bad("extra_instructions", "a str", value, "pass the extra prompt text as a str")


def _instance_of(name: str, module: str, cls_name: str, hint: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        import importlib

        cls = getattr(importlib.import_module(module), cls_name)
        if not isinstance(value, cls):
            raise _bad(name, f"a {cls_name}", value, hint)

    return check


def _with_methods(name: str, methods: tuple[str, ...], hint: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        missing = [m for m in methods if not callable(getattr(value, m, None))]
        if missing:
            wanted = " and ".join(f"{m}()" for m in methods)
            raise _bad(name, f"an object with {wanted}", value, hint)

    return check


def _anything(value: Any) -> None:
    return None


def _check_checkpoint(value: Any) -> None:
    from ..checkpointer import CheckpointOptions

    if not isinstance(value, CheckpointOptions):
        raise UserError(
            f"checkpoint= takes a CheckpointOptions, got {type(value).__name__}",
            hint="pass checkpoint=CheckpointOptions(checkpointer=..., run_id=...)",
        )


_CHECKS: dict[str, Callable[[Any], None]] = {
    "context": _anything,
    "output_type": _anything,
    "extra_instructions": _check_text,
    "max_turns": _check_max_turns,
    "budget": _instance_of(
        "budget", "lovia.budget", "RunBudget", "pass budget=RunBudget(max_total_tokens=...)"
    ),
    "cancel_token": _instance_of(
        "cancel_token", "lovia.cancellation", "CancelToken", "pass cancel_token=CancelToken()"
    ),
    "mailbox": _instance_of("mailbox", "lovia.steering", "Mailbox", "pass mailbox=Mailbox()"),
    "retry": _instance_of("retry", "lovia.retry", "RetryPolicy", "pass retry=RetryPolicy(...)"),
    "context_policy": _with_methods(
        "context_policy",
        ("compact",),
        "a context policy has `async def compact(self, req) -> ContextResult`",
    ),
    "session": _with_methods(
        "session",
        ("append",),  # the least a store has (a lease, segments() are optional extras)
        "pass a session store such as lovia.stores.SQLiteSession('chat.db')",
    ),
    "session_id": _check_session_id,
    "lease_timeout": _check_lease_timeout,
    "checkpoint": _check_checkpoint,
    "tracer": _with_methods("tracer", ("span",), "pass a lovia.tracing.Tracer"),
}
