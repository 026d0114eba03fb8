"""A user's own schedules: when each fires and what its firings did."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictStr, field_validator

from missions.app.api.models.common import Body, bounded
from missions.core.triggers.schedules import CONTEXT_LIMIT as SCHEDULE_CONTEXT_LIMIT
from missions.core.triggers.schedules import GOAL_LIMIT as SCHEDULE_GOAL_LIMIT


class ScheduleCreate(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"expression": "cron(0 8 ? * MON-FRI *)", "goal": "What changed in the repository yesterday?"}]
        }
    )
    expression: StrictStr = Field(
        min_length=1,
        max_length=256,
        description="EventBridge Scheduler's cron(min hour day-of-month month day-of-week year), e.g. "
        "cron(0 8 ? * MON-FRI *), or rate(<n> minutes|hours|days)",
    )
    timezone: StrictStr = Field("UTC", min_length=1, max_length=64, description="an IANA zone a cron is read in")
    goal: StrictStr = Field(min_length=1, max_length=SCHEDULE_GOAL_LIMIT)
    capability: StrictStr = Field(
        "auto", min_length=1, max_length=64, description="a capability, or auto: chosen from the goal at each firing"
    )
    name: StrictStr = Field("", max_length=100, description="a label for you")
    context: dict[str, JsonValue] = Field(default_factory=dict, description="each mission's context; at most 16 KB")

    @field_validator("context")
    @classmethod
    def _small_context(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        return bounded(value, SCHEDULE_CONTEXT_LIMIT, "context")  # type: ignore[no-any-return]


class FireTime(BaseModel):
    utc: str = Field(description="ISO 8601, UTC")
    local: str = Field(description="ISO 8601 in the schedule's time zone, with its offset")


class FiringView(BaseModel):
    scheduled_time: str
    outcome: Literal["started", "queued", "duplicate", "skipped", "rejected"]
    mission_id: str | None = None
    reason: str | None = Field(None, description="why nothing started (paused; a goal that could not run)")
    at: str


class ScheduleView(BaseModel):
    """One of your schedules, with its next firings (none while paused) and what its last firings did."""

    schedule_id: str
    name: str
    expression: str
    timezone: str
    goal: str
    capability: str = Field(description="a capability, or auto")
    context: dict[str, Any]
    state: Literal["enabled", "paused"]
    created_at: str
    updated_at: str
    next_fire_times: list[FireTime]
    firings: list[FiringView] = Field(description="the last ones, oldest first")


class ScheduleList(BaseModel):
    schedules: list[ScheduleView]
    limit: int = Field(description="how many schedules you may have")
    minimum_interval_minutes: int = Field(description="no two firings of a schedule may be closer")


__all__ = [
    "FireTime",
    "FiringView",
    "ScheduleCreate",
    "ScheduleList",
    "ScheduleView",
]
