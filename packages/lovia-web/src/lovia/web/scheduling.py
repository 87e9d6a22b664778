"""Scheduling: runs that start themselves, at a time, on an interval or on a cron line.

Three parts, each usable without HTTP:

* **Triggers** (``parse_trigger``): ``at`` (one shot: ISO 8601, a ``Z`` suffix, or Unix
  seconds), ``every`` (a duration such as ``30m``, ``2h``, ``1d12h``, at least a minute) and
  ``cron`` (five fields, through ``croniter``; a line that never fires is refused). Times are
  UTC.
* **Schedules** (``Schedules``): create, list, update, pause/resume, cancel and delete, over
  the ``ChatStore``'s domain-neutral ``chat_schedules`` rows (the fields live in the row's
  ``data``). ``Scheduling(store)`` is the plugin that gives a model the same through the tools
  ``schedule_run`` (needs approval), ``list_schedules`` and ``cancel_schedule`` (no approval:
  a fired run may stop its own schedule).
* **The scheduler** (``Scheduler``): ``tick()`` fires what is due, through the
  ``RunSupervisor``, as clientless runs. Each fire is won with the store's ``claim_fire``
  compare-and-set first, so several processes over one database fire it once. Missed slots
  coalesce into one fire; an expired schedule deactivates without firing; a fire that finds
  every slot busy is *deferred* (the row stays due, no session is created) and a fire whose
  agent is gone advances and records the failure.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal
from uuid import uuid4

from lovia.exceptions import InvalidToolArguments, UserError
from lovia.plugin import PluginInstance
from lovia.tools.base import Tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import CapacityExceeded, NotFound, RunConflict

if TYPE_CHECKING:
    from lovia.run_context import RunContext

    from .store.base import ChatStore, ScheduleRow
    from .supervisor import RunSupervisor

__all__ = [
    "FireOutcome",
    "FireRecord",
    "Fired",
    "Schedule",
    "SchedulePatch",
    "ScheduleSpec",
    "Scheduler",
    "Schedules",
    "Scheduling",
    "TickReport",
    "Trigger",
    "parse_instant",
    "parse_trigger",
    "validate_spec",
]

logger = logging.getLogger(__name__)

TriggerKind = Literal["at", "every", "cron"]
Clock = Callable[[], float]

MIN_INTERVAL_SECONDS = 60.0
"""The shortest ``every`` interval (cron's own granularity is a minute too)."""
MAX_INTERVAL_SECONDS = 366 * 86400.0
AT_GRACE_SECONDS = 60.0
"""An ``at`` up to this far in the past fires at once (clock skew, a slow approval)."""
MAX_INSTRUCTION_CHARS = 20_000
MAX_UNTIL_CHARS = 1_000
MAX_FIRES_LIMIT = 1_000_000
_LISTED = 50
"""How many schedules ``list_schedules`` shows the model."""
_RECENT_FIRES = 50
"""How many recent fires a schedule remembers (for ``GET /api/schedules/{id}/runs``)."""

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


# -- triggers ----------------------------------------------------------------------------


def parse_instant(text: str | float, *, field: str = "at") -> float:
    """A moment as Unix seconds: ISO 8601 (a naive time is UTC, ``Z`` works) or a number of
    seconds since the epoch. Raises ``ValueError`` naming ``field``."""
    if isinstance(text, bool):
        raise ValueError(f"{field}: expected an ISO 8601 time or Unix seconds")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        raw = text.strip()
        if _NUMBER.match(raw):
            value = float(raw)
        else:
            iso = raw[:-1] + "+00:00" if raw[-1:] in "Zz" and raw else raw
            try:
                moment = datetime.datetime.fromisoformat(iso)
            except ValueError:
                raise ValueError(
                    f"{field}: {text!r} is not an ISO 8601 time (2026-12-01T09:00:00Z) "
                    "or Unix seconds"
                ) from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.timezone.utc)
            value = moment.timestamp()
    if not math.isfinite(value) or not 0 <= value < 253402300800:  # before year 10000
        raise ValueError(f"{field}: {text!r} is out of range")
    return value


