"""EventBridge Scheduler's cron dialect, evaluated here so the dev server fires schedules as AWS would.

Why not a cron library: EventBridge's dialect is its own (six fields with a year, exactly one of
day-of-month and day-of-week must be '?', L, W, LW, nL and n#k in the day fields) and so are its
daylight-saving rules (a wall time skipped when clocks go forward does not fire, one repeated when
they go back fires once). croniter and its kin speak the Unix/Quartz dialects with other DST
semantics; an adapter translating between them would be longer than this evaluator and still
differ at the edges the tests pin down (tests/unit/triggers/test_cron.py).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = {
    name: i
    for i, name in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)
}
_DAYS = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], 1)}
MAX_WINDOW = timedelta(days=366)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None


def _weekday(day: date) -> int:
    """EventBridge numbering: 1 = SUN ... 7 = SAT."""
    return day.isoweekday() % 7 + 1


def _nearest_weekday(year: int, month: int, day: int) -> int:
    """The Monday-to-Friday day of the month nearest `day`, never leaving the month (cron 'W')."""
    last = calendar.monthrange(year, month)[1]
    day = min(day, last)
    weekday = date(year, month, day).weekday()  # 0 = Monday
    if weekday == 5:  # Saturday: Friday before, or Monday after on the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday: Monday after, or Friday before on the last day
        return day + 1 if day < last else day - 2
    return day


def _parse_values(text: str, low: int, high: int, names: dict[str, int], what: str) -> frozenset[int]:
    """A standard cron field: *, a value, a-b (wrapping when a > b), with /step, comma-separated."""

    def number(token: str) -> int:
        token = token.upper()
        value = names.get(token)
        if value is None:
            if not (token.isascii() and token.isdigit()):
                raise ValueError(f"cron {what}: {token!r} is not a value")
            value = int(token)
        if not low <= value <= high:
            raise ValueError(f"cron {what}: {value} is outside {low}-{high}")
        return value

    values: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) < 1:
                raise ValueError(f"cron {what}: bad step in {item!r}")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = number(first), number(last)
        else:
            start = number(base)
            end = high if step_text else start
        span = (end - start) % (high - low + 1)  # a range like FRI-MON wraps around
        values.update(low + (start - low + offset) % (high - low + 1) for offset in range(0, span + 1, step))
    return frozenset(values)


def _day_of_month(text: str) -> Callable[[date], bool] | None:
    text = text.upper()
    if text == "?":
        return None
    if text == "L":
        return lambda d: d.day == calendar.monthrange(d.year, d.month)[1]
    if text == "LW":
        return lambda d: d.day == _nearest_weekday(d.year, d.month, calendar.monthrange(d.year, d.month)[1])
    match = re.fullmatch(r"(\d{1,2})W", text)
    if match:
        target = int(match.group(1))
        if not 1 <= target <= 31:
            raise ValueError(f"cron day-of-month: {text!r} is outside 1-31")
        return lambda d: d.day == _nearest_weekday(d.year, d.month, target)
    days = _parse_values(text, 1, 31, {}, "day-of-month")
    return lambda d: d.day in days


def _day_of_week(text: str) -> Callable[[date], bool] | None:
    if text == "?":
        return None
    upper = text.upper()
    if upper == "L":  # the last day of the week
        return lambda d: _weekday(d) == 7
    match = re.fullmatch(r"([A-Z]{3}|\d)L", upper)
    if match:  # the last such weekday of the month
        weekday = next(iter(_parse_values(match.group(1), 1, 7, _DAYS, "day-of-week")))
        return lambda d: _weekday(d) == weekday and (d + timedelta(days=7)).month != d.month
    match = re.fullmatch(r"([A-Z]{3}|\d)#(\d)", upper)
    if match:  # the n-th such weekday of the month
        weekday = next(iter(_parse_values(match.group(1), 1, 7, _DAYS, "day-of-week")))
        nth = int(match.group(2))
        if not 1 <= nth <= 5:
            raise ValueError(f"cron day-of-week: {text!r} needs an occurrence 1-5")
        return lambda d: _weekday(d) == weekday and (d.day - 1) // 7 + 1 == nth
    days = _parse_values(text, 1, 7, _DAYS, "day-of-week")
    return lambda d: _weekday(d) in days


@dataclass(frozen=True)
class Cron:
    """A parsed EventBridge cron: minutes hours day-of-month month day-of-week year."""

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    years: frozenset[int]
    day_matches: Callable[[date], bool]

    def fire_times(self, start: datetime, end: datetime, timezone: str = "UTC") -> Iterator[datetime]:
        """UTC instants in (start, end] at which the schedule fires, in order.

        Evaluated in the zone's wall time, as EventBridge Scheduler does: a time skipped when
        clocks go forward does not fire, a time repeated when they go back fires once.
        """
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("fire_times needs timezone-aware datetimes")
        if end - start > MAX_WINDOW:
            raise ValueError(f"cannot evaluate a cron over more than {MAX_WINDOW.days} days at once")
        tz = zone(timezone)
        day = start.astimezone(tz).date()
        last_day = end.astimezone(tz).date()
        while day <= last_day:
            if day.year in self.years and day.month in self.months and self.day_matches(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)  # fold=0: first
                        moment = local.astimezone(UTC)
                        if moment.astimezone(tz).replace(tzinfo=None) != local.replace(tzinfo=None):
                            continue  # in the gap of a clock change: that time does not exist today
                        if start < moment <= end:
                            yield moment
            day += timedelta(days=1)


def parse_cron(expression: str) -> Cron:
    """Parse 'cron(0 8 ? * MON-FRI *)' (or the six fields alone); ValueError says what is wrong.

    Exactly one of day-of-month and day-of-week must be '?', as EventBridge requires.
    Supported: * ? , - / names (JAN-DEC, SUN-SAT), and L, W, LW, nL, n#k in the day fields.
    """
    text = expression.strip()
    match = re.fullmatch(r"cron\((.*)\)", text)
    fields = (match.group(1) if match else text).split()
    if len(fields) != 6:
        raise ValueError(f"{expression!r}: a cron has six fields: minutes hours day-of-month month day-of-week year")
    minutes, hours, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise ValueError(f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'")
    for name, value in (("minutes", minutes), ("hours", hours), ("month", month), ("year", year)):
        if "?" in value:
            raise ValueError(f"{expression!r}: '?' is only allowed in day-of-month or day-of-week, not {name}")
    day_matches = _day_of_month(dom) or _day_of_week(dow)
    if day_matches is None:  # unreachable: one of them is not '?'
        raise ValueError(f"{expression!r}: no day field")
    return Cron(
        expression=text,
        minutes=tuple(sorted(_parse_values(minutes, 0, 59, {}, "minutes"))),
        hours=tuple(sorted(_parse_values(hours, 0, 23, {}, "hours"))),
        months=_parse_values(month, 1, 12, _MONTHS, "month"),
        years=_parse_values(year, 1970, 2199, {}, "year"),
        day_matches=day_matches,
    )


_RATE = re.compile(r"rate\((.*)\)", re.DOTALL)
_RATE_UNITS = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Rate:
    """A parsed EventBridge Scheduler rate: every `interval`, counted from `anchor` (when the schedule was
    created: Scheduler's first firing is one interval after it). Time zones do not move a rate."""

    expression: str
    interval: timedelta
    anchor: datetime = _EPOCH

    def anchored(self, anchor: datetime) -> Rate:
        if anchor.tzinfo is None:
            raise ValueError("a rate's anchor must be timezone-aware")
        return Rate(self.expression, self.interval, anchor.astimezone(UTC))

    def fire_times(self, start: datetime, end: datetime, timezone: str = "UTC") -> Iterator[datetime]:
        """UTC instants in (start, end] at which the schedule fires, in order (`timezone` is checked only)."""
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("fire_times needs timezone-aware datetimes")
        zone(timezone)
        step = self.interval
        # the first multiple of the interval after both the anchor and `start`
        count = max(1, (start - self.anchor) // step + 1)
        moment = self.anchor + count * step
        while moment <= end:
            if moment > start:
                yield moment
            moment += step


def parse_rate(expression: str) -> Rate:
    """Parse 'rate(5 minutes)' (minute(s), hour(s) or day(s); a whole number of at least 1), as EventBridge
    Scheduler takes it; ValueError says what is wrong."""
    text = expression.strip()
    match = _RATE.fullmatch(text)
    if not match:
        raise ValueError(f"{expression!r}: a rate is written rate(<number> <minutes|hours|days>)")
    parts = match.group(1).split()
    if len(parts) != 2:
        raise ValueError(f"{expression!r}: a rate has a number and a unit, e.g. rate(6 hours)")
    value, unit = parts
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise ValueError(f"{expression!r}: the rate's value must be a whole number of at least 1, not {value!r}")
    seconds = _RATE_UNITS.get(unit.lower())
    if seconds is None:
        raise ValueError(f"{expression!r}: the rate's unit is minutes, hours or days, not {unit!r}")
    if int(value) * seconds > MAX_WINDOW.total_seconds():
        raise ValueError(f"{expression!r}: a rate is at most {MAX_WINDOW.days} days")
    return Rate(expression=text, interval=timedelta(seconds=int(value) * seconds))


@dataclass(frozen=True)
class OneTime:
    """A one-time EventBridge Scheduler expression, at(yyyy-mm-ddThh:mm:ss) in UTC: a timer (flow control's
    debounce), never a user's schedule."""

    expression: str
    moment: datetime

    def fire_times(self, start: datetime, end: datetime, timezone: str = "UTC") -> Iterator[datetime]:
        if start < self.moment <= end:
            yield self.moment


def at_expression(moment: datetime) -> str:
    """The at(...) expression of a moment (whole seconds, UTC: its schedule's time zone is UTC)."""
    return f"at({moment.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')})"


def parse_at(expression: str) -> OneTime:
    text = expression.strip()
    match = re.fullmatch(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)", text)
    if not match:
        raise ValueError(f"{expression!r}: a one-time schedule is at(yyyy-mm-ddThh:mm:ss)")
    return OneTime(text, datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC))


Expression = Cron | Rate


def parse_expression(expression: str, *, anchor: datetime | None = None) -> Expression:
    """A recurring EventBridge Scheduler expression: cron(...) or rate(...) (a rate counted from `anchor`).
    ValueError says what is wrong; one-time at(...) schedules are not recurring and are refused."""
    text = expression.strip()
    if text.startswith("rate("):
        rate = parse_rate(text)
        return rate.anchored(anchor) if anchor is not None else rate
    if text.startswith("cron("):
        return parse_cron(text)
    kind = text.split("(", 1)[0] if "(" in text else ""
    if kind == "at":
        raise ValueError(f"{expression!r}: one-time at(...) schedules are not supported; use cron(...) or rate(...)")
    raise ValueError(f"{expression!r}: an expression is cron(<6 fields>) or rate(<number> <minutes|hours|days>)")


def next_fire_times(
    expression: Expression, after: datetime, count: int, timezone: str = "UTC", *, horizon_days: int = 4 * 366
) -> list[datetime]:
    """The next `count` firings after `after` (fewer when the expression fires fewer times within the horizon:
    none at all for a cron whose years are past)."""
    found: list[datetime] = []
    start, limit = after, after + timedelta(days=horizon_days)
    while len(found) < count and start < limit:
        end = min(start + MAX_WINDOW, limit)
        for moment in expression.fire_times(start, end, timezone):
            found.append(moment)
            if len(found) == count:
                break
        start = end
    return found


def iso_utc(moment: datetime) -> str:
    """One spelling per instant ("2024-03-29T07:00:00Z"): what the scheduler substitutes."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = [
    "MAX_WINDOW",
    "Cron",
    "Expression",
    "OneTime",
    "Rate",
    "at_expression",
    "parse_at",
    "iso_utc",
    "next_fire_times",
    "parse_cron",
    "parse_expression",
    "parse_rate",
    "zone",
]
