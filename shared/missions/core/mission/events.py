"""The event vocabulary (from the Jeeves orchestrator): what a mission's timeline is made of."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator

from missions.core.mission.envelope import Model, utcnow
from missions.core.redaction import redact

# payload fields that carry error text from elsewhere (an exception, a server, a Cause)
ERROR_FIELDS = frozenset({"error", "message", "cause", "reason"})


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
    DELEGATION_STARTED = "delegation.started"  # a stage started a sub-mission (`child`) and waits for it
    DELEGATION_ENDED = "delegation.ended"  # the sub-mission ended (or was refused): the stage resumes with it
    INTERRUPT_EXPIRED = "interrupt.expired"  # timed out, or the mission ended before its answer arrived
    MISSION_QUEUED = "mission.queued"
    MISSION_CANCELLED = "mission.cancelled"
    MISSION_PAUSING = "mission.pausing"  # the user paused it: the stage in flight finishes first
    MISSION_PAUSED = "mission.paused"  # it waits for the resume, holding no running slot
    MISSION_RESUMED = "mission.resumed"
    NOTE_RECEIVED = "note.received"  # the user sent a note
    NOTE_DELIVERED = "note.delivered"  # a stage received it in its context
    FEEDBACK_RECEIVED = "feedback.received"
    FEEDBACK_COMPLAINT = "feedback.complaint"
    ANALYSIS_COMPLETED = "analysis.completed"  # a script ran in the sandbox (missions.core.sandbox)
    MISSION_EVALUATED = "mission.evaluated"  # the trace scorers' verdict (missions.core.evaluation)
    # a piece of a model's answer as it is written (providers that stream: Bedrock, Anthropic), before the
    # stage's own events; the pieces of one call, joined, are its raw answer (`final` on the last)
    LLM_OUTPUT = "llm.output"


class Event(Model):
    type: EventType
    mission_id: str
    stage: str | None = None
    at: str = Field(default_factory=utcnow)
    payload: dict[str, Any] = Field(default_factory=dict)
    position: str | None = None  # set by the store: the cursor of this event

    @field_validator("payload")
    @classmethod
    def _no_credentials(cls, payload: dict[str, Any]) -> dict[str, Any]:
        """Every event is made through here before it is stored or shown: error text loses its credentials."""
        if ERROR_FIELDS.isdisjoint(payload) or not any(isinstance(payload.get(name), str) for name in ERROR_FIELDS):
            return payload
        return {k: redact(v) if k in ERROR_FIELDS and isinstance(v, str) else v for k, v in payload.items()}
