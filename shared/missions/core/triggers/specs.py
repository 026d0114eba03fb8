"""What the stack deploys for the triggers capabilities declare, derived without touching AWS.

EventBridge rules for webhook and memory triggers, EventBridge Scheduler schedules for schedule
triggers, and the shape of the events that reach them. The CDK stack and the local emulation both
build their resources from these specs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from missions.core.capability.registry import Capability
from missions.core.memory.longterm import MemoryChange
from missions.core.triggers.cron import parse_cron, zone
from missions.core.triggers.declared import MemoryTrigger, webhook_trigger_id

WEBHOOK_SOURCE = "missions.webhook"  # the source of webhook deliveries on the mission bus
MEMORY_SOURCE = "missions.memory"
MEMORY_DETAIL_TYPE = "memory.changed"
SCHEDULED_TIME_PLACEHOLDER = "<aws.scheduler.scheduled-time>"  # EventBridge Scheduler fills it in

_NAME_LIMIT = 64
_NAME_CHARS = re.compile(r"[^.\-_A-Za-z0-9]")


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
    anchor: datetime | None = None  # a rate(...) counts from here (when its schedule was created)

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


def webhook_rules(capabilities: Iterable[Capability], prefix: str = "missions") -> list[RuleSpec]:
    """One rule per webhook trigger: its source, and its event types when it lists any."""
    specs = []
    for capability in capabilities:
        for index, trigger in enumerate(capability.triggers.webhooks):
            pattern: dict[str, Any] = {"source": [WEBHOOK_SOURCE], "detail-type": [f"webhook.{trigger.source}"]}
            if trigger.event_types:  # and the events that cancel its missions (missions.service.flow.triggers)
                cancelling = [t for c in (trigger.flow.cancel_on if trigger.flow else []) for t in c.event_types]
                pattern["detail"] = {"event_type": sorted({*trigger.event_types, *cancelling})}
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
                "detail": {"namespace_head": [namespace_segments(trigger)[0]]},
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
            zone(trigger.timezone)
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


def namespace_segments(trigger: MemoryTrigger) -> list[str]:
    """A trigger's namespace is a first segment ("tasks") or a prefix of segments ("tasks/work")."""
    return [segment for segment in trigger.namespace.split("/") if segment] or [trigger.namespace]


__all__ = [
    "MEMORY_DETAIL_TYPE",
    "MEMORY_SOURCE",
    "SCHEDULED_TIME_PLACEHOLDER",
    "WEBHOOK_SOURCE",
    "RuleSpec",
    "ScheduleSpec",
    "memory_change_event",
    "memory_rules",
    "namespace_segments",
    "schedule_specs",
    "webhook_rules",
    "webhook_trigger_id",
]