def _duration(text: str) -> float:
    raw = text.strip().lower().replace(" ", "")
    if _NUMBER.match(raw):
        seconds = float(raw)
    else:
        match = _DURATION.match(raw)
        if not raw or match is None:
            raise ValueError(
                f"trigger_expr: {text!r} is not a duration (use 30m, 2h, 1d, 1h30m or seconds)"
            )
        d, h, m, s = (int(g) if g else 0 for g in match.groups())
        seconds = float(d * 86400 + h * 3600 + m * 60 + s)
    if seconds < MIN_INTERVAL_SECONDS:
        raise ValueError(
            f"trigger_expr: the interval must be at least {MIN_INTERVAL_SECONDS:.0f} s"
        )
    if seconds > MAX_INTERVAL_SECONDS:
        raise ValueError("trigger_expr: the interval must be at most 366 days")
    return seconds


@dataclass(frozen=True, slots=True)
class Trigger:
    """A validated trigger. ``at`` holds the moment, ``interval`` the ``every`` seconds."""

    kind: TriggerKind
    expr: str
    at: float | None = None
    interval: float | None = None

    @property
    def one_shot(self) -> bool:
        return self.kind == "at"

    def first(self, now: float) -> float:
        """The first fire of a schedule created (or re-armed) at ``now``."""
        if self.kind == "at":
            assert self.at is not None
            return self.at
        if self.kind == "every":
            assert self.interval is not None
            return now + self.interval
        return _cron_next(self.expr, now)

    def following(self, slot: float, now: float) -> float | None:
        """The next fire after the one due at ``slot``, strictly after ``now``: every slot
        missed in between coalesces into the fire that is happening. ``None`` for ``at``."""
        if self.kind == "at":
            return None
        if self.kind == "every":
            assert self.interval is not None
            missed = max(0, math.floor((now - slot) / self.interval))
            return slot + (missed + 1) * self.interval
        return _cron_next(self.expr, max(now, slot))


def _cron_next(expr: str, after: float) -> float:
    from croniter import croniter

    value: float = croniter(expr, after).get_next(float)
    return value


def parse_trigger(kind: str, expr: str, *, now: float | None = None) -> Trigger:
    """Validate a trigger; raises ``ValueError`` (naming ``trigger_expr``) when it is bad.

    With ``now``, an ``at`` more than ``AT_GRACE_SECONDS`` in the past is refused too.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError("trigger_expr: must not be empty")
    if len(expr) > 200:
        raise ValueError("trigger_expr: at most 200 characters")
    expr = " ".join(expr.split())
    if kind == "at":
        at = parse_instant(expr, field="trigger_expr")
        if now is not None and at < now - AT_GRACE_SECONDS:
            when = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat()
            raise ValueError(f"trigger_expr: {when} is in the past")
        return Trigger("at", expr, at=at)
    if kind == "every":
        return Trigger("every", expr, interval=_duration(expr))
    if kind == "cron":
        from croniter import CroniterBadDateError, croniter

        if not expr.startswith("@") and len(expr.split()) != 5:
            raise ValueError(
                "trigger_expr: a cron line has five fields (minute hour day month weekday)"
            )
        if not croniter.is_valid(expr):
            raise ValueError(f"trigger_expr: {expr!r} is not a valid cron line")
        try:
            _cron_next(expr, time.time() if now is None else now)
        except CroniterBadDateError:
            raise ValueError(f"trigger_expr: {expr!r} never fires") from None
        return Trigger("cron", expr)
    raise ValueError(f"trigger_kind: {kind!r} is not one of at, every, cron")


# -- the schedule and its bodies -----------------------------------------------------------


def _not_blank(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be empty or whitespace only")
    return value


class ScheduleSpec(BaseModel):
    """What a schedule does and when: ``POST /api/schedules`` and the ``schedule_run`` tool.

    ``until`` is a stop condition in words: the fired run is told to call
    ``cancel_schedule`` once it holds. It needs a safety net (``max_fires`` or
    ``expires_at``) and makes no sense for a one-shot ``at``.
    """

    model_config = ConfigDict(extra="forbid")

    instruction: str = Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)
    trigger_kind: TriggerKind
    trigger_expr: str = Field(min_length=1, max_length=200)
    continue_session: bool = False
    """``True``: every fire goes into one session (the live run gets it as a message);
    ``False``: every fire starts a fresh session."""
    max_fires: int | None = Field(default=None, ge=1, le=MAX_FIRES_LIMIT)
    expires_at: float | None = None
    """When the schedule stops (ISO 8601 or Unix seconds in a request)."""
    until: str | None = Field(default=None, min_length=1, max_length=MAX_UNTIL_CHARS)

    _blank = field_validator("instruction", "until")(_not_blank)

    @field_validator("expires_at", mode="before")
    @classmethod
    def _instant(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, (str, int, float)):
            raise ValueError("expected an ISO 8601 time or Unix seconds")
        return parse_instant(value, field="expires_at")

    @field_validator("trigger_expr")
    @classmethod
    def _trigger(cls, value: str, info: Any) -> str:
        kind = info.data.get("trigger_kind")
        if kind is None:
            return value  # trigger_kind itself is invalid and already reported
        return _strip_field(parse_trigger, kind, value).expr

    @field_validator("until")
    @classmethod
    def _until(cls, value: str | None, info: Any) -> str | None:
        if value is None:
            return None
        if info.data.get("trigger_kind") == "at":
            raise ValueError("a one-shot 'at' schedule cannot have a stop condition")
        if info.data.get("max_fires") is None and info.data.get("expires_at") is None:
            raise ValueError("a stop condition needs a safety net: set max_fires or expires_at")
        return value.strip()


def _strip_field(fn: Callable[..., Trigger], *args: Any) -> Trigger:
    """Run a trigger parser inside a pydantic validator: the field name is pydantic's."""
    try:
        return fn(*args)
    except ValueError as exc:
        message = str(exc)
        raise ValueError(message.partition(": ")[2] or message) from None


