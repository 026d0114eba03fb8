"""A trigger's decisions."""

from __future__ import annotations

from pydantic import BaseModel, Field

from missions.ports.flow import Decided


class TriggerDecisionView(BaseModel):
    decision_id: str
    trigger: str
    user_id: str
    decision: Decided
    key: str | None = Field(description="the key the event rendered (the trigger's `flow.key`)")
    mission_id: str | None = Field(description="the mission started, held, replacing another, or cancelled")
    detail: str
    at: str


class TriggerDecisionList(BaseModel):
    trigger: str
    decisions: list[TriggerDecisionView]


__all__ = ["TriggerDecisionList", "TriggerDecisionView"]
