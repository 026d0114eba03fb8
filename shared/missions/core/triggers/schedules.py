"""A user's own schedules: what one is, and the rules a new one must pass (missions.service.triggers.schedules).

A schedule is a recurring EventBridge Scheduler expression (cron(...) in a time zone, or rate(...)), a goal,
and a capability (or "auto": chosen from the goal at each firing, as POST /missions chooses). The rules,
checked before anything is stored:
- the expression parses (the message names the field and the value that is wrong) and fires again;
- the time zone is a known IANA zone;
- no two of its next `CHECKED_FIRINGS` firings are closer than the minimum interval. Within that horizon this
  is exact (daylight-saving shifts included, as `missions.core.triggers.cron` evaluates them); beyond it a cron repeats
  the same days' pattern, so the horizon's firings show every gap it has except rare calendar coincidences.
A refusal says what is wrong and, when the expression parses, when it would have fired next.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import Field

from missions.core.errors import ScheduleRejected
from missions.core.mission.envelope import Model, utcnow
from missions.core.triggers.cron import Expression, iso_utc, next_fire_times, parse_expression, zone

AUTO = "auto"  # the capability is chosen from the goal at each firing
CHECKED_FIRINGS = 50  # the firings the minimum interval is checked over
SHOWN_FIRINGS = 5  # the next firings a schedule's view shows
KEPT_FIRINGS = 10  # the last firings a schedule keeps, with what each did
GOAL_LIMIT = 2000
CONTEXT_LIMIT = 16 * 1024  # bytes of the context's JSON
SCHEDULE_ID_PATTERN = r"^s_[0-9a-f]{20}$"
ScheduleState = Literal["enabled", "paused"]
FiringOutcome = Literal["started", "queued", "duplicate", "skipped", "rejected"]


class Firing(Model):
    """One firing as the schedule function saw it: what it started, or why it started nothing."""

    scheduled_time: str
    outcome: FiringOutcome
    mission_id: str | None = None
    reason: str | None = None
    at: str = Field(default_factory=utcnow)


class ScheduleRecord(Model):
    """A user's schedule as stored; the Scheduler's schedule of the same name makes it fire."""

    schedule_id: str = Field(pattern=SCHEDULE_ID_PATTERN)
    user_id: str = Field(min_length=1, max_length=256)
    name: str = Field("", max_length=100)
    expression: str = Field(min_length=1, max_length=256)
    timezone: str = Field("UTC", min_length=1, max_length=64)
    goal: str = Field(min_length=1, max_length=GOAL_LIMIT)
    capability: str = Field(AUTO, min_length=1, max_length=64)
    context: dict[str, Any] = Field(default_factory=dict)
    state: ScheduleState = "enabled"
    created_at: str = Field(default_factory=utcnow)
    updated_at: str = Field(default_factory=utcnow)
    firings: list[Firing] = Field(default_factory=list)  # the newest last, at most KEPT_FIRINGS

    def parsed(self) -> Expression:
        """The expression, a rate counted from when the schedule was created."""
        return parse_expression(self.expression, anchor=datetime.fromisoformat(self.created_at))

    def fired(self, firing: Firing) -> list[Firing]:
        """The firings kept once this one is recorded (a redelivered firing replaces its first record)."""
        kept = [f for f in self.firings if f.scheduled_time != firing.scheduled_time]
        return [*kept, firing][-KEPT_FIRINGS:]


def fire_times_view(moments: list[datetime], timezone: str) -> list[dict[str, str]]:
    """Each firing in UTC and in the schedule's own time zone (ISO 8601, with its offset)."""
    tz = zone(timezone)
    return [{"utc": iso_utc(m), "local": m.astimezone(tz).isoformat()} for m in moments]


def check_expression(
    expression: str, timezone: str, *, now: datetime, minimum_interval: timedelta, field: str = "expression"
) -> list[datetime]:
    """The expression's next firings after `now` if it may be a user's schedule; ScheduleRejected saying
    what is wrong (and, when it parses, its next firings) otherwise."""
    try:
        zone(timezone)
    except ValueError as exc:
        raise ScheduleRejected(
            "timezone", "unknown_timezone", f"{exc}; use an IANA name such as Europe/Paris"
        ) from None
    try:
        parsed = parse_expression(expression, anchor=now)
    except ValueError as exc:
        raise ScheduleRejected(field, "invalid_expression", str(exc)) from None
    upcoming = next_fire_times(parsed, now, CHECKED_FIRINGS + 1, timezone)
    if not upcoming:
        never = f"{expression!r} does not fire in the 4 years after {iso_utc(now)}"
        raise ScheduleRejected(field, "never_fires", never, next_fire_times=[])
    closest = min((b - a for a, b in zip(upcoming, upcoming[1:], strict=False)), default=None)
    if closest is not None and closest < minimum_interval:
        first = next(i for i, (a, b) in enumerate(zip(upcoming, upcoming[1:], strict=False)) if b - a == closest)
        raise ScheduleRejected(
            field,
            "too_frequent",
            f"{expression!r} fires {_span(closest)} apart (at {iso_utc(upcoming[first])} and "
            f"{iso_utc(upcoming[first + 1])}); the minimum interval is {_span(minimum_interval)}",
            next_fire_times=[iso_utc(m) for m in upcoming[:SHOWN_FIRINGS]],
        )
    return upcoming


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


__all__ = [
    "AUTO",
    "CHECKED_FIRINGS",
    "CONTEXT_LIMIT",
    "GOAL_LIMIT",
    "KEPT_FIRINGS",
    "SCHEDULE_ID_PATTERN",
    "SHOWN_FIRINGS",
    "Firing",
    "FiringOutcome",
    "ScheduleRecord",
    "ScheduleState",
    "check_expression",
    "fire_times_view",
]
