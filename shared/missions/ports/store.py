"""What the runtime needs from storage, independent of any backend.

Every backend runs the same conformance suite (tests/conformance), in memory and on DynamoDB.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field, model_validator

from missions.core.artifacts import Artifact, Artifacts
from missions.core.envelope import InterruptKind, InterruptResponse, Model, StageRecord, utcnow
from missions.core.events import Event
from missions.core.status import MissionStatus

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
    # what the user told the mission while it ran (missions.core.notes), oldest first: each stage that
    # records its progress gets them back, and the next stage receives the ones it has not seen
    notes: list[dict[str, Any]] = Field(default_factory=list)

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
    (where it is: `stage`, `next_stage`, `phase`, `agent_hops`, its cost so far), and any other's from the
    index (its last stage and its cost as they were when it stopped running; `next_stage`, `phase` and
    `agent_hops` only matter while it runs, and are left empty)."""

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


class Checkpoint(Model):
    """One stage's checkpoint: what its stage changed, and the stage's record (missions.core.checkpoints).

    Exactly one of `envelope` (a snapshot: the whole encoded envelope, which may hold blob references)
    and `delta` (what changed since the parent's state) is set; a delta always has a parent. The state
    at a checkpoint is read with missions.service.checkpoints.state_at, never from `envelope` alone.
    Other threads (a mission's tool journal) keep their own payload in `envelope`."""

    thread_id: str
    checkpoint_id: str
    parent_id: str | None
    stage: str
    created_at: str = Field(default_factory=utcnow)
    envelope: dict[str, Any] | None = None
    delta: dict[str, Any] | None = None
    # the stages this checkpoint records, in the order they ran: a join's parallel branches, then itself
    records: list[StageRecord] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_state(self) -> Checkpoint:
        if (self.envelope is None) == (self.delta is None):
            raise ValueError("a checkpoint keeps either a whole envelope or a delta, not both nor neither")
        if self.delta is not None and self.parent_id is None:
            raise ValueError("a delta checkpoint needs the parent it applies to")
        return self


class InterruptRecord(Model):
    mission_id: str
    interrupt_id: str
    kind: InterruptKind
    stage: str
    question: str
    options: list[str] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)
    task_token: str
    checkpoint_id: str | None = None
    status: str = "pending"  # pending | answered | expired
    response: InterruptResponse | None = None
    created_at: str = Field(default_factory=utcnow)
    answered_at: str | None = None


class MissionStore(Protocol):
    def create(self, record: MissionRecord) -> None:
        """Create; ConflictError if the mission id exists."""

    def get(self, mission_id: str) -> MissionRecord: ...

    def update(self, mission_id: str, **fields: Any) -> None:
        """Set fields other than `status` on an existing mission (NotFound if missing)."""

    def transition(self, mission_id: str, status: str, allowed_from: frozenset[str], **fields: Any) -> MissionRecord:
        """Set `status` (and fields) only if the current status is in `allowed_from`, in one conditional
        write; TransitionRefused otherwise, NotFound if missing. Only missions.service.lifecycle calls it.
        Returns the record as written (what the write returns, no read of its own): a stage learns the
        notes its user sent with the write that records its progress."""

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


# a mission's stages' tool calls live in the checkpoint store as the thread "<mission id>#tools"
TOOL_JOURNAL_SUFFIX = "#tools"


class CheckpointStore(Protocol):
    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        """Write once. If that checkpoint id exists, return the stored one unchanged."""

    def get(self, thread_id: str, checkpoint_id: str) -> Checkpoint: ...

    def list(self, thread_id: str) -> list[Checkpoint]:
        """Oldest first."""

    def latest(self, thread_id: str) -> Checkpoint | None: ...

    def delete_thread(self, thread_id: str) -> int:
        """Remove every checkpoint of the thread (retention); returns how many there were."""


def event_position(batch: int, index: int = 0) -> str:
    """An event's place in its mission's timeline, as a cursor: the batch it was appended in (a per-mission
    sequence) and its index within the batch, sortable as text ("e<batch:012d>.<index:06d>")."""
    if batch < 1 or not 0 <= index < 1_000_000:
        raise ValueError(f"no event position for batch {batch}, index {index}")
    return f"e{batch:012d}.{index:06d}"


_POSITION = re.compile(r"e(\d{12})(?:\.(\d{6}))?")


def parse_position(position: str) -> tuple[int, int]:
    """(batch, index) of a cursor; ValueError when it is not one. A cursor without an index is the only
    event of its batch (a timeline written before batches held several events: one event an item)."""
    match = _POSITION.fullmatch(position)
    if match is None:
        raise ValueError(f"not an event position: {position[:40]!r}")
    return int(match.group(1)), int(match.group(2) or 0)


class EventStore(Protocol):
    """A mission's timeline. The store orders it, not the writers: each batch is placed after every
    batch appended before it (a per-mission sequence), whoever wrote it; a batch's events keep their
    order and are never interleaved with another batch's."""

    def append(self, mission_id: str, batch_id: str, events: list[Event]) -> None:
        """Append the events, in order, after everything appended so far. `batch_id` names the write
        so a retry is not a second copy: appending the batch that was appended last, again, rewrites
        it in place (a stage retried after its events were written), whatever it holds this time."""

    def read(self, mission_id: str, after: str | None = None, limit: int = 100) -> tuple[list[Event], str | None]:
        """Events strictly after the cursor (an event's position: `event_position`), in order, at most
        `limit`; returns (events, cursor of the last one returned), or (no events, `after`). ValueError
        when `after` is not a position (`parse_position`)."""


