"""Triggers: how missions start without a person pressing a button.

A capability declares them; the runtime turns each arriving input (an HTTP call, a webhook,
a schedule tick, a change in long-term memory) into a `MissionRequest` for the dispatcher.
"""

from __future__ import annotations

import re
import string
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator

from missions.core.mission.envelope import Model


class Priority(StrEnum):
    URGENT = "urgent"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """Queue order: lower runs first."""
        return ["urgent", "high", "medium", "low"].index(self.value)


class TriggerSource(StrEnum):
    API = "api"
    WEBHOOK = "webhook"
    SCHEDULE = "schedule"
    MEMORY = "memory"
    FORK = "fork"  # carries on from another mission's checkpoint
    CLI = "cli"  # `missions run`, on the local emulation
    CHAT = "chat"  # a message of the chat entry (POST /v1/chat/completions)
    DELEGATION = "delegation"  # a stage of another mission handed it part of its work (ctx.delegate)


class Throttle(Model):
    """At most `limit` missions of one key start per `period_seconds` (a fixed window); the rest are dropped
    (`overflow = "drop"`) or wait for the next window with room (`"queue"`), each with a record on the trigger."""

    limit: int = Field(ge=1, le=10_000)
    period_seconds: int = Field(ge=1, le=86_400)
    overflow: Literal["drop", "queue"] = "drop"


class CancelOn(Model):
    """An arriving event that cancels the active mission of its key: a webhook of the trigger's source whose
    event type is listed, and whose payload has these values (dotted paths)."""

    event_types: list[str] = Field(min_length=1, max_length=20)
    match: dict[str, Any] = Field(default_factory=dict)


class TriggerFlow(Model):
    """Flow control of a trigger's missions, per key (missions.service.flow.triggers): `key` is rendered from the
    event like a goal ("{payload.order_id}"); its missions run one at a time, the next one waiting for the
    active one (enqueue) unless `singleton` says to skip it or let it replace the active one; `debounce_seconds`
    makes a burst of a key's events one mission; `throttle` caps how many start per period; `cancel_on` events
    cancel the key's missions."""

    key: str = Field(min_length=1, max_length=200)
    # a burst of events of one key starts one mission, with the last event, once none came for this long
    debounce_seconds: int | None = Field(None, ge=1, le=86_400)
    singleton: Literal["skip", "replace"] | None = None
    throttle: Throttle | None = None
    cancel_on: list[CancelOn] = Field(default_factory=list, max_length=10)


class GoalTemplate(Model):
    """A goal with {placeholders} filled from the triggering event (dotted paths allowed)."""

    goal_template: str = Field(min_length=1, max_length=2000)
    priority: Priority = Priority.MEDIUM
    context: dict[str, Any] = Field(default_factory=dict)
    flow: TriggerFlow | None = None  # one mission at a time per key, throttles, cancelling events

    def render(self, values: dict[str, Any]) -> str:
        return render(self.goal_template, values)


class WebhookTrigger(GoalTemplate):
    """Accepted deliveries from `source` whose event type is listed (or any, if none is) start a mission."""

    source: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")
    event_types: list[str] = Field(default_factory=list)


def webhook_trigger_id(trigger: WebhookTrigger, index: int) -> str:
    """Webhook triggers have no id of their own: their source and position in the capability."""
    return f"{trigger.source}-{index}"


class ScheduleTrigger(GoalTemplate):
    """An EventBridge Scheduler cron: 'cron(minutes hours day-of-month month day-of-week year)'."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")
    cron: str
    timezone: str = "UTC"
    users: Literal["all", "opted_in"] = "opted_in"
    opt_in_namespace: str | None = None  # users with an item in (namespace, user) are opted in

    @field_validator("cron")
    @classmethod
    def _cron_shape(cls, cron: str) -> str:
        match = re.fullmatch(r"cron\((.+)\)", cron.strip())
        if not match or len(match.group(1).split()) != 6:
            raise ValueError("cron must look like 'cron(0 8 * * ? *)': six fields")
        return cron.strip()


class MemoryTrigger(GoalTemplate):
    """A change in a user's long-term memory namespace starts a mission when the condition holds."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")
    namespace: str = Field(min_length=1, max_length=128)
    condition: Literal["any", "field_changed", "item_added"] = "any"
    field: str | None = None  # for field_changed (a top-level field) and item_added (a list field)


class Triggers(Model):
    keywords: list[str] = Field(default_factory=list)  # user-initiated: goals mentioning these pick the capability
    webhooks: list[WebhookTrigger] = Field(default_factory=list)
    schedules: list[ScheduleTrigger] = Field(default_factory=list)
    memory: list[MemoryTrigger] = Field(default_factory=list)

    def by_id(self) -> dict[str, GoalTemplate]:
        """Every trigger by its id (a webhook trigger's: `webhook_trigger_id`)."""
        found: dict[str, GoalTemplate] = {webhook_trigger_id(t, i): t for i, t in enumerate(self.webhooks)}
        return found | {t.id: t for t in self.memory} | {t.id: t for t in self.schedules}


class _Formatter(string.Formatter):
    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        value: Any = kwargs
        for part in field_name.split("."):
            value = value.get(part, "") if isinstance(value, dict) else ""
        return value, field_name


def render(template: str, values: dict[str, Any]) -> str:
    """Fill {a.b} placeholders from nested values; a missing value renders empty, never raises."""
    try:
        return _Formatter().format(template, **values).strip()[:10_000]
    except (ValueError, IndexError):
        return template
