"""The dev server's schedule clock: EventBridge Scheduler never fires in moto, so a laptop moves time by hand."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from missions.core.cron import MAX_WINDOW, iso_utc, parse_cron, zone
from missions.core.trigger_specs import ScheduleSpec


class LocalScheduleClock:
    """A clock the dev server moves by hand; each `advance` returns the schedule firings it passed.

    The window is (previous now, new now]: consecutive advances neither repeat nor miss a firing.
    Firings come in time order (ties by schedule name), with the scheduled time as the scheduler
    would substitute it, ready for `ScheduleSpec.event`.
    """

    MAX_ADVANCE_SECONDS = MAX_WINDOW.total_seconds()

    def __init__(self, specs: Iterable[ScheduleSpec], start: datetime | None = None):
        if start is None:
            start = datetime.now(UTC).replace(second=0, microsecond=0)
        if start.tzinfo is None:
            raise ValueError("the clock's start must be timezone-aware")
        self._now = start.astimezone(UTC)
        self._schedules = [(spec, parse_cron(spec.expression)) for spec in specs]
        for spec, _ in self._schedules:
            zone(spec.timezone)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> list[tuple[ScheduleSpec, str]]:
        if seconds < 0:
            raise ValueError("the clock does not go backwards")
        if seconds > self.MAX_ADVANCE_SECONDS:
            raise ValueError(f"advance at most {MAX_WINDOW.days} days at a time")
        end = self._now + timedelta(seconds=seconds)
        firings = [
            (moment, spec.name, spec)
            for spec, cron in self._schedules
            for moment in cron.fire_times(self._now, end, spec.timezone)
        ]
        firings.sort(key=lambda firing: (firing[0], firing[1]))
        self._now = end
        return [(spec, iso_utc(moment)) for moment, _, spec in firings]