class SchedulePatch(BaseModel):
    """``PATCH /api/schedules/{id}``: the fields to change (``null`` clears ``until``,
    ``max_fires`` and ``expires_at``); ``active: false`` pauses, ``true`` resumes."""

    model_config = ConfigDict(extra="forbid")

    instruction: str | None = Field(default=None, min_length=1, max_length=MAX_INSTRUCTION_CHARS)
    trigger_kind: TriggerKind | None = None
    trigger_expr: str | None = Field(default=None, min_length=1, max_length=200)
    continue_session: bool | None = None
    max_fires: int | None = Field(default=None, ge=1, le=MAX_FIRES_LIMIT)
    expires_at: float | str | None = None
    until: str | None = Field(default=None, min_length=1, max_length=MAX_UNTIL_CHARS)
    active: bool | None = None


@dataclass(frozen=True, slots=True)
class FireRecord:
    """One fire a schedule remembers."""

    at: float
    run_id: str
    session_id: str
    attached: bool
    """The message joined a live run instead of starting one."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule: its spec, its bookkeeping, and where it stands."""

    id: str
    agent: str
    session_id: str | None
    """``continue_session``: the session every fire goes to; otherwise the chat that made it."""
    spec: ScheduleSpec
    active: bool
    next_fire_at: float | None
    created_at: float
    updated_at: float
    fires: int = 0
    skipped: int = 0
    failures: int = 0
    last_fire_at: float | None = None
    last_run_id: str | None = None
    last_session_id: str | None = None
    last_error: str | None = None
    finished_reason: str | None = None
    """Why it stopped for good (``None`` while active or merely paused)."""
    recent: tuple[FireRecord, ...] = ()

    @property
    def status(self) -> Literal["active", "paused", "finished"]:
        if self.active:
            return "active"
        return "finished" if self.finished_reason is not None else "paused"

    @property
    def trigger(self) -> Trigger:
        return parse_trigger(self.spec.trigger_kind, self.spec.trigger_expr)

    # -- the store row -------------------------------------------------------------------

    @classmethod
    def from_row(cls, row: ScheduleRow) -> Schedule:
        data = dict(row.data)
        spec = ScheduleSpec.model_construct(
            instruction=data.get("instruction", ""),
            trigger_kind=data.get("trigger_kind", "at"),
            trigger_expr=data.get("trigger_expr", ""),
            continue_session=bool(data.get("continue_session", False)),
            max_fires=data.get("max_fires"),
            expires_at=data.get("expires_at"),
            until=data.get("until"),
        )
        recent = tuple(
            FireRecord(float(r["at"]), str(r["run_id"]), str(r["session_id"]), bool(r["attached"]))
            for r in data.get("recent", ())
            if isinstance(r, Mapping)
        )
        return cls(
            id=row.id,
            agent=row.agent,
            session_id=row.session_id,
            spec=spec,
            active=row.active,
            next_fire_at=row.next_fire_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
            fires=int(data.get("fires", 0)),
            skipped=int(data.get("skipped", 0)),
            failures=int(data.get("failures", 0)),
            last_fire_at=data.get("last_fire_at"),
            last_run_id=data.get("last_run_id"),
            last_session_id=data.get("last_session_id"),
            last_error=data.get("last_error"),
            finished_reason=data.get("finished_reason"),
            recent=recent,
        )

    def to_row(self) -> ScheduleRow:
        from .store.base import ScheduleRow

        data: dict[str, Any] = {
            **self.spec.model_dump(),
            "fires": self.fires,
            "skipped": self.skipped,
            "failures": self.failures,
            "last_fire_at": self.last_fire_at,
            "last_run_id": self.last_run_id,
            "last_session_id": self.last_session_id,
            "last_error": self.last_error,
            "finished_reason": self.finished_reason,
            "recent": [
                {"at": r.at, "run_id": r.run_id, "session_id": r.session_id, "attached": r.attached}
                for r in self.recent
            ],
        }
        return ScheduleRow(
            id=self.id,
            agent=self.agent,
            session_id=self.session_id,
            data=data,
            next_fire_at=self.next_fire_at,
            active=self.active,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )

    def fire_input(self) -> str:
        """What a fire sends the agent: the instruction, plus the stop-condition protocol
        when the schedule has ``until``."""
        if not self.spec.until:
            return self.spec.instruction
        return (
            f"{self.spec.instruction}\n\n"
            f'<schedule-stop-condition schedule_id="{self.id}">\n'
            f"This run was started by schedule {self.id}, which should stop when: "
            f"{self.spec.until}\n"
            "Do the task first. Then, if that condition now holds, call "
            f'cancel_schedule(schedule_id="{self.id}", reason=...) saying why. If it does not '
            "hold yet, do not cancel the schedule.\n</schedule-stop-condition>"
        )


