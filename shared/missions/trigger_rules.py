"""From trigger declarations to AWS wiring, and from arriving events to mission requests.

Capabilities declare triggers (`missions.triggers`). This module derives, without touching
AWS, what the stack deploys (EventBridge rules for webhook and memory triggers, EventBridge
Scheduler schedules for schedule triggers) and what the trigger function does when one of
them fires (the `MissionRequest`s to hand to the dispatcher). Every request carries an
idempotency key derived from what fired, so a redelivered event never starts a second mission.

It also holds a six-field cron evaluator, so the local dev server can fire schedules as
EventBridge Scheduler would (time zones and daylight saving time included).
"""

from __future__ import annotations

import calendar
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from missions.capability import Capability
from missions.longterm.ports import LongTermMemory, MemoryChange
from missions.starter import MissionRequest
from missions.triggers import GoalTemplate, MemoryTrigger, TriggerSource, WebhookTrigger

WEBHOOK_SOURCE = "missions.webhook"  # equals missions.webhooks.BUS_SOURCE (kept apart: that module may use boto3)
MEMORY_SOURCE = "missions.memory"
MEMORY_DETAIL_TYPE = "memory.changed"
SCHEDULED_TIME_PLACEHOLDER = "<aws.scheduler.scheduled-time>"  # EventBridge Scheduler fills it in

_NAME_LIMIT = 64
_NAME_CHARS = re.compile(r"[^.\-_A-Za-z0-9]")
_KEY_LIMIT = 512  # MissionRequest.idempotency_key


# --------------------------------------------------------------------------- wiring specs


@dataclass(frozen=True)
class RuleSpec:
    """An EventBridge rule on the mission bus; its target is the trigger function."""

    name: str
    capability: str
    trigger_id: str
    event_pattern: dict[str, Any]


@dataclass(frozen=True)
class ScheduleSpec:
    """An EventBridge Scheduler schedule; `input` is the JSON its target receives."""

    name: str
    capability: str
    schedule_id: str
    expression: str
    timezone: str
    input: dict[str, Any] = field(default_factory=dict)

    def event(self, scheduled_time: str) -> dict[str, Any]:
        """The input as the target receives it once the scheduler substituted the time."""
        return {**self.input, "scheduled_time": scheduled_time}


def _aws_name(*parts: str) -> str:
    """A valid EventBridge rule / schedule name; altered or long names get a hash so they stay distinct."""
    raw = "-".join(part for part in parts if part)
    name = _NAME_CHARS.sub("-", raw)
    if name != raw or len(name) > _NAME_LIMIT:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
        name = f"{name[: _NAME_LIMIT - 9]}-{digest}"
    return name


def _unique(specs: list[Any]) -> list[Any]:
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"two triggers map to the same AWS name '{spec.name}'; rename a capability or trigger")
        seen.add(spec.name)
    return specs


def webhook_trigger_id(trigger: WebhookTrigger, index: int) -> str:
    """Webhook triggers have no id of their own: their source and position in the capability."""
    return f"{trigger.source}-{index}"


def webhook_rules(capabilities: Iterable[Capability], prefix: str = "missions") -> list[RuleSpec]:
    """One rule per webhook trigger: its source, and its event types when it lists any."""
    specs = []
    for capability in capabilities:
        for index, trigger in enumerate(capability.triggers.webhooks):
            pattern: dict[str, Any] = {"source": [WEBHOOK_SOURCE], "detail-type": [f"webhook.{trigger.source}"]}
            if trigger.event_types:
                pattern["detail"] = {"event_type": list(trigger.event_types)}
            trigger_id = webhook_trigger_id(trigger, index)
            specs.append(
                RuleSpec(_aws_name(prefix, "wh", capability.name, trigger_id), capability.name, trigger_id, pattern)
            )
    return _unique(specs)


