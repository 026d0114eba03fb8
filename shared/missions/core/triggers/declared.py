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


class GoalTemplate(Model):
    """A goal with {placeholders} filled from the triggering event (dotted paths allowed)."""

    goal_template: str = Field(min_length=1, max_length=2000)
    priority: Priority = Priority.MEDIUM
    context: dict[str, Any] = Field(default_factory=dict)

    def render(self, values: dict[str, Any]) -> str:
        return render(self.goal_template, values)


class WebhookTrigger(GoalTemplate):
    """Accepted deliveries from `source` whose event type is listed (or any, if none is) start a mission."""

    source: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")
    event_types: list[str] = Field(default_factory=list)


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