def _invalid(exc: ValidationError) -> UserError:
    fields = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
    )
    return UserError(f"invalid schedule: {fields}", hint="fix the named field(s)")


def validate_spec(data: Mapping[str, Any]) -> ScheduleSpec:
    """``ScheduleSpec`` from plain data, a ``UserError`` naming the fields when invalid."""
    try:
        return ScheduleSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise _invalid(exc) from None


# -- the service ---------------------------------------------------------------------------


class Schedules:
    """Schedules over a ``ChatStore``: what the tools and the REST routes call."""

    def __init__(self, store: ChatStore, *, now: Clock = time.time) -> None:
        self.store = store
        self.now = now

    async def create(
        self, spec: ScheduleSpec, *, agent: str, session_id: str | None = None
    ) -> Schedule:
        now = self.now()
        trigger = self._armable(spec, now)
        schedule = Schedule(
            id=f"sch_{uuid4().hex[:16]}",
            agent=agent,
            session_id=session_id,
            spec=spec,
            active=True,
            next_fire_at=trigger.first(now),
            created_at=now,
            updated_at=now,
        )
        await self.store.save_schedule(schedule.to_row())
        return schedule

    def _armable(self, spec: ScheduleSpec, now: float) -> Trigger:
        """The spec's trigger, if it can still fire from ``now`` (``UserError`` otherwise)."""
        try:
            trigger = parse_trigger(spec.trigger_kind, spec.trigger_expr, now=now)
        except ValueError as exc:
            raise UserError(str(exc), hint="give a time that is still ahead") from None
        if spec.expires_at is not None and spec.expires_at <= now:
            raise UserError("expires_at: is in the past", hint="give a time that is still ahead")
        return trigger

    async def get(self, schedule_id: str, *, agent: str | None = None) -> Schedule:
        row = await self.store.get_schedule(schedule_id)
        if row is None or (agent is not None and row.agent != agent):
            raise NotFound(f"unknown schedule {schedule_id!r}")
        return Schedule.from_row(row)

    async def list(self, *, agent: str | None = None, active: bool | None = None) -> list[Schedule]:
        rows = await self.store.list_schedules(agent=agent, active=active)
        return [Schedule.from_row(r) for r in rows]

    async def save(self, schedule: Schedule) -> Schedule:
        schedule = replace(schedule, updated_at=self.now())
        await self.store.save_schedule(schedule.to_row())
        return schedule

    async def cancel(self, schedule_id: str, reason: str, *, agent: str | None = None) -> Schedule:
        """Stop a schedule for good (``finished_reason`` says why); resuming re-arms it."""
        schedule = await self.get(schedule_id, agent=agent)
        reason = " ".join(reason.split())[:500] or "no reason given"
        return await self.save(
            replace(
                schedule, active=False, next_fire_at=None, finished_reason=f"cancelled: {reason}"
            )
        )

    async def delete(self, schedule_id: str) -> None:
        if not await self.store.delete_schedule(schedule_id):
            raise NotFound(f"unknown schedule {schedule_id!r}")

    async def update(self, schedule_id: str, patch: SchedulePatch) -> Schedule:
        """Apply ``patch``; a changed trigger or a resume recomputes the next fire, a resume
        clears the finished reason, and a pause keeps it paused (``next_fire_at`` cleared)."""
        schedule = await self.get(schedule_id)
        changes = patch.model_dump(exclude_unset=True)
        active = changes.pop("active", None)
        merged = {**schedule.spec.model_dump(), **changes}
        if "trigger_kind" in changes and "trigger_expr" not in changes:
            raise UserError(
                "trigger_expr: required when trigger_kind changes", hint="send both fields"
            )
        spec = validate_spec(merged)
        now = self.now()
        retrigger = spec.trigger_kind != schedule.spec.trigger_kind or (
            spec.trigger_expr != schedule.spec.trigger_expr
        )
        resume = active is True and not schedule.active
        pause = active is False
        updated = replace(schedule, spec=spec)
        if pause:
            updated = replace(updated, active=False, next_fire_at=None)
        elif resume or (retrigger and schedule.active):
            trigger = self._armable(spec, now)
            if spec.max_fires is not None and schedule.fires >= spec.max_fires:
                raise RunConflict(
                    f"schedule {schedule_id!r} already fired {schedule.fires} time(s), its "
                    f"max_fires",
                    hint="raise max_fires in the same request",
                )
            if trigger.one_shot and not retrigger and schedule.fires:
                raise RunConflict(
                    f"schedule {schedule_id!r} has fired its one shot",
                    hint="give a new trigger_expr in the same request",
                )
            updated = replace(
                updated, active=True, next_fire_at=trigger.first(now), finished_reason=None
            )
        elif spec.expires_at is not None and spec.expires_at <= now and schedule.active:
            raise UserError("expires_at: is in the past", hint="give a time that is still ahead")
        return await self.save(updated)