def memory_rules(capabilities: Iterable[Capability], prefix: str = "missions") -> list[RuleSpec]:
    """One rule per memory trigger, on the namespace's first segment (conditions are checked in code)."""
    specs = []
    for capability in capabilities:
        for trigger in capability.triggers.memory:
            pattern = {
                "source": [MEMORY_SOURCE],
                "detail-type": [MEMORY_DETAIL_TYPE],
                "detail": {"namespace_head": [_segments(trigger)[0]]},
            }
            specs.append(
                RuleSpec(_aws_name(prefix, "mem", capability.name, trigger.id), capability.name, trigger.id, pattern)
            )
    return _unique(specs)


def schedule_specs(capabilities: Iterable[Capability], prefix: str = "missions") -> list[ScheduleSpec]:
    """One schedule per schedule trigger; invalid cron expressions or time zones fail here, at synth time."""
    specs = []
    for capability in capabilities:
        for trigger in capability.triggers.schedules:
            parse_cron(trigger.cron)
            _zone(trigger.timezone)
            specs.append(
                ScheduleSpec(
                    name=_aws_name(prefix, capability.name, trigger.id),
                    capability=capability.name,
                    schedule_id=trigger.id,
                    expression=trigger.cron,
                    timezone=trigger.timezone,
                    input={
                        "capability": capability.name,
                        "schedule_id": trigger.id,
                        "scheduled_time": SCHEDULED_TIME_PLACEHOLDER,
                    },
                )
            )
    return _unique(specs)


def memory_change_event(change: MemoryChange, event_bus_name: str | None = None) -> dict[str, Any]:
    """The PutEvents entry announcing a memory change (the stream handler sends it)."""
    detail = {**change.model_dump(mode="json"), "namespace_head": change.namespace[0]}
    entry: dict[str, Any] = {
        "Source": MEMORY_SOURCE,
        "DetailType": MEMORY_DETAIL_TYPE,
        "Detail": json.dumps(detail, separators=(",", ":"), ensure_ascii=False),
    }
    if event_bus_name:
        entry["EventBusName"] = event_bus_name
    return entry


# --------------------------------------------------------------------------- events -> requests


def requests_for_event(event: dict[str, Any], capabilities: Iterable[Capability]) -> list[MissionRequest]:
    """The missions an EventBridge event starts (empty for events no trigger cares about).

    Accepts the event as a Lambda target receives it ("source", "detail-type", "detail") and,
    for the local dev server, a PutEvents entry ("Source", "DetailType", "Detail" as JSON).
    Several rules may deliver the same event: the idempotency keys make that harmless.
    """
    source = event.get("source", event.get("Source"))
    detail_type = event.get("detail-type", event.get("DetailType", ""))
    detail = event.get("detail", event.get("Detail"))
    if isinstance(detail, str):
        detail = json.loads(detail)
    if not isinstance(detail, dict):
        return []
    if source == WEBHOOK_SOURCE and str(detail_type).startswith("webhook."):
        return _webhook_requests(detail, list(capabilities))
    if source == MEMORY_SOURCE and detail_type == MEMORY_DETAIL_TYPE:
        return _memory_requests(detail, list(capabilities))
    return []


def _webhook_requests(detail: dict[str, Any], capabilities: list[Capability]) -> list[MissionRequest]:
    source, delivery_id, payload = detail.get("source"), detail.get("delivery_id"), detail.get("payload")
    if not isinstance(source, str) or not isinstance(delivery_id, str) or not isinstance(payload, dict):
        raise ValueError("a webhook event needs detail.source, detail.delivery_id and an object detail.payload")
    event_type = detail.get("event_type") or ""
    requests = []
    for capability in capabilities:
        # one mission per capability and delivery: the first matching trigger decides
        trigger = next(
            (
                t
                for t in capability.triggers.webhooks
                if t.source == source and (not t.event_types or event_type in t.event_types)
            ),
            None,
        )
        if trigger is None:
            continue
        requests.append(
            _request(
                capability,
                trigger,
                TriggerSource.WEBHOOK,
                values={"event": detail, "payload": payload},
                user_id=str(detail.get("user_id") or "system"),
                key=f"webhook:{source}:{delivery_id}:{capability.name}",
                facts={"kind": "webhook", "source": source, "delivery_id": delivery_id, "event_type": event_type},
            )
        )
    return requests


