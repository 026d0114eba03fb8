"""The sample home's long-term statistics, as HA's recorder compiles them: hourly for every sensor with a
`state_class`, kept for months while the state history it derives them from is a week.

The week's hours are compiled from its recorded states (mean, min and max of a measurement; a meter's
reading at the hour's end and what the hour used). The 90 days before it repeat that week hour by hour,
scaled per day by a seeded factor (0.85-1.15) for power and energy, so "and last month?" has figures
that never change and agree with the week at the seam. Days, weeks and months sum the hours in the
home's zone, as HA does.
"""

from __future__ import annotations

import random
import statistics as stats
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from capabilities.home_assistant.dev.sample_data import SEED, WEEK, home_zone
from capabilities.home_assistant.ha.port import HAUnknownEntity, StatisticPoint, StatisticsPeriod

if TYPE_CHECKING:
    from capabilities.home_assistant.dev.sample import SampleHome

HORIZON = timedelta(days=90)  # how far back the sample home's statistics go (HA keeps them for ever)
HOUR = timedelta(hours=1)
METERS = ("total", "total_increasing")
STATE_CLASSES = ("measurement", *METERS)
SCALED = ("power", "energy")  # the device classes whose use varies from day to day


def statistics(
    home: SampleHome, statistic_ids: Sequence[str], start: datetime, end: datetime, period: StatisticsPeriod
) -> dict[str, list[StatisticPoint]]:
    now = _floor(home.now)  # HA compiles finished hours only
    origin = _floor(home.now - WEEK - HORIZON)  # where the statistics begin (a meter's `sum` counts from there)
    first, last = max(_floor(start), origin), min(end, now)
    found: dict[str, list[StatisticPoint]] = {}
    for statistic_id in statistic_ids:
        try:
            attributes = home.state(statistic_id).attributes
        except HAUnknownEntity:
            continue
        state_class = attributes.get("state_class")
        if state_class not in STATE_CLASSES or first >= last:
            continue
        meter = state_class in METERS
        week = _compiled_week(home, statistic_id, now, meter)
        if not week:
            continue
        scaled = attributes.get("device_class") in SCALED
        hours = [h for h in _hours(week, now, origin, meter, scaled) if first <= h.start < last]
        found[statistic_id] = hours if period == "hour" else _grouped(hours, period, meter)
    return found


def _compiled_week(home: SampleHome, entity_id: str, now: datetime, meter: bool) -> dict[datetime, StatisticPoint]:
    """Each hour of the recorded week, compiled from its states."""
    start = now - WEEK
    points = home.history([entity_id], start - HOUR, now).get(entity_id, [])
    readings = [(p.last_changed, p.number()) for p in points]  # None while unavailable: HA compiles nothing
    compiled: dict[datetime, StatisticPoint] = {}
    hour, index = start, 0
    current: float | None = None
    while hour < now:
        while index < len(readings) and readings[index][0] < hour:  # what held as the hour began
            current = readings[index][1]
            index += 1
        inside: list[float | None] = []
        while index < len(readings) and readings[index][0] < hour + HOUR:
            inside.append(readings[index][1])
            index += 1
        values = [v for v in [current, *inside] if v is not None]
        current = inside[-1] if inside else current
        if values:
            at_end = values[-1]
            if meter:
                change = at_end - values[0] if at_end >= values[0] else at_end  # a meter that restarted
                compiled[hour] = StatisticPoint(start=hour, end=hour + HOUR, state=at_end, change=round(change, 4))
            else:
                compiled[hour] = StatisticPoint(
                    start=hour, end=hour + HOUR, mean=round(stats.fmean(values), 4), min=min(values), max=max(values)
                )
        hour += HOUR
    return compiled


def _hours(
    week: dict[datetime, StatisticPoint], now: datetime, origin: datetime, meter: bool, scaled: bool
) -> list[StatisticPoint]:
    """Every hour from `origin` to now: the week's own, and before it the week's hour at the same time of
    the week, scaled by its day's factor; a meter's reading walks back from the week's first."""
    week_start = now - WEEK
    count = int((now - origin) / HOUR)
    timeline = [now - HOUR * (count - i) for i in range(count)]
    points: list[StatisticPoint] = []
    for hour in timeline:
        if hour in week:
            points.append(week[hour])
            continue
        template = week.get(week_start + (hour - week_start) % WEEK)
        if template is None:
            continue
        factor = _factor(hour) if scaled else 1.0
        if meter:
            points.append(
                StatisticPoint(start=hour, end=hour + HOUR, change=round((template.change or 0.0) * factor, 4))
            )
        else:
            points.append(
                StatisticPoint(
                    start=hour,
                    end=hour + HOUR,
                    mean=_times(template.mean, factor),
                    min=_times(template.min, factor),
                    max=_times(template.max, factor),
                )
            )
    return _readings(points, week_start) if meter else points


def _readings(points: list[StatisticPoint], week_start: datetime) -> list[StatisticPoint]:
    """A meter's `state` before the week (its reading walked back through each hour's use) and `sum`
    (what it counted since the statistics began)."""
    anchor = next((i for i, p in enumerate(points) if p.start >= week_start), len(points))
    reading = 0.0
    if anchor < len(points):  # the reading as the week began: its first hour's, less what that hour used
        reading = (points[anchor].state or 0.0) - (points[anchor].change or 0.0)
    states: list[float] = [0.0] * len(points)
    for i in range(anchor - 1, -1, -1):
        states[i] = reading
        reading -= points[i].change or 0.0
    total, result = 0.0, []
    for i, point in enumerate(points):
        total += point.change or 0.0
        state = point.state if i >= anchor and point.state is not None else max(states[i], 0.0)
        result.append(point.model_copy(update={"state": round(state, 4), "sum": round(total, 4)}))
    return result


def _grouped(hours: list[StatisticPoint], period: StatisticsPeriod, meter: bool) -> list[StatisticPoint]:
    """Hours summed into days, weeks (from Monday) or months, in the home's zone."""
    zone = home_zone()
    start_of: dict[str, Callable[[datetime], datetime]] = {
        "day": lambda t: t.replace(hour=0, minute=0, second=0, microsecond=0),
        "week": lambda t: (t - timedelta(days=t.weekday())).replace(hour=0, minute=0, second=0, microsecond=0),
        "month": lambda t: t.replace(day=1, hour=0, minute=0, second=0, microsecond=0),
    }
    groups: dict[datetime, list[StatisticPoint]] = {}
    for hour in hours:
        groups.setdefault(start_of[period](hour.start.astimezone(zone)).astimezone(UTC), []).append(hour)
    result = []
    for begin, members in groups.items():
        end = members[-1].end
        if meter:
            used = round(sum(m.change or 0.0 for m in members), 4)
            last = members[-1]
            result.append(StatisticPoint(start=begin, end=end, state=last.state, sum=last.sum, change=used))
        else:
            means = [m.mean for m in members if m.mean is not None]
            result.append(
                StatisticPoint(
                    start=begin,
                    end=end,
                    mean=round(stats.fmean(means), 4) if means else None,
                    min=min((m.min for m in members if m.min is not None), default=None),
                    max=max((m.max for m in members if m.max is not None), default=None),
                )
            )
    return result


def _factor(hour: datetime) -> float:
    day = hour.astimezone(home_zone()).date()
    return 0.85 + 0.3 * random.Random(f"{SEED}:statistics:{day.isoformat()}").random()


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else round(value * factor, 4)


def _floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