# -- the plugin ----------------------------------------------------------------------------

_TOOL_GUIDANCE = """\
You can schedule work for later with schedule_run: a one-shot time (trigger_kind "at", an
ISO 8601 UTC time), an interval ("every", like 30m or 1d) or a cron line ("cron", five
fields, UTC). Write the instruction so it stands alone: the scheduled run sees only it (or,
with continue_session, this conversation). For "keep doing X until Y", pass until with a
max_fires or expires_at as a safety net. list_schedules shows them; cancel_schedule stops one."""


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "instruction": {"type": "string", "description": "What the scheduled run does."},
            "trigger_kind": {"type": "string", "enum": ["at", "every", "cron"]},
            "trigger_expr": {
                "type": "string",
                "description": "at: ISO 8601 time (UTC, e.g. 2026-12-01T09:00:00Z) or Unix "
                "seconds; every: a duration like 30m, 2h, 1d (at least 1m); cron: five fields.",
            },
            "continue_session": {
                "type": "boolean",
                "default": False,
                "description": "Run in this conversation instead of a fresh one each time.",
            },
            "until": {
                "type": "string",
                "description": "Optional stop condition in words (needs max_fires or "
                "expires_at; not for 'at').",
            },
            "max_fires": {"type": "integer", "minimum": 1},
            "expires_at": {"type": "string", "description": "ISO 8601 time or Unix seconds."},
        },
        "required": ["instruction", "trigger_kind", "trigger_expr"],
    }


def _describe(s: Schedule) -> str:
    def when(t: float | None) -> str:
        if t is None:
            return "-"
        return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%SZ"
        )

    line = (
        f"- {s.id} [{s.status}] {s.spec.trigger_kind} {s.spec.trigger_expr!r}, next "
        f"{when(s.next_fire_at)}, fired {s.fires}x: {s.spec.instruction[:80]}"
    )
    if s.spec.until:
        line += f" (until: {s.spec.until[:80]})"
    if s.finished_reason:
        line += f" ({s.finished_reason})"
    return line


