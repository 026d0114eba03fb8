"""Test capabilities with triggers, and the events that reach the trigger paths, for the trigger tests."""

from __future__ import annotations

import json
from typing import Any

from missions.core.capability.registry import Capability
from missions.core.memory.longterm import MemoryChange
from missions.core.pipeline.config import AgentConfig, PipelineConfig
from missions.core.triggers.declared import (
    MemoryTrigger,
    Priority,
    ScheduleTrigger,
    Triggers,
    WebhookTrigger,
)
from missions.core.triggers.specs import memory_change_event
from missions.service.triggers.webhooks import Delivery, bus_event
from tests.support.stages import typed_capability


def capability(name: str, **triggers: Any) -> Capability:
    """A one-stage capability (no LLM, no tools) that only exists to carry triggers."""
    return typed_capability(
        name,
        PipelineConfig(name="p", agents=[AgentConfig(name="only")]),
        description=f"test capability {name}",
        offline_policy=lambda request: {},
        triggers=Triggers(**triggers),
    )


TRIAGE = capability(
    "triage",
    webhooks=[
        WebhookTrigger(
            source="github",
            event_types=["issues", "pull_request"],
            goal_template="Triage {payload.title} ({event.event_type})",
            priority=Priority.HIGH,
            context={"repo": "."},
        ),
        WebhookTrigger(source="github", goal_template="Anything else from github"),
    ],
    memory=[
        MemoryTrigger(id="todo-any", namespace="todos", goal_template="Look at {key}: {kind}"),
        MemoryTrigger(
            id="status-change",
            namespace="todos/work",
            condition="field_changed",
            field="status",
            goal_template="Status of {key} is now {new.status}",
            priority=Priority.URGENT,
        ),
        MemoryTrigger(id="tag-added", namespace="todos", condition="item_added", field="tags", goal_template="Tags"),
    ],
    schedules=[
        ScheduleTrigger(
            id="digest",
            cron="cron(0 8 ? * MON-FRI *)",
            timezone="Europe/Paris",
            users="opted_in",
            goal_template="Morning digest for {user_id} at {scheduled_time}",
        ),
        ScheduleTrigger(id="cleanup", cron="cron(*/15 * * * ? *)", users="all", goal_template="Clean up"),
    ],
)

AUDIT = capability(
    "audit",
    webhooks=[WebhookTrigger(source="stripe", goal_template="Audit {payload.id}", priority=Priority.LOW)],
    schedules=[
        ScheduleTrigger(id="digest", cron="cron(30 6 1 * ? *)", opt_in_namespace="audit_opt_in", goal_template="Audit")
    ],
)

CAPABILITIES = [TRIAGE, AUDIT]


def lambda_event(entry: dict[str, Any]) -> dict[str, Any]:
    """A PutEvents entry as EventBridge hands it to a Lambda target."""
    return {
        "version": "0",
        "id": "e-1",
        "detail-type": entry["DetailType"],
        "source": entry["Source"],
        "account": "123456789012",
        "time": "2024-03-29T07:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": json.loads(entry["Detail"]),
    }


def webhook_event(event_type: str, source: str = "github", delivery_id: str = "d-1", **payload: Any) -> dict[str, Any]:
    delivery = Delivery(source, delivery_id, event_type, payload, user_id="u1")
    return lambda_event(bus_event(delivery))


def memory_event(kind: str, old: Any, new: Any, namespace: tuple[str, ...] = ("todos", "work")) -> dict[str, Any]:
    change = MemoryChange(user_id="u2", namespace=list(namespace), key="t1", kind=kind, old=old, new=new)
    return lambda_event(memory_change_event(change))
