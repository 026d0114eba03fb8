"""A mission: starting, forking, steering and rating it, and reading it back (its events, checkpoints, artifacts)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, StrictInt, StrictStr, field_validator

from missions.app.api.models.common import Body, bounded
from missions.app.api.models.interrupts import PendingInterrupt
from missions.core.mission.forks import MAX_GOAL
from missions.core.mission.notes import MAX_NOTE_CHARS
from missions.core.mission.requests import KEY_PATTERN, MultitaskStrategy
from missions.core.triggers.declared import Priority

CONTEXT_LIMIT_BYTES = 64 * 1024  # a mission's context travels in its envelope and its first checkpoint


class MissionCreate(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [  # one that answers, one that asks which code you mean first, one you review
                {"goal": "Where is compute_tax defined?", "capability": "code_analysis", "conversation_id": "tax"},
                {"goal": "Can you look into this?", "capability": "code_analysis"},
                {"goal": "Plan a 5-day Paris trip for May 2026, budget $3000, 2 travelers", "capability": "travel"},
            ]
        }
    )
    capability: StrictStr | None = Field(None, min_length=1, max_length=64, description="default: chosen by the goal")
    goal: StrictStr = Field(min_length=1, max_length=10_000)
    context: dict[str, JsonValue] = Field(default_factory=dict, description="at most 64 KB as JSON")
    priority: Priority = Priority.MEDIUM
    deadline: datetime | None = Field(None, description="ISO 8601; earlier deadlines run first within a priority")
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        le=10_000,
        strict=True,
        description="this mission's dollar budget: at most the capability's own (GET /capabilities)",
    )
    conversation_id: StrictStr | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="a conversation of yours this mission is a turn of: it starts from its working memory",
    )
    model: StrictStr | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="the model every stage asks, one of the capability's allowed models here "
        "(GET /agents/{capability}: `models`); default: each agent's configured one",
    )
    over_budget: Literal["queue", "refuse"] = Field(
        "queue",
        description="when your daily budget is spent (GET /me: `budget`): queue it until the budget is given "
        "afresh or raised, or refuse it (429, nothing stored)",
    )
    concurrency_key: StrictStr | None = Field(
        None,
        pattern=KEY_PATTERN,
        description="your missions sharing a key run one at a time (a conversation is a key of its own)",
    )
    multitask_strategy: MultitaskStrategy | None = Field(
        None,
        description="while a mission of the same conversation or key is active: reject (409), enqueue, "
        "interrupt (it is cancelled, its goal joins this one's context) or rollback (cancelled, forgotten by "
        "the conversation); default: the capability's (GET /capabilities)",
    )

    @field_validator("context")
    @classmethod
    def _small_context(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        return bounded(value, CONTEXT_LIMIT_BYTES, "context")  # type: ignore[no-any-return]


class ClassifyRequest(Body):
    goal: StrictStr = Field(min_length=1, max_length=10_000)


class ForkRequest(Body):
    checkpoint_id: StrictStr = Field(min_length=1, max_length=80)
    goal: StrictStr | None = Field(None, min_length=1, max_length=MAX_GOAL, description="the fork's goal instead")
    context: dict[str, Any] | None = Field(None, description="a JSON merge patch (RFC 7396) on the context")
    outputs: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="stage -> a JSON merge patch on its output at the checkpoint, checked against its model",
    )
    resume_from: StrictStr | None = Field(
        None, min_length=1, max_length=64, description="the stage the fork runs first (default: the checkpoint's next)"
    )


class ParentOrigin(BaseModel):
    mission_id: str
    interrupt_id: str = Field(description="the delegation its end answers")


class ForkOrigin(BaseModel):
    mission_id: str
    checkpoint_id: str
    edit: dict[str, Any] | None = None


class NoteBody(Body):
    text: StrictStr = Field(min_length=1, max_length=MAX_NOTE_CHARS, description="what the mission should know")

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a note needs some text")
        return value


class FeedbackBody(Body):
    completed: StrictBool
    quality: StrictInt | None = Field(None, ge=1, le=5)
    useful: StrictBool | None = None
    text: StrictStr | None = Field(None, max_length=5000)


class MissionAccepted(BaseModel):
    mission_id: str
    status: Literal["started", "queued", "duplicate"] = Field(
        description="started now, queued behind the user's running missions, or an earlier request's mission"
    )
    capability: str
    held: Literal["budget", "key"] | None = Field(
        None,
        description="queued and held: your daily budget is spent (it starts when given afresh or raised), or "
        "a mission of its conversation or concurrency key is active (it starts when that one ends)",
    )


class MissionSummary(BaseModel):
    mission_id: str
    capability: str
    goal: str
    status: str
    lifecycle: str
    stage: str | None = Field(description="the last stage that ran")
    running_stage: str | None = Field(description="the stage running now (null when none is)")
    priority: str
    trigger: str
    created_at: str
    terminal_reason: str | None


class MissionList(BaseModel):
    missions: list[MissionSummary]
    cursor: str | None = Field(description="pass as `cursor` for the next page; null on the last")


class QueuePlace(BaseModel):
    """Why a mission has not started yet, and how many of its user's missions go first."""

    position: int = Field(ge=1)
    reason: str
    held: Literal["budget", "key"] | None = Field(None, description="held out of the queue, and why (see `reason`)")


