"""Flow control's records (missions.service.flow.triggers): what each trigger decided about each arriving event,
and the counters its throttles keep per key and window."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import Field

from missions.core.mission.envelope import Model, new_id, utcnow

Decided = Literal[
    "started", "enqueued", "skipped", "replaced", "throttled", "cancelled_by_event", "held_for_budget", "debounced"
]


class Pending(Model):
    """A debounced key's last event, as the request it would start, and when its quiet period ends."""

    request: dict[str, Any]  # MissionRequest, as JSON
    due: int  # seconds since the epoch
    version: int  # how many events of the burst arrived so far


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

    def debounce(self, trigger: str, key: str, request: dict[str, Any], due: int) -> Pending | None:
        """Keep the key's latest event (its request) and push its quiet period's end to `due`; returns what was
        pending before (None: this event begins a burst). Atomic."""

    def pending(self, trigger: str, key: str) -> Pending | None:
        """The key's pending burst, if any (a consistent read)."""

    def take(self, trigger: str, key: str, version: int) -> bool:
        """Remove the pending burst, only if no event arrived since `version`; False otherwise."""


DECISIONS_TTL_DAYS = 30

__all__ = ["DECISIONS_TTL_DAYS", "Decided", "FlowRecords", "Pending", "TriggerDecision"]
