"""What the runtime needs from the store of checkpoints: each stage's, and each mission's tool journal.

Every backend runs the same conformance suite (tests/conformance), in memory and on DynamoDB.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import Field, model_validator

from missions.core.mission.envelope import Model, StageRecord, utcnow


class Checkpoint(Model):
    """One stage's checkpoint: what its stage changed, and the stage's record (missions.core.mission.checkpoints).

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
    # where the mission stands after this stage, as its record shows a running mission (stage, next_stage,
    # phase, counters, asking): kept here, in the write the stage makes anyway, and read by
    # missions.service.progress (a mission's record is written when its status changes, not per stage)
    progress: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_state(self) -> Checkpoint:
        if (self.envelope is None) == (self.delta is None):
            raise ValueError("a checkpoint keeps either a whole envelope or a delta, not both nor neither")
        if self.delta is not None and self.parent_id is None:
            raise ValueError("a delta checkpoint needs the parent it applies to")
        return self


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
