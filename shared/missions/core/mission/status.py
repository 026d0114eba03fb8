"""A mission's statuses and the transitions between them: the rules; `missions.service.lifecycle`
applies them, each one a conditional write.

    created/queued --start--> running <--> interrupted
          |                      |   \\         |
          |                      |    cancelling ---> cancelled
          +------cancel----------+--------------------^
    running/interrupted --end--> completed | failed;  completed/failed/cancelled --> archived
    running --pause--> pausing --(its stage in flight ended; the execution waits)--> paused --resume--> running
          pausing/paused --cancel--> cancelling;  pausing --a question--> interrupted;  pausing --end-->

A `StrEnum`: a status compares equal to its string and is stored as it (JSON, DynamoDB, pydantic's
`str` fields), so what the tables hold is the same plain string it always was.
"""

from __future__ import annotations

from enum import StrEnum


class MissionStatus(StrEnum):
    CREATED = "created"
    QUEUED = "queued"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    CANCELLING = "cancelling"  # the user cancelled; its execution is being stopped
    PAUSING = "pausing"  # the user paused it; the stage in flight finishes, then it waits
    PAUSED = "paused"  # waiting for the user's resume at no compute cost, holding no running slot
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ARCHIVED = "archived"  # ended long ago: summarized into long-term memory, checkpoints removed


S = MissionStatus

TERMINAL = frozenset({S.COMPLETED, S.FAILED, S.CANCELLED, S.ARCHIVED})  # nothing leaves these
ACTIVE = frozenset({S.RUNNING, S.INTERRUPTED})
NOT_STARTED = frozenset({S.CREATED, S.QUEUED})
HELD = frozenset({S.PAUSING, S.PAUSED})  # the user paused it
# a note reaches a mission that has not ended: the next stage that starts receives it
NOTEABLE = NOT_STARTED | ACTIVE | HELD

# the statuses a mission may be in to move to each status
ALLOWED_FROM: dict[MissionStatus, frozenset[MissionStatus]] = {
    S.QUEUED: frozenset({S.CREATED}),
    S.RUNNING: NOT_STARTED | ACTIVE,  # started, or a stage's progress, or resumed after an answer
    S.INTERRUPTED: ACTIVE | {S.PAUSING},  # a question the stage in flight asked wins over the pause
    S.PAUSING: frozenset({S.RUNNING}),
    S.PAUSED: frozenset({S.PAUSING, S.RUNNING}),  # waits; or a resume that could not be handed over
    S.CANCELLING: NOT_STARTED | ACTIVE | HELD,
    S.CANCELLED: NOT_STARTED | ACTIVE | HELD | {S.CANCELLING},
    S.COMPLETED: ACTIVE | HELD,
    S.FAILED: NOT_STARTED | ACTIVE | HELD,
    S.ARCHIVED: frozenset({S.COMPLETED, S.FAILED, S.CANCELLED}),
}

__all__ = ["ACTIVE", "ALLOWED_FROM", "HELD", "NOTEABLE", "NOT_STARTED", "TERMINAL", "MissionStatus"]
