"""Every exception lovia raises for a lovia reason.

The tree::

    LoviaError (hint=)
    ├── UserError                      a usage mistake, raised before tokens are spent
    ├── ProviderError                  a provider call failed (vendor, model, status_code,
    │                                  retryable, retry_after)
    │   └── ContextOverflowError       the prompt did not fit (reported_window)
    ├── ToolError                      a tool failed; becomes an error result the model sees
    │   ├── InvalidToolArguments       arguments failed validation; never retried
    │   └── MCPError                   an MCP server failed (tool_name)
    ├── OutputValidationError          the final output did not match output_type
    │                                  (raw, output_type_name)
    ├── MaxTurnsExceeded               the run hit max_turns
    ├── BudgetExceeded                 a RunBudget limit tripped (limit)
    ├── RunCancelled                   the run's CancelToken fired (reason)
    ├── GuardrailTripped               an input or output guardrail refused (reason)
    ├── SessionBusyError               another run holds the session lease
    ├── RunBusyError                   a run with this run_id is still in progress
    └── StoreError                     a session or checkpoint store is corrupt or failed

``MissingDistributionError`` is an ``ImportError`` (packaging.md, pitfall 8): it names the
lovia distribution to install when a convenience name from another distribution is used.

Every ``LoviaError`` renders its ``hint`` (what to do next) in ``str(exc)``.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
    "ContextOverflowError",
    "GuardrailTripped",
    "InvalidToolArguments",
    "LoviaError",
    "MCPError",
    "MaxTurnsExceeded",
    "MissingDistributionError",
    "OutputValidationError",
    "ProviderError",
    "RunBusyError",
    "RunCancelled",
    "SessionBusyError",
    "StoreError",
    "ToolError",
    "UserError",
    "install_hint",
]


class LoviaError(Exception):
    """Base class of every lovia error; ``hint`` says what to do next."""

    def __init__(self, message: str = "", *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        text = self.message or type(self).__name__
        if self.hint:
            return f"{text}\nHint: {self.hint}"
        return text

    def __reduce__(self) -> tuple[object, ...]:
        # Keep keyword-only fields across pickling (multiprocessing, eval workers).
        return (_rebuild, (type(self), self.__dict__))


def _rebuild(cls: type[LoviaError], state: dict[str, object]) -> LoviaError:
    exc = cls.__new__(cls)
    Exception.__init__(exc, state.get("message", ""))
    exc.__dict__.update(state)
    return exc


class UserError(LoviaError):
    """The framework was used incorrectly (bad configuration or arguments)."""


class ProviderError(LoviaError):
    """A model provider call failed.

    ``retryable`` tells the retry policy whether trying again can help (408, 429, 5xx,
    timeouts, disconnects and truncated streams are retryable; other 4xx are not).
    ``retry_after`` is the server's requested delay in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str = "",
        *,
        vendor: str | None = None,
        model: str | None = None,
        status_code: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.vendor = vendor
        self.model = model
        self.status_code = status_code
        self.retryable = retryable
        self.retry_after = retry_after


class ContextOverflowError(ProviderError):
    """The request exceeded the model's context window.

    ``reported_window`` is the window the endpoint named in its rejection, when it did.
    The run hands this error to the context policy (one reactive retry), never to the
    retry policy.
    """

    def __init__(
        self,
        message: str = "",
        *,
        reported_window: int | None = None,
        vendor: str | None = None,
        model: str | None = None,
        status_code: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(
            message,
            vendor=vendor,
            model=model,
            status_code=status_code,
            retryable=False,
            hint=hint,
        )
        self.reported_window = reported_window


class ToolError(LoviaError):
    """A tool failed in a way the model should see: becomes an error result, the run goes on."""


class InvalidToolArguments(ToolError):
    """The model's tool arguments failed validation; the function never ran, no retry."""


class MCPError(ToolError):
    """An MCP server failed while serving ``tool_name``."""

    def __init__(self, message: str = "", *, tool_name: str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.tool_name = tool_name


class OutputValidationError(LoviaError):
    """The final output could not be parsed into ``output_type``.

    ``raw`` is (a snippet of) the model's text and ``output_type_name`` the target type.
    """

    def __init__(
        self,
        message: str = "",
        *,
        raw: str = "",
        output_type_name: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.raw = raw
        self.output_type_name = output_type_name


class MaxTurnsExceeded(LoviaError):
    """The run reached ``max_turns`` without a final answer."""


class BudgetExceeded(LoviaError):
    """A ``RunBudget`` limit tripped; ``limit`` names which one. The run is resumable."""

    def __init__(self, message: str = "", *, limit: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.limit = limit


class RunCancelled(LoviaError):
    """The run was cancelled through its ``CancelToken``; ``reason`` is the caller's."""

    def __init__(self, message: str = "", *, reason: str | None = None, hint: str | None = None):
        super().__init__(message or "run cancelled", hint=hint)
        self.reason = reason


class GuardrailTripped(LoviaError):
    """An input or output guardrail refused the run; ``reason`` says why."""

    def __init__(self, message: str = "", *, reason: str = "", hint: str | None = None) -> None:
        super().__init__(message or reason, hint=hint)
        self.reason = reason


class SessionBusyError(LoviaError):
    """Another run holds the lease on this session."""


class RunBusyError(LoviaError):
    """A run with this ``run_id`` is still in progress (its checkpointer holds the lease)."""


class StoreError(LoviaError):
    """A session or checkpoint store failed or holds data it cannot read.

    ``run_id`` and ``row`` identify the offending record when known.
    """

    def __init__(
        self,
        message: str = "",
        *,
        run_id: str | None = None,
        row: object = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.run_id = run_id
        self.row = row


def install_hint(distribution: str, extra: str | None = None) -> str:
    """The command that installs a lovia distribution today, from a clone of the repository.

    No lovia distribution is on the package index yet (``pip install lovia`` finds an unrelated
    project), so every hint points at the source tree: ``uv sync --all-packages`` for a clone
    used as is, or ``pip install`` of the package folders (lovia-core first, because the others
    depend on it and the index cannot supply it).
    """
    target = f"./packages/{distribution}" + (f"[{extra}]" if extra else "")
    folders = f"'{target}'" if distribution == "lovia-core" else f"./packages/lovia-core '{target}'"
    return (
        f"in a clone of lovia run `uv sync --all-packages`; to add it to another environment, "
        f"run `pip install {folders}` from the clone's root"
    )


class MissingDistributionError(ModuleNotFoundError):
    """A name owned by another lovia distribution was used while it is not installed."""

    def __init__(self, attr: str, module: str, distribution: str) -> None:
        what = f"lovia.{attr}" if attr else module
        self.distribution = distribution
        self.hint = install_hint(distribution)
        super().__init__(
            f"{what} is provided by the {distribution!r} distribution, which is not installed: "
            f"{self.hint}",
            name=module,
        )
