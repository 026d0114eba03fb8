"""The event vocabulary (from the Jeeves orchestrator) and the sink stages emit into."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol

from pydantic import Field

from missions.envelope import Model, utcnow


class EventType(StrEnum):
    FLOW_STARTED = "orchestrator.started"
    FLOW_COMPLETED = "orchestrator.completed"
    FLOW_ERROR = "orchestrator.error"
    AGENT_STARTED = "agent_started"
    AGENT_COMPLETED = "agent_completed"
    TOOL_STARTED = "executor.tool_started"
    TOOL_COMPLETED = "executor.tool_completed"
    STAGE_TRANSITION = "orchestrator.stage_transition"
    CRITIC_DECISION = "critic.decision"
    BOUND_REACHED = "orchestrator.bound_reached"
    INTERRUPT_RAISED = "interrupt.raised"
    INTERRUPT_ANSWERED = "interrupt.answered"
    MISSION_QUEUED = "mission.queued"
    MISSION_CANCELLED = "mission.cancelled"
    FEEDBACK_RECEIVED = "feedback.received"
    FEEDBACK_COMPLAINT = "feedback.complaint"


class Event(Model):
    type: EventType
    mission_id: str
    stage: str | None = None
    at: str = Field(default_factory=utcnow)
    payload: dict[str, Any] = Field(default_factory=dict)
    position: str | None = None  # set by the store: the cursor of this event


class EventSink(Protocol):
    def append(self, mission_id: str, prefix: str, events: list[Event]) -> None:
        """Append events under a position prefix; idempotent for the same prefix and order."""
