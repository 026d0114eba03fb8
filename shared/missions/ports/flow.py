"""Flow control's records (missions.service.flow.triggers): what each trigger decided about each arriving event,
and the counters its throttles keep per key and window."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import Field

from missions.core.mission.envelope import Model, new_id, utcnow

Decided = Literal["started", "enqueued", "skipped", "replaced", "throttled", "cancelled_by_event", "held_for_budget"]


class TriggerDecision(Model):
    """What a trigger did with one event: the mission it started (or held, or replaced), or why it started none."""

    trigger: str  # "<capability>.<trigger id>"
    user_id: str
    decision: Decided
    key: str | None = None  # the flow key the event rendered
    mission_id: str | None = None  # the mission started, held, or cancelled
    detail: str = Field("", max_length=500)
    decision_id: str = Field(default_factory=lambda: new_id("d_"))
    at: str = Field(default_factory=utcnow)


class FlowRecords(Protocol):
    def record(self, decision: TriggerDecision) -> None:
        """Keep the decision (kept for DECISIONS_TTL_DAYS)."""

    def decisions(self, trigger: str, user_id: str | None = None, limit: int = 50) -> list[TriggerDecision]:
        """The trigger's decisions, newest first: the user's, or everyone's."""

    def admit(self, trigger: str, key: str, window: int, limit: int, expires_at: int) -> bool:
        """Count one start of the key in the window (its start, in seconds since the epoch) if fewer than `limit`
        were counted there; False (nothing counted) when the window is full. Atomic."""


DECISIONS_TTL_DAYS = 30

__all__ = ["DECISIONS_TTL_DAYS", "Decided", "FlowRecords", "TriggerDecision"]
