"""What the runtime needs from the store of missions: their records, statuses and listings.

Every backend runs the same conformance suite (tests/conformance), in memory and on DynamoDB.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import Field

from missions.core.mission.envelope import Model, utcnow
from missions.core.mission.status import MissionStatus

LIFECYCLE = ("created", "planning", "executing", "interrupted", "reflecting", "completed", "failed", "archived")


def running_stage(record: MissionRecord | MissionSummary, first: str | None = None) -> str | None:
    """The stage running now, while the mission runs: `first` (its pipeline's first stage) before any
    stage ran, then where the routing sent it after its last stage."""
    if record.status != MissionStatus.RUNNING:
        return None
    if not record.agent_hops:
        return first
    upcoming = record.next_stage
    return upcoming if upcoming and not upcoming.startswith("await:") else None


def lifecycle_of(record: MissionRecord | MissionSummary) -> str:
    """Seed 004's lifecycle state of a mission (plus 'cancelled', which the user chose)."""
    status = record.status
    if status in (MissionStatus.CREATED, MissionStatus.QUEUED):
        return "created"
    if status == MissionStatus.CANCELLING:
        return "cancelled"
    if status == MissionStatus.PAUSING:
        return "paused"
    if status == MissionStatus.RUNNING:
        return record.phase or ("planning" if record.stage is None else "executing")
    return status  # interrupted, paused, completed, failed, cancelled, archived


class MissionRecord(Model):
    mission_id: str
    user_id: str
    capability: str
    goal: str
    status: str = MissionStatus.CREATED
    stage: str | None = None
    execution_arn: str | None = None
    created_at: str = Field(default_factory=utcnow)
    updated_at: str = Field(default_factory=utcnow)
    terminal_reason: str | None = None
    result: dict[str, Any] | None = None
    counters: dict[str, Any] = Field(default_factory=dict)
    pending_interrupt: str | None = None  # the question the user can answer now (set by the interrupt function)
    asking: str | None = None  # the question a stage just asked: answerable once it is pending_interrupt
    # questions a group's branches asked together that are not answered yet, in the order asked (then
    # `pending_interrupt` is the first of them all, the one whose token the last answer hands back)
    pending_interrupts: list[str] | None = None
    priority: str = "medium"
    trigger: str = "api"
    completed_at: str | None = None
    feedback: dict[str, Any] | None = None
    phase: str | None = None  # planning | executing | reflecting: the running stage's phase
    # where the routing sent it after `stage`: the stage running now (or "await:<kind>"), written with the
    # same update as `stage`, so followers see a stage begin without a write of its own
    next_stage: str | None = None
    archived_at: str | None = None
    # a paused mission's wait (set by the interrupt function once the execution waits): the id a resume
    # names and the task token it hands back (never shown over the API)
    pause_id: str | None = None
    pause_token: str | None = None
    paused_at: str | None = None
    # what the user told the mission while it ran (missions.core.mission.notes), oldest first: each stage reads
    # them after its checkpoint, and the next stage receives the ones it has not seen
    notes: list[dict[str, Any]] = Field(default_factory=list)
    # a fork's source: {"mission_id", "checkpoint_id"} and the edit it started with, if any
    forked_from: dict[str, Any] | None = None
    # a sub-mission's parent ({"mission_id", "interrupt_id"}) and the capabilities above it, root first
    # (missions.service.delegation); a parent's sub-missions, in the order they started
    parent: dict[str, Any] | None = None
    lineage: list[str] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    # the key whose missions run one at a time (MissionRequest.flow_key): its conversation's, or its own
    flow_key: str | None = None

    @property
    def agent_hops(self) -> int:
        try:
            return int((self.counters or {}).get("agent_hops") or 0)
        except (TypeError, ValueError):
            return 0

    @property
    def cost_usd(self) -> float:
        return cost_of(self.counters)


def cost_of(counters: dict[str, Any] | None) -> float:
    """The dollars a mission's counters say it spent (0.0 when they say nothing usable)."""
    try:
        return float((counters or {}).get("cost_usd") or 0.0)
    except (TypeError, ValueError):
        return 0.0


class MissionSummary(Model):
    """A mission as listings show it: what the user's list, the inbox, metrics and the nightly evaluation
    read. The missions table's by_user and by_capability indexes hold exactly this (specs.MISSION_SUMMARY),
    none of which changes while a mission runs; so a running mission's summary is made from its record
    and its newest checkpoint (missions.service.progress: where it is, `stage`, `next_stage`, `phase`,
    `agent_hops`, its cost so far), and any other's from the index (its last stage and its cost as they
    were when it stopped running; `next_stage`, `phase` and `agent_hops` only matter while it runs, and
    are left empty)."""

    mission_id: str
    user_id: str
    capability: str
    goal: str
    status: str
    priority: str = "medium"
    trigger: str = "api"
    created_at: str
    completed_at: str | None = None
    terminal_reason: str | None = None
    pending_interrupt: str | None = None
    feedback: dict[str, Any] | None = None
    stage: str | None = None  # the stage running or, once it stopped running, the last that ran
    cost_usd: float = 0.0
    next_stage: str | None = None
    phase: str | None = None
    agent_hops: int = 0

    @classmethod
    def of(cls, record: MissionRecord) -> MissionSummary:
        running = record.status == MissionStatus.RUNNING
        return cls(
            mission_id=record.mission_id,
            user_id=record.user_id,
            capability=record.capability,
            goal=record.goal,
            status=record.status,
            priority=record.priority,
            trigger=record.trigger,
            created_at=record.created_at,
            completed_at=record.completed_at,
            terminal_reason=record.terminal_reason,
            pending_interrupt=record.pending_interrupt,
            feedback=record.feedback,
            stage=record.stage,
            cost_usd=record.cost_usd,
            next_stage=record.next_stage if running else None,
            phase=record.phase if running else None,
            agent_hops=record.agent_hops if running else 0,
        )


class MissionStore(Protocol):
    def create(self, record: MissionRecord) -> None:
        """Create; ConflictError if the mission id exists."""

    def get(self, mission_id: str) -> MissionRecord: ...

    def update(self, mission_id: str, **fields: Any) -> None:
        """Set fields other than `status` on an existing mission (NotFound if missing)."""

    def transition(self, mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> MissionRecord:
        """Set `status` (and fields) only if the current status is in `allowed_from`, in one conditional
        write; TransitionRefused otherwise, NotFound if missing. Only missions.service.lifecycle calls it.
        Returns the record as written (what the write returns, no read of its own)."""

    def drop_pending(self, mission_id: str, interrupt_id: str) -> MissionRecord:
        """Remove an answered question from `pending_interrupts` while the mission is interrupted, in one
        conditional write, and return the record as written (so of concurrent answers exactly one sees
        none left); ConflictError when it is not pending there, NotFound if missing."""

    def add_note(self, mission_id: str, note: dict[str, Any], allowed_from: frozenset[str], limit: int) -> None:
        """Append a note, in one conditional write, only while the status is in `allowed_from` (else
        TransitionRefused) and the mission has fewer than `limit` notes (else ConflictError); NotFound if
        missing."""

    def discard(self, mission_id: str) -> bool:
        """Delete a mission that never had an execution (the dispatcher undoing a submit whose enqueue or
        start failed, so nothing is half-made); False, and nothing deleted, for any other."""

    def set_feedback(self, mission_id: str, feedback: dict[str, Any]) -> None:
        """Set once (conditional write); ConflictError if feedback exists, NotFound if the mission does not."""

    def list_for_user(self, user_id: str, limit: int = 50) -> list[MissionSummary]:
        """The user's missions, newest first, as listings show them."""

    def ended_before(self, status: str, before: str, limit: int = 100) -> list[MissionRecord]:
        """Missions in `status` whose completed_at is before the time, oldest first, whole."""


class MissionsByCapability(Protocol):
    def list(self, capability: str, since_iso: str) -> list[MissionSummary]:
        """Missions of the capability created at or after `since_iso` (same format as created_at), oldest first."""
