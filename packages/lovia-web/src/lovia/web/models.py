"""The API's request and response bodies (pydantic, at the edge only).

Routes validate requests with these and answer with them, so the OpenAPI schema is the
reference for every field; inside, the supervisor and the store use the core's own types.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .store.base import ChatMeta

__all__ = [
    "AgentInfo",
    "AnswerRequest",
    "AnswerResult",
    "ApproveRequest",
    "ApproveResult",
    "Attachment",
    "CancelResult",
    "ChatRequest",
    "ChatResponse",
    "ChatUsage",
    "ErrorBody",
    "FieldError",
    "Health",
    "InjectRequest",
    "InjectResult",
    "ServerInfo",
    "SessionDetail",
    "SessionInfo",
    "SessionList",
    "SessionPatch",
    "UninjectRequest",
    "UninjectResult",
    "error_responses",
]

SESSION_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Session ids the API accepts: safe in a path, a log line and a file name."""

_MAX_MESSAGE_CHARS = 100_000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or whitespace only")
    return value


class FieldError(BaseModel):
    """One invalid field of a request: where (``loc``) and why (``msg``)."""

    loc: list[str | int]
    msg: str


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: what went wrong and, when known, what to do."""

    detail: str
    hint: str | None = None
    errors: list[FieldError] | None = None
    """For a 422: every invalid field."""


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` a route declares so its error bodies appear in the OpenAPI schema."""
    return {status: {"model": ErrorBody} for status in statuses}


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class AgentInfo(BaseModel):
    name: str
    model: str | None
    tools: list[str]
    capabilities: list[str]
    """Any of ``vision``, ``workspace``, ``handoffs``, ``approvals``, ``structured_output``,
    ``plugins``."""
    context_window: int | None
    """The resolved context window in tokens (``None``: unknown)."""


class ServerInfo(BaseModel):
    title: str
    version: str
    agents: list[str]
    default_agent: str | None
    configured: bool
    """Whether every agent has a model (a server can start unconfigured)."""
    features: dict[str, bool]
    """``checkpointing, titles, followups, scheduling, workspace, memory, rewind, events,
    model_config``: what this server offers."""


class Attachment(_Body):
    """A workspace file attached to a chat message (``lovia.web.attachments``)."""

    path: str = Field(min_length=1, max_length=4096)
    """Relative to the agent's workspace root, e.g. an upload's ``uploads/photo.png``."""
    mime: str | None = Field(default=None, max_length=255)
    kind: Literal["image", "file"] = "file"
    """``image`` is inlined for a model with vision; ``file`` is a path reference only."""
    name: str | None = Field(default=None, max_length=255)


class ChatRequest(_Body):
    """``POST /api/chat/stream``: a user message for a new or existing chat."""

    message: str = Field(min_length=1, max_length=_MAX_MESSAGE_CHARS)
    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN)
    agent: str | None = None
    attachments: list[Attachment] = Field(default_factory=list, max_length=20)

    _blank = field_validator("message")(_not_blank)


class ChatUsage(BaseModel):
    """Token usage of one run; the cache counts subdivide ``input_tokens``."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    requests: int
    last_input_tokens: int | None
    """The final model call's prompt size (not a sum): how full the context is now."""


class ChatResponse(BaseModel):
    """``POST /api/chat``: the run's output (JSON-safe), its chat and its usage."""

    output: Any
    session_id: str
    usage: ChatUsage


class ApproveRequest(_Body):
    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    call_id: str = Field(min_length=1, max_length=256)
    decision: Literal["approve", "deny"]
    reason: str | None = Field(default=None, max_length=2000)


class ApproveResult(BaseModel):
    session_id: str
    call_id: str
    decision: Literal["approve", "deny"]


class CancelResult(BaseModel):
    session_id: str
    run_id: str


class InjectRequest(_Body):
    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    message: str = Field(min_length=1, max_length=_MAX_MESSAGE_CHARS)

    _blank = field_validator("message")(_not_blank)


class InjectResult(BaseModel):
    id: int
    """The steering id of the queued message (pass it to ``uninject``)."""


class UninjectRequest(_Body):
    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    id: int
    """The steering id ``inject`` returned."""


class UninjectResult(BaseModel):
    session_id: str
    id: int


class AnswerRequest(_Body):
    """``POST /api/chat/answer``: the answer to the session's pending ``ask_human``."""

    session_id: str = Field(pattern=SESSION_ID_PATTERN)
    answer: str = Field(min_length=1, max_length=_MAX_MESSAGE_CHARS)

    _blank = field_validator("answer")(_not_blank)


class AnswerResult(BaseModel):
    session_id: str
    question_id: str
    question: str


class SessionInfo(BaseModel):
    id: str
    agent: str
    title: str
    pinned: bool
    created_at: float
    updated_at: float
    active_run_id: str | None
    live: bool
    """Whether a run of the session is executing in this server right now."""
    parent_id: str | None = None
    """The chat a subagent's task session belongs to (``None`` for a user's chat)."""

    @classmethod
    def of(cls, meta: ChatMeta, *, live: bool) -> SessionInfo:
        return cls(**asdict(meta), live=live)


class SessionDetail(SessionInfo):
    """``GET /api/sessions/{id}``: the metadata plus the stored transcript."""

    entries: list[dict[str, Any]]
    """The session's transcript entries as JSON (``lovia.transcript.entry_to_dict``)."""


class SessionList(BaseModel):
    sessions: list[SessionInfo]
    limit: int
    offset: int


class SessionPatch(_Body):
    """``PATCH /api/sessions/{id}``: rename and/or pin (at least one field)."""

    title: str | None = Field(default=None, min_length=1, max_length=200)
    pinned: bool | None = Field(default=None, strict=True)

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str | None) -> str | None:
        # The store drops NULs, so a title of only NULs and blanks would land empty.
        return None if value is None else _not_blank(value.replace("\x00", "")).strip()

    @model_validator(mode="after")
    def _something(self) -> SessionPatch:
        if self.title is None and self.pinned is None:
            raise ValueError("give title and/or pinned")
        return self