class Scheduling:
    """The scheduling plugin: ``schedule_run`` (needs approval), ``list_schedules`` and
    ``cancel_schedule`` over ``store``'s schedules. The app's ``Scheduler`` fires them; with
    ``store=None`` the app that serves the agent binds its own store at startup."""

    def __init__(
        self, store: ChatStore | None = None, *, now: Clock = time.time, name: str = "scheduling"
    ) -> None:
        self.store = store
        self.now = now
        self.name = name

    def __repr__(self) -> str:
        return f"Scheduling({self.store!r})"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        if self.store is None:  # not served (yet): nothing could fire a schedule
            logger.info("Scheduling has no store: its tools are left out of this run")
            return PluginInstance()
        service = Schedules(self.store, now=self.now)
        agent = ctx.agent.name

        async def schedule_run(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            try:
                spec = validate_spec(args)
                schedule = await service.create(spec, agent=agent, session_id=ctx.session_id)
            except UserError as exc:
                raise InvalidToolArguments(exc.message) from None
            return f"Scheduled {schedule.id}.\n{_describe(schedule)}"

        async def list_schedules(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            schedules = await service.list(agent=agent)
            if not schedules:
                return "No schedules."
            lines = [_describe(s) for s in schedules[:_LISTED]]
            if len(schedules) > _LISTED:
                lines.append(f"... and {len(schedules) - _LISTED} more.")
            return "\n".join(lines)

        async def cancel_schedule(args: dict[str, Any], ctx: RunContext[Any]) -> str:
            schedule_id, reason = args.get("schedule_id"), args.get("reason", "")
            if not isinstance(schedule_id, str) or not isinstance(reason, str):
                raise InvalidToolArguments("`schedule_id` and `reason` must be strings")
            try:
                schedule = await service.cancel(schedule_id, reason, agent=agent)
            except NotFound:
                return f"No schedule {schedule_id!r}; list_schedules shows the ids."
            return f"Cancelled {schedule.id}."

        tools = (
            Tool(
                name="schedule_run",
                description="Schedule a run for later: once, on an interval, or on a cron line.",
                parameters=_schema(),
                invoke=schedule_run,
                needs_approval=True,
            ),
            Tool(
                name="list_schedules",
                description="List the schedules (id, status, trigger, next fire).",
                parameters={"type": "object", "properties": {}},
                invoke=list_schedules,
            ),
            Tool(
                name="cancel_schedule",
                description="Stop a schedule for good, saying why.",
                parameters={
                    "type": "object",
                    "properties": {
                        "schedule_id": {"type": "string"},
                        "reason": {"type": "string", "description": "Why it stops."},
                    },
                    "required": ["schedule_id", "reason"],
                },
                invoke=cancel_schedule,
            ),
        )
        return PluginInstance(tools=tools, instructions=_TOOL_GUIDANCE)


# -- the scheduler -------------------------------------------------------------------------


FireOutcome = Literal[
    "started", "attached", "deferred", "skipped", "expired", "exhausted", "failed", "lost"
]


@dataclass
class TickReport:
    """What one ``tick`` did, per outcome: schedule ids."""

    outcomes: dict[str, list[str]] = field(default_factory=dict)

    def add(self, outcome: FireOutcome, schedule_id: str) -> None:
        self.outcomes.setdefault(outcome, []).append(schedule_id)

    def count(self, outcome: FireOutcome) -> int:
        return len(self.outcomes.get(outcome, ()))


@dataclass(frozen=True, slots=True)
class Fired:
    """A fire that reached the supervisor."""

    schedule_id: str
    run_id: str
    session_id: str
    attached: bool


class Scheduler:
    """Fires due schedules through ``supervisor``; ``tick()`` is one pass, ``start()`` runs
    passes every ``poll`` seconds until ``aclose()``."""

    def __init__(
        self,
        store: ChatStore,
        supervisor: RunSupervisor,
        *,
        now: Clock = time.time,
        poll: float = 1.0,
        batch: int = 100,
    ) -> None:
        if poll <= 0:
            raise UserError(f"scheduler_poll must be > 0, got {poll!r}", hint="the default is 1.0")
        self.store = store
        self.supervisor = supervisor
        self.now = now
        self.poll = poll
        self.batch = batch
        self.schedules = Schedules(store, now=now)
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self.ticks = 0
        """Completed passes of the loop."""

    def __repr__(self) -> str:
        return f"Scheduler(poll={self.poll}, running={self._task is not None})"

    # -- the loop ------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="lovia-scheduler")

    def wake(self) -> None:
        """Run the next pass now (a schedule was created or changed)."""
        self._wake.set()

    async def _loop(self) -> None:
        while not self._closing:
            try:
                await self.tick()
            except Exception:  # the loop must outlive a bad pass (a store hiccup)
                logger.exception("a scheduler pass failed")
            self.ticks += 1
            try:
                await asyncio.wait_for(self._wake.wait(), self.poll)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    async def aclose(self) -> None:
        self._closing = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # -- one pass ------------------------------------------------------------------------

    def _full(self) -> bool:
        return len(self.supervisor.live_runs()) >= self.supervisor.max_background_runs

    async def tick(self) -> TickReport:
        """Fire every due schedule once (what needs a free run slot and finds none is
        deferred to a later pass)."""
        report = TickReport()
        now = self.now()
        for row in await self.store.due_schedules(now, limit=self.batch):
            try:
                schedule = Schedule.from_row(row)
                schedule.trigger  # noqa: B018 - a row edited into nonsense stops here
            except Exception:
                logger.exception("schedule %s is unreadable; deactivating it", row.id)
                assert row.next_fire_at is not None
                await self.store.claim_fire(
                    row.id, expected_next=row.next_fire_at, next_fire_at=None, active=False
                )
                report.add("failed", row.id)
                continue
            try:
                outcome = await self._fire_due(schedule, now)
            except Exception:
                logger.exception("schedule %s could not fire", schedule.id)
                outcome = "failed"
            report.add(outcome, schedule.id)
        return report

    async def _claim(self, schedule: Schedule, next_fire_at: float | None, active: bool) -> bool:
        assert schedule.next_fire_at is not None
        return await self.store.claim_fire(
            schedule.id,
            expected_next=schedule.next_fire_at,
            next_fire_at=next_fire_at,
            active=active,
        )

    async def _record(self, schedule_id: str, change: Callable[[Schedule], Schedule]) -> None:
        """Apply bookkeeping to the row as it is now (a route may have changed it)."""
        row = await self.store.get_schedule(schedule_id)
        if row is not None:
            await self.schedules.save(change(Schedule.from_row(row)))

    async def _finish(self, schedule: Schedule, reason: str) -> bool:
        won = await self._claim(schedule, None, False)
        if won:
            await self._record(schedule.id, lambda s: replace(s, finished_reason=reason))
        return won

    async def _fire_due(self, s: Schedule, now: float) -> FireOutcome:
        assert s.next_fire_at is not None
        if s.spec.expires_at is not None and s.spec.expires_at <= now:
            return "expired" if await self._finish(s, "expired") else "lost"
        if s.spec.max_fires is not None and s.fires >= s.spec.max_fires:
            return "exhausted" if await self._finish(s, "max_fires reached") else "lost"
        trigger = s.trigger
        following = trigger.following(s.next_fire_at, now)
        if following is not None and s.spec.expires_at is not None:
            following = following if following < s.spec.expires_at else None

        def after(fired: bool) -> tuple[float | None, bool, str | None]:
            """(next_fire_at, active, finished_reason) once this slot is done; only a fire
            that happened counts toward ``max_fires``."""
            limit = s.spec.max_fires
            if fired and limit is not None and s.fires + 1 >= limit:
                return None, False, "max_fires reached"
            if following is None:
                reason = ("fired" if fired else "missed") if trigger.one_shot else "expired"
                return None, False, reason
            return following, True, None

        async def advance(change: Callable[[Schedule], Schedule]) -> bool:
            """Win the slot without firing it, then record ``change``."""
            next_fire_at, active, reason = after(False)
            if not await self._claim(s, next_fire_at, active):
                return False
            await self._record(s.id, lambda c: replace(change(c), finished_reason=reason))
            return True

        if s.agent not in self.supervisor.agents:
            error = f"agent {s.agent!r} is not served here"
            failed = await advance(lambda c: replace(c, failures=c.failures + 1, last_error=error))
            return "failed" if failed else "lost"
        target = s.session_id if s.spec.continue_session else None
        if not s.spec.continue_session and await self._fire_live(s):
            skipped = await advance(lambda c: replace(c, skipped=c.skipped + 1))
            return "skipped" if skipped else "lost"
        if target is not None and await self.store.get_session(target) is None:
            return "failed" if await self._finish(s, "its session was deleted") else "lost"
        joins_live = target is not None and self.supervisor.live(target) is not None
        if not joins_live and self._full():
            return "deferred"  # still due: a later pass fires it
        next_fire_at, active, finished = after(True)
        if not await self._claim(s, next_fire_at, active):
            return "lost"
        try:
            fired = await self._launch(s, target)
        except CapacityExceeded:
            # Taken between the check and the start: put the fire back, it stays due.
            await self._record(s.id, lambda c: replace(c, active=True, next_fire_at=s.next_fire_at))
            return "deferred"
        except Exception as exc:
            logger.exception("schedule %s failed to start its run", s.id)
            error = f"{type(exc).__name__}: {exc}"
            not_next, not_active, not_reason = after(False)
            await self._record(
                s.id,
                lambda c: replace(
                    c,
                    failures=c.failures + 1,
                    last_error=error,
                    next_fire_at=not_next,
                    active=not_active,
                    finished_reason=not_reason,
                ),
            )
            return "failed"
        await self._record(s.id, lambda c: _fired(c, fired, now, finished))
        return "attached" if fired.attached else "started"

    async def _fire_live(self, s: Schedule) -> bool:
        """Whether the previous fresh-session fire is still running, here or in another
        process (its run record says "running"; one a crash interrupted does not count)."""
        previous = s.last_session_id
        if previous is None:
            return False
        if self.supervisor.live(previous) is not None:
            return True
        meta = await self.store.get_session(previous)
        if meta is None or meta.active_run_id is None:
            return False
        records = await self.store.list_runs(session_id=previous, limit=5)
        mine = [r for r in records if r.run_id == meta.active_run_id]
        if not mine and self.supervisor.cluster is not None:
            # Several workers: a run is recorded when a worker takes it, so a pointer with
            # no record is a fire still waiting in the engine's queue.
            return True
        return any(r.status == "running" for r in mine)

    async def _launch(self, s: Schedule, target: str | None) -> Fired:
        session_id = target or uuid4().hex
        started = await self.supervisor.start(
            s.fire_input(), session_id=session_id, agent=s.agent, source="schedule"
        )
        run_id, attached = started.run.run_id, started.attached
        if s.spec.continue_session and s.session_id is None:
            await self._record(s.id, lambda c: replace(c, session_id=session_id))
        return Fired(s.id, run_id, session_id, attached)

    # -- run now -------------------------------------------------------------------------

    async def run_now(self, schedule_id: str) -> Fired:
        """Fire the schedule once now, whatever its state: a paused schedule stays paused and
        the next fire keeps its time. ``RunConflict`` while its previous fire is live."""
        s = await self.schedules.get(schedule_id)
        if s.agent not in self.supervisor.agents:
            raise RunConflict(
                f"schedule {schedule_id!r} belongs to agent {s.agent!r}, which is not served here",
                hint="serve that agent, or delete the schedule",
            )
        target = s.session_id if s.spec.continue_session else None
        live = (
            self.supervisor.live(target) is not None
            if target is not None
            else await self._fire_live(s)
        )
        if live:
            raise RunConflict(
                f"the previous fire of schedule {schedule_id!r} is still running",
                hint="wait for it to finish, or cancel it",
            )
        if self._full():
            raise CapacityExceeded(
                "every background-run slot is busy", hint="retry when a run has finished"
            )
        fired = await self._launch(s, target)
        await self._record(s.id, lambda c: _fired(c, fired, self.now(), None))
        return fired


def _fired(s: Schedule, fired: Fired, now: float, finished: str | None) -> Schedule:
    record = FireRecord(now, fired.run_id, fired.session_id, fired.attached)
    return replace(
        s,
        fires=s.fires + 1,
        last_fire_at=now,
        last_run_id=fired.run_id,
        last_session_id=fired.session_id,
        last_error=None,
        finished_reason=finished if finished is not None else s.finished_reason,
        recent=(*s.recent, record)[-_RECENT_FIRES:],
    )