def _memory_requests(detail: dict[str, Any], capabilities: list[Capability]) -> list[MissionRequest]:
    change = MemoryChange.model_validate({k: v for k, v in detail.items() if k != "namespace_head"})
    namespace = "/".join(change.namespace)
    requests = []
    for capability in capabilities:
        for trigger in capability.triggers.memory:
            segments = _segments(trigger)
            if change.namespace[: len(segments)] != segments or not condition_holds(trigger, change):
                continue
            values = {
                "event": detail,
                "change": detail,
                "user_id": change.user_id,
                "namespace": namespace,
                "key": change.key,
                "kind": change.kind,
                "old": change.old,
                "new": change.new,
            }
            requests.append(
                _request(
                    capability,
                    trigger,
                    TriggerSource.MEMORY,
                    values=values,
                    user_id=change.user_id,
                    key=_memory_key(capability, trigger, change),
                    facts={"kind": "memory", "trigger_id": trigger.id, "namespace": namespace, "key": change.key},
                )
            )
    return requests


def _memory_key(capability: Capability, trigger: MemoryTrigger, change: MemoryChange) -> str:
    """What changed, where and into what: the same stream record redelivered maps to the same key."""
    namespace = "/".join(change.namespace)
    return f"memory:{capability.name}:{trigger.id}:{change.user_id}:{namespace}:{change.key}:{_digest(change.new)}"


def _segments(trigger: MemoryTrigger) -> list[str]:
    """A trigger's namespace is a first segment ("tasks") or a prefix of segments ("tasks/work")."""
    return [segment for segment in trigger.namespace.split("/") if segment] or [trigger.namespace]


_MISSING = object()


def _field(value: Any, name: str | None) -> Any:
    if name is None:
        return value
    return value.get(name, _MISSING) if isinstance(value, dict) else _MISSING


def condition_holds(trigger: MemoryTrigger, change: MemoryChange) -> bool:
    """Whether a change satisfies a memory trigger's condition.

    any: every change, deletions included. field_changed: `field` differs between the old and
    new value (an item added with the field set counts: the field went from absent to a value;
    without a field, an update whose whole value differs). item_added: the list
    `field` (or the value itself) holds an element the old one did not. Deletions only match "any".
    """
    if trigger.condition == "any":
        return True
    if change.kind == "deleted":
        return False
    if trigger.condition == "field_changed":
        if trigger.field is None:
            return change.kind == "updated" and change.old != change.new
        if not isinstance(change.new, dict):
            return False
        old = _field(change.old, trigger.field)
        new = _field(change.new, trigger.field)
        return new is not _MISSING and old != new
    new_items = _field(change.new, trigger.field)
    if not isinstance(new_items, list):
        return False
    old_items = _field(change.old, trigger.field)
    old_items = old_items if isinstance(old_items, list) else []
    return any(item not in old_items for item in new_items)


