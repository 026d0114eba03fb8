"""A trigger's decisions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class TriggerDecisionView(BaseModel):
    decision_id: str
    trigger: str
    user_id: str
    decision: Literal[
        "started", "enqueued", "skipped", "replaced", "throttled", "cancelled_by_event", "held_for_budget"
    ]
    key: str | None = Field(description="the key the event rendered (the trigger's `flow.key`)")
    mission_id: str | None = Field(description="the mission started, held, replacing another, or cancelled")
    detail: str
    at: str


class TriggerDecisionList(BaseModel):
    trigger: str
    decisions: list[TriggerDecisionView]


__all__ = ["TriggerDecisionList", "TriggerDecisionView"]