class InterruptStore(Protocol):
    def put(self, record: InterruptRecord) -> None:
        """Idempotent for the same interrupt id (a retried Lambda keeps the newest token)."""

    def get(self, mission_id: str, interrupt_id: str) -> InterruptRecord: ...

    def answer(self, mission_id: str, interrupt_id: str, response: InterruptResponse) -> InterruptRecord:
        """Mark answered exactly once; ConflictError when it is not pending."""

    def expire(self, mission_id: str, interrupt_id: str) -> None:
        """Mark it expired (timed out, or its answer could not be delivered); NotFound if missing."""

    def reopen(self, mission_id: str, interrupt_id: str) -> None:
        """Undo `answer` (pending again, no response) when the answer did not reach the execution and the
        user may answer again; ConflictError when it is not answered, NotFound if missing."""

    def pending(self, mission_id: str) -> list[InterruptRecord]: ...

    def overdue(self, asked_before: str, limit: int = 100) -> list[InterruptRecord]:
        """Pending interrupts of any mission asked before the time, oldest first."""


class ArtifactStore(Artifacts, Protocol):
    """Artifacts as stages write them (put, get), and as the API lists them."""

    def list(self, mission_id: str) -> list[Artifact]:
        """Every version of every artifact of the mission, by path then version."""


class RepositoryStatus:
    AWAITING_UPLOAD = "awaiting_upload"  # registered for an upload that has not arrived yet
    IMPORTING = "importing"
    READY = "ready"
    FAILED = "failed"  # `reason` says why; the repository can be imported again


class RepositorySnapshot(Model):
    """One immutable import of a repository: its content hash names its archive."""

    sha256: str
    commit: str | None = None  # git imports: the commit snapshotted
    ref: str | None = None  # git imports: the ref asked for (or the default branch)
    files: int = 0
    total_bytes: int = 0
    archive_bytes: int = 0
    imported_at: str = Field(default_factory=utcnow)


class RepositoryRecord(Model):
    repository_id: str
    owner: str  # the user who registered it, or "#shared" for one an operator shared with everyone
    name: str
    source: str  # "git" | "upload"
    url: str | None = None  # git: without credentials
    ref: str | None = None  # git: the ref to import (None: the default branch)
    format: str | None = None  # upload: "tar.gz" | "zip"
    upload_bytes: int | None = None  # upload: the size the client declared (signed into the upload URL)
    status: str = RepositoryStatus.IMPORTING
    reason: str | None = None  # why the last import failed
    snapshots: list[RepositorySnapshot] = Field(default_factory=list)  # oldest first; the last is current
    revision: int = 0  # bumped by every snapshot change: concurrent imports never overwrite each other
    created_at: str = Field(default_factory=utcnow)
    updated_at: str = Field(default_factory=utcnow)

    def readable_by(self, user_id: str) -> bool:
        return self.owner == user_id or self.owner == "#shared"


class RepositoryStore(Protocol):
    def create(self, record: RepositoryRecord) -> None:
        """Create; ConflictError if the id exists."""

    def get(self, repository_id: str) -> RepositoryRecord:
        """NotFound when missing."""

    def list_for_owner(self, owner: str, limit: int = 100) -> list[RepositoryRecord]:
        """Newest first."""

    def update(self, repository_id: str, *, expect_status: str | None = None, **fields: Any) -> RepositoryRecord:
        """Set fields; with `expect_status`, only in that status (else ConflictError). NotFound if missing."""

    def add_snapshot(self, repository_id: str, snapshot: RepositorySnapshot) -> RepositoryRecord:
        """Append a snapshot (one with the same sha256 is not added twice) and mark the repository ready."""

    def delete(self, repository_id: str) -> None:
        """Remove the record; NotFound if missing."""


class SnapshotStore(Protocol):
    """Immutable repository snapshots and the uploads they are made from (S3 in AWS)."""

    def upload(self, key: str, source: Path) -> None: ...

    def download(self, key: str, destination: Path) -> None:
        """NotFound when there is no such object."""

    def size(self, key: str) -> int | None:
        """The object's size in bytes, None when it does not exist."""

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under the prefix; returns how many."""

    def upload_url(self, key: str, size_bytes: int, expires_seconds: int) -> str:
        """A URL a client PUTs exactly `size_bytes` to (a presigned S3 URL in AWS)."""


class Executions(Protocol):
    """Running a mission's state machine (Step Functions in AWS): the runtime never sees the SDK."""

    def start(self, state_machine_arn: str, name: str, input: str) -> str:
        """Start an execution named `name` (the mission id); returns its ARN. Idempotent by name: when
        that execution exists already (a start retried after a crash), it returns its ARN."""

    def stop(self, execution_arn: str, cause: str) -> None:
        """Stop it; an execution that already ended is not an error."""

    def send_success(self, task_token: str, output: str) -> None:
        """Resume a waiting task; TaskGone when its token no longer accepts an answer."""

    def send_failure(self, task_token: str, error: str, cause: str) -> None:
        """Fail a waiting task; TaskGone when its token no longer accepts it."""