def requests_for_schedule(
    event: dict[str, Any],
    capabilities: Iterable[Capability],
    memory: LongTermMemory,
    all_users: Callable[[], list[str]],
) -> list[MissionRequest]:
    """The missions a schedule firing starts: one per user it concerns (all, or those opted in)."""
    name, schedule_id = event.get("capability"), event.get("schedule_id")
    capability = next((c for c in capabilities if c.name == name), None)
    if capability is None:
        raise ValueError(f"schedule event names unknown capability {name!r}")
    trigger = next((t for t in capability.triggers.schedules if t.id == schedule_id), None)
    if trigger is None:
        raise ValueError(f"capability '{capability.name}' has no schedule {schedule_id!r}")
    scheduled_time = normalize_scheduled_time(event.get("scheduled_time"))
    if trigger.users == "all":
        users = all_users()
    else:
        users = memory.users_with(trigger.opt_in_namespace or trigger.id)
    requests = []
    for user in sorted(set(users)):
        values = {
            "event": event,
            "capability": capability.name,
            "schedule_id": trigger.id,
            "scheduled_time": scheduled_time,
            "user_id": user,
        }
        if trigger.users != "all":  # the opt-in item may say which repository the digest is about
            opted = memory.list(user, (trigger.opt_in_namespace or trigger.id,), limit=1)
            values["opt_in"] = opted[0].value if opted else None
        requests.append(
            _request(
                capability,
                trigger,
                TriggerSource.SCHEDULE,
                values=values,
                user_id=user,
                key=f"schedule:{capability.name}:{trigger.id}:{scheduled_time}:{user}",
                facts={"kind": "schedule", "schedule_id": trigger.id, "scheduled_time": scheduled_time},
            )
        )
    return requests


def normalize_scheduled_time(value: Any) -> str:
    """One spelling per instant ("2024-03-29T07:00:00Z"), so idempotency keys do not depend on the format."""
    if not isinstance(value, str) or not value or value == SCHEDULED_TIME_PLACEHOLDER:
        raise ValueError(f"scheduled_time must be an ISO 8601 time, got {value!r}")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"scheduled_time must be an ISO 8601 time, got {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _iso(moment)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _bounded(key: str) -> str:
    """Keys over the request limit keep their start and gain a hash of the whole (still unique, still stable)."""
    if len(key) <= _KEY_LIMIT:
        return key
    return f"{key[: _KEY_LIMIT - 33]}:{hashlib.sha256(key.encode()).hexdigest()[:32]}"


def _request(
    capability: Capability,
    trigger: GoalTemplate,
    source: TriggerSource,
    *,
    values: dict[str, Any],
    user_id: str,
    key: str,
    facts: dict[str, Any],
) -> MissionRequest:
    # a template whose placeholders all came out empty still starts a mission: with the template as its goal
    goal = trigger.render(values) or trigger.goal_template
    context = {**trigger.context, "trigger": facts}
    # the event may name the repository the mission reads; the runtime checks the user may read it
    for source_of in ("payload", "new", "opt_in"):
        named = values.get(source_of)
        if isinstance(named, dict) and isinstance(named.get("repository"), str):
            context["repository"] = named["repository"]
            break
    return MissionRequest.parse(
        capability=capability.name,
        goal=goal,
        user_id=user_id,
        context=context,
        priority=trigger.priority,
        trigger=source,
        idempotency_key=_bounded(key),
    )


# --------------------------------------------------------------------------- cron


_MONTHS = {
    name: i
    for i, name in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)
}
_DAYS = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], 1)}
MAX_WINDOW = timedelta(days=366)


def _zone(name: str) -> ZoneInfo:
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
        zone = _zone(timezone)
        day = start.astimezone(zone).date()
        last_day = end.astimezone(zone).date()
        while day <= last_day:
            if day.year in self.years and day.month in self.months and self.day_matches(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)  # fold=0: first
                        moment = local.astimezone(UTC)
                        if moment.astimezone(zone).replace(tzinfo=None) != local.replace(tzinfo=None):
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
            _zone(spec.timezone)

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
        return [(spec, _iso(moment)) for moment, _, spec in firings]


__all__ = [
    "MEMORY_DETAIL_TYPE",
    "MEMORY_SOURCE",
    "SCHEDULED_TIME_PLACEHOLDER",
    "WEBHOOK_SOURCE",
    "Cron",
    "LocalScheduleClock",
    "RuleSpec",
    "ScheduleSpec",
    "condition_holds",
    "memory_change_event",
    "memory_rules",
    "normalize_scheduled_time",
    "parse_cron",
    "requests_for_event",
    "requests_for_schedule",
    "schedule_specs",
    "webhook_rules",
    "webhook_trigger_id",
]
