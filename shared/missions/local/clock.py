"""The dev server's schedule clock: EventBridge Scheduler never fires in moto, so a laptop moves time by hand."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from missions.core.triggers.cron import MAX_WINDOW, Expression, OneTime, iso_utc, parse_at, parse_expression, zone
from missions.core.triggers.specs import ScheduleSpec


class LocalScheduleClock:
    """A clock the dev server moves by hand; each `advance` returns the schedule firings it passed.

    The window is (previous now, new now]: consecutive advances neither repeat nor miss a firing.
    Firings come in time order (ties by schedule name), with the scheduled time as the scheduler
    would substitute it, ready for `ScheduleSpec.event`. The capabilities' schedules are fixed when the
    clock is made; schedules that come and go (users' own, read from the Scheduler) are passed to each
    `advance`.
    """

    MAX_ADVANCE_SECONDS = MAX_WINDOW.total_seconds()

    def __init__(self, specs: Iterable[ScheduleSpec], start: datetime | None = None):
        if start is None:
            start = datetime.now(UTC).replace(second=0, microsecond=0)
        if start.tzinfo is None:
            raise ValueError("the clock's start must be timezone-aware")
        self._now = start.astimezone(UTC)
        self._schedules = [_parsed(spec) for spec in specs]

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float, also: Iterable[ScheduleSpec] = ()) -> list[tuple[ScheduleSpec, str]]:
        if seconds < 0:
            raise ValueError("the clock does not go backwards")
        if seconds > self.MAX_ADVANCE_SECONDS:
            raise ValueError(f"advance at most {MAX_WINDOW.days} days at a time")
        end = self._now + timedelta(seconds=seconds)
        firings = [
            (moment, spec.name, spec)
            for spec, expression in [*self._schedules, *(_parsed(spec) for spec in also)]
            for moment in expression.fire_times(self._now, end, spec.timezone)
        ]
        firings.sort(key=lambda firing: (firing[0], firing[1]))
        self._now = end
        return [(spec, iso_utc(moment)) for moment, _, spec in firings]


def _parsed(spec: ScheduleSpec) -> tuple[ScheduleSpec, Expression | OneTime]:
    zone(spec.timezone)
    if spec.expression.startswith("at("):  # a one-time timer (flow control's debounce)
        return spec, parse_at(spec.expression)
    return spec, parse_expression(spec.expression, anchor=spec.anchor)


def scheduler_specs(client: Any, group: str) -> list[ScheduleSpec]:
    """The enabled schedules of a group of (moto's) EventBridge Scheduler, as the clock fires them: with the
    input their target would receive. A disabled (paused) schedule does not fire, as in AWS."""
    specs = []
    for page in client.get_paginator("list_schedules").paginate(GroupName=group, State="ENABLED"):
        for summary in page.get("Schedules", []):
            found = client.get_schedule(GroupName=group, Name=summary["Name"])
            created = found.get("CreationDate")
            specs.append(
                ScheduleSpec(
                    name=found["Name"],
                    capability="",
                    schedule_id=found["Name"],
                    expression=found["ScheduleExpression"],
                    timezone=found.get("ScheduleExpressionTimezone") or "UTC",
                    input=json.loads(found["Target"].get("Input") or "{}"),
                    anchor=created.astimezone(UTC).replace(microsecond=0) if isinstance(created, datetime) else None,
                )
            )
    return specs