class MissionNote(BaseModel):
    note_id: str
    text: str
    at: str


class MissionView(MissionSummary):
    updated_at: str
    completed_at: str | None
    archived_at: str | None
    pending_interrupt: PendingInterrupt | None = Field(description="the first question waiting for you")
    pending_interrupts: list[PendingInterrupt] = Field(
        default_factory=list,
        description="every question waiting for you, in the order asked (several when parallel branches asked)",
    )
    queue: QueuePlace | None = None
    result: dict[str, Any] | None
    counters: dict[str, Any]
    cost_usd: float
    feedback: dict[str, Any] | None
    paused_at: str | None = Field(None, description="when it paused, while it is paused")
    notes: list[MissionNote] = Field(default_factory=list, description="what you told it while it ran")
    forked_from: ForkOrigin | None = Field(None, description="a fork's source mission, checkpoint and edit")
    parent: ParentOrigin | None = Field(None, description="a sub-mission's parent: the mission that delegated to it")
    lineage: list[str] = Field(default_factory=list, description="the capabilities above a sub-mission, root first")
    children: list[str] = Field(default_factory=list, description="the sub-missions this mission started")


class EventView(BaseModel):
    type: str
    mission_id: str
    stage: str | None
    at: str
    payload: dict[str, Any]
    position: str | None


class EventsPage(BaseModel):
    events: list[EventView]
    cursor: str | None = Field(description="pass as `after` to read what came next")


class StageRun(BaseModel):
    """One run of one stage: the mission's history, as its checkpoints keep it."""

    stage: str
    started_at: str
    duration_ms: float
    status: str = Field(description="ok | interrupted | error | terminated (unknown: before checkpoints kept it)")
    next_stage: str | None = None
    llm_calls: int = 0
    tool_calls: int = 0


class CheckpointView(BaseModel):
    checkpoint_id: str
    parent_id: str | None
    stage: str
    created_at: str
    stages: list[StageRun] = Field(
        default_factory=list, description="the stage runs it records: a join's parallel branches, then its own"
    )


class CheckpointList(BaseModel):
    checkpoints: list[CheckpointView]


class CheckpointState(CheckpointView):
    next_stage: str | None = Field(description="the stage a fork from here runs first (None: the mission's end)")
    state: dict[str, Any] = Field(
        description="the mission's envelope at this checkpoint, as stored: offloaded fields are references"
    )


class ArtifactSummary(BaseModel):
    name: str
    path: str
    version: int
    stage: str
    created_at: str


class ArtifactList(BaseModel):
    artifacts: list[ArtifactSummary]


class ArtifactView(ArtifactSummary):
    content: Any


class ForkAccepted(BaseModel):
    mission_id: str
    status: Literal["started", "queued", "duplicate"]
    forked_from: str
    checkpoint_id: str


class Cancelled(BaseModel):
    mission_id: str
    status: Literal["cancelled"]


class Pausing(BaseModel):
    mission_id: str
    status: Literal["pausing"] = Field(
        description="its stage in flight ends and checkpoints, then it waits as `paused`, holding no running slot"
    )


class Resumed(BaseModel):
    mission_id: str
    status: Literal["running", "queued"] = Field(
        description="running: it goes on now; queued: it goes on when one of the user's running slots frees"
    )


class NoteTaken(BaseModel):
    mission_id: str
    note_id: str
    status: Literal["noted"] = Field(description="the next stage that starts receives it in its context")


class FeedbackTaken(BaseModel):
    mission_id: str
    preferences_written: list[str]
    complaint: bool


class GoalAnalysisView(BaseModel):
    subgoals: int
    dependencies: str
    external_services: int
    planning: str
    review_loop: bool


class ClassificationView(BaseModel):
    capability: str | None
    level: Literal[1, 2, 3]
    analysis: GoalAnalysisView
    source: Literal["llm", "offline"]


__all__ = [
    "ArtifactList",
    "ArtifactSummary",
    "ArtifactView",
    "Cancelled",
    "CheckpointList",
    "CheckpointView",
    "ClassificationView",
    "ClassifyRequest",
    "EventView",
    "EventsPage",
    "FeedbackBody",
    "FeedbackTaken",
    "ForkAccepted",
    "ForkRequest",
    "GoalAnalysisView",
    "MissionAccepted",
    "MissionCreate",
    "MissionList",
    "MissionNote",
    "MissionSummary",
    "MissionView",
    "NoteBody",
    "NoteTaken",
    "Pausing",
    "QueuePlace",
    "Resumed",
    "StageRun",
]
