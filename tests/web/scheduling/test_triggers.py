"""Trigger parsing and the next-fire arithmetic (no store, no clock: ``now`` is passed)."""

from __future__ import annotations

import datetime

import pytest
from lovia.exceptions import UserError
from lovia.web.scheduling import (
    AT_GRACE_SECONDS,
    ScheduleSpec,
    parse_instant,
    parse_trigger,
    validate_spec,
)
from pydantic import ValidationError

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.timezone.utc).timestamp()


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T13:00:00Z",
        "2026-12-01T13:00:00z",
        "2026-12-01T13:00:00+00:00",
        "2026-12-01T14:00:00+01:00",
        "2026-12-01T13:00:00",
        str(int(NOW + 3600)),
        NOW + 3600,
    ],
)
def test_at_accepts_iso_z_offsets_naive_utc_and_epoch(text: str | float) -> None:
    assert parse_instant(text) == NOW + 3600


@pytest.mark.parametrize(
    "text",
    [
        "tomorrow",
        "",
        "12/01/2026",
        "nan",
        "inf",
        "-5",
        "1e400",
        "99999-01-01T00:00:00",
        "2026-13-01T00:00:00Z",
        "\x00",
    ],
)
def test_bad_instants_are_refused_naming_the_field(text: str) -> None:
    with pytest.raises(ValueError, match="^at: "):
        parse_instant(text)


def test_at_in_the_past_is_refused_beyond_a_small_grace() -> None:
    recent = parse_trigger("at", str(NOW - AT_GRACE_SECONDS + 1), now=NOW)
    assert recent.first(NOW) < NOW  # due at once
    with pytest.raises(ValueError, match="trigger_expr: .* is in the past"):
        parse_trigger("at", "2026-11-30T00:00:00Z", now=NOW)


@pytest.mark.parametrize(
    ("expr", "seconds"),
    [
        ("60", 60),
        ("1m", 60),
        ("5m", 300),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("1D 2H", 93600),
        ("90s", 90),
    ],
)
def test_every_parses_durations(expr: str, seconds: float) -> None:
    assert parse_trigger("every", expr).interval == seconds


@pytest.mark.parametrize("expr", ["30s", "0", "-5m", "1", "5 minutes", "m", "367d", "1.5h"])
def test_every_refuses_nonsense_and_too_fast_or_slow(expr: str) -> None:
    with pytest.raises(ValueError, match="^trigger_expr: "):
        parse_trigger("every", expr)


def test_every_coalesces_missed_slots_and_keeps_its_phase() -> None:
    trigger = parse_trigger("every", "10m")
    first = trigger.first(NOW)
    assert first == NOW + 600
    # Down for 35 minutes: one fire now, the next on the original grid, after now.
    assert trigger.following(first, first + 2100) == first + 2400
    assert trigger.following(first, first) == first + 600


def test_cron_fires_on_its_grid_and_coalesces() -> None:
    trigger = parse_trigger("cron", "*/15 * * * *")
    assert trigger.first(NOW) == NOW + 900
    assert trigger.following(NOW + 900, NOW + 7200 + 1) == NOW + 7200 + 900


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 30 2 *", "never fires"),  # 30 February
        ("0 0 31 4 *", "never fires"),
        ("* * * * * *", "five fields"),  # a seconds field: every second
        ("*/1 * * * * * *", "five fields"),
        ("61 * * * *", "not a valid"),
        ("hello", "five fields"),
        ("@never", "not a valid"),
    ],
)
def test_cron_refuses_lines_that_never_fire_or_fire_every_second(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_trigger("cron", expr, now=NOW)


def test_cron_accepts_nicknames() -> None:
    assert parse_trigger("cron", "@daily").first(NOW) == NOW + 12 * 3600


def spec(**fields: object) -> dict[str, object]:
    return {
        "instruction": "check the build",
        "trigger_kind": "every",
        "trigger_expr": "1h",
        **fields,
    }


def test_until_needs_a_safety_net_and_a_repeating_trigger() -> None:
    with pytest.raises(ValidationError, match="until\n.*safety net"):
        ScheduleSpec.model_validate(spec(until="the build is green"))
    with pytest.raises(ValidationError, match="until\n.*one-shot"):
        ScheduleSpec.model_validate(
            spec(trigger_kind="at", trigger_expr="2030-01-01T00:00:00Z", until="x", max_fires=3)
        )
    ok = ScheduleSpec.model_validate(spec(until=" green ", expires_at="2030-01-01T00:00:00Z"))
    assert ok.until == "green" and ok.expires_at == parse_instant("2030-01-01T00:00:00Z")


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"max_fires": 0}, "max_fires"),
        ({"max_fires": -3}, "max_fires"),
        ({"until": "x" * 1001, "max_fires": 2}, "until"),
        ({"instruction": "   "}, "instruction"),
        ({"instruction": "x" * 20_001}, "instruction"),
        ({"trigger_kind": "sometimes"}, "trigger_kind"),
        ({"trigger_expr": "30s"}, "trigger_expr"),
        ({"expires_at": "soon"}, "expires_at"),
        ({"expires_at": True}, "expires_at"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_every_bad_field_is_named(fields: dict[str, object], name: str) -> None:
    with pytest.raises(UserError, match=f"{name}: "):
        validate_spec(spec(**fields))
