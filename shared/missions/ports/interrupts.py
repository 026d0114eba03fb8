"""What the runtime needs from the store of interrupts: the questions a mission asks its user.

Every backend runs the same conformance suite (tests/conformance), in memory and on DynamoDB.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import Field

from missions.core.mission.envelope import InterruptKind, InterruptResponse, Model, utcnow


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
    # the questions asked together by a group's branches, in order (this one among them): the mission
    # resumes once every one is answered; empty for a question asked alone
    together: list[str] = Field(default_factory=list)


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
