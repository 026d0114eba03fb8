"""From arriving events to mission requests: what the trigger and schedule functions hand the launcher.

Capabilities declare triggers (`missions.core.triggers.declared`); the stack deploys rules and schedules
for them (`missions.core.triggers.specs`). When one fires, this module names the `MissionRequest`s
it starts. Every request carries an idempotency key derived from what fired, so a redelivered
event never starts a second mission.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from missions.core.capability.registry import Capability
from missions.core.memory.longterm import MemoryChange
from missions.core.mission.requests import MissionRequest, MultitaskStrategy
from missions.core.triggers.cron import iso_utc
from missions.core.triggers.declared import GoalTemplate, MemoryTrigger, TriggerSource, render, webhook_trigger_id
from missions.core.triggers.specs import (
    MEMORY_DETAIL_TYPE,
    MEMORY_SOURCE,
    SCHEDULED_TIME_PLACEHOLDER,
    WEBHOOK_SOURCE,
    namespace_segments,
)
from missions.ports.memory import LongTermMemory

_KEY_LIMIT = 512  # MissionRequest.idempotency_key


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
        found = next(
            (
                (index, t)
                for index, t in enumerate(capability.triggers.webhooks)
                if t.source == source and (not t.event_types or event_type in t.event_types)
            ),
            None,
        )
        if found is None:
            continue
        index, trigger = found
        requests.append(
            _request(
                capability,
                trigger,
                TriggerSource.WEBHOOK,
                values={"event": detail, "payload": payload},
                user_id=str(detail.get("user_id") or "system"),
                key=f"webhook:{source}:{delivery_id}:{capability.name}",
                facts={"kind": "webhook", "source": source, "delivery_id": delivery_id, "event_type": event_type},
                name=f"{capability.name}.{webhook_trigger_id(trigger, index)}",
            )
        )
    return requests


@dataclass(frozen=True)
class Cancellation:
    """A webhook delivery a trigger's `cancel_on` names: the active mission of its key is cancelled."""

    trigger: str  # "<capability>.<trigger id>"
    user_id: str
    concurrency_key: str
    event_type: str


def cancellations_for_event(event: dict[str, Any], capabilities: Iterable[Capability]) -> list[Cancellation]:
    """The keys whose active mission a webhook delivery cancels (empty for any other event)."""
    if event.get("source", event.get("Source")) != WEBHOOK_SOURCE:
        return []
    detail = event.get("detail", event.get("Detail"))
    detail = json.loads(detail) if isinstance(detail, str) else detail
    if not isinstance(detail, dict) or not isinstance(detail.get("payload"), dict):
        return []
    event_type, values = str(detail.get("event_type") or ""), {"event": detail, "payload": detail["payload"]}
    found = []
    for capability in capabilities:
        for index, trigger in enumerate(capability.triggers.webhooks):
            flow = trigger.flow
            if flow is None or trigger.source != detail.get("source"):
                continue
            if any(event_type in c.event_types and _matches(c.match, values) for c in flow.cancel_on):
                name = f"{capability.name}.{webhook_trigger_id(trigger, index)}"
                user = str(detail.get("user_id") or "system")
                found.append(Cancellation(name, user, flow_key(name, render(flow.key, values)), event_type))
    return found


def _matches(expected: dict[str, Any], values: dict[str, Any]) -> bool:
    """Every dotted path of `expected` has its value in the event (`payload.status`: "cancelled")."""
    for path, wanted in expected.items():
        value: Any = values
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value != wanted:
            return False
    return True


_KEY_CHARS = re.compile(r"[^A-Za-z0-9_.:-]")


def flow_key(trigger: str, rendered: str) -> str:
    """The concurrency key of a trigger's missions for a rendered key: valid as a request's, and distinct."""
    raw = f"{trigger}:{rendered or '-'}"
    key = _KEY_CHARS.sub("_", raw)
    if key != raw or len(key) > 128:
        key = f"{key[:111]}:{hashlib.sha256(raw.encode()).hexdigest()[:16]}"
    return key


def _memory_requests(detail: dict[str, Any], capabilities: list[Capability]) -> list[MissionRequest]:
    change = MemoryChange.model_validate({k: v for k, v in detail.items() if k != "namespace_head"})
    namespace = "/".join(change.namespace)
    requests = []
    for capability in capabilities:
        for trigger in capability.triggers.memory:
            segments = namespace_segments(trigger)
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
                    name=f"{capability.name}.{trigger.id}",
                )
            )
    return requests


def _memory_key(capability: Capability, trigger: MemoryTrigger, change: MemoryChange) -> str:
    """Which change of which item: the same stream record redelivered maps to the same key, while the
    same value written again later (X -> Y -> X) is a change of its own (its record's id)."""
    namespace = "/".join(change.namespace)
    which = change.record_id or _digest(change.new)  # a change without a record (a test's) by its value
    return f"memory:{capability.name}:{trigger.id}:{change.user_id}:{namespace}:{change.key}:{which}"


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
        values: dict[str, Any] = {
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
                name=f"{capability.name}.{trigger.id}",
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
    return iso_utc(moment)


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
    name: str,
) -> MissionRequest:
    # a template whose placeholders all came out empty still starts a mission: with the template as its goal
    goal = trigger.render(values) or trigger.goal_template
    context = {**trigger.context, "trigger": {**facts, "name": name}}
    flow = trigger.flow
    keyed: dict[str, Any] = {}
    if flow is not None:  # its missions run one at a time per key (missions.service.flow.triggers)
        keyed = {
            "concurrency_key": flow_key(name, render(flow.key, values)),
            "multitask_strategy": _SINGLETON[flow.singleton],
        }
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
        **keyed,
    )


# what a trigger's `singleton` makes of a request whose key has an active mission
_SINGLETON = {
    None: MultitaskStrategy.ENQUEUE,
    "skip": MultitaskStrategy.REJECT,
    "replace": MultitaskStrategy.INTERRUPT,
}


__all__ = [
    "Cancellation",
    "cancellations_for_event",
    "condition_holds",
    "flow_key",
    "normalize_scheduled_time",
    "requests_for_event",
    "requests_for_schedule",
]
