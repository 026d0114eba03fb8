"""A mission's question to its user, the answer to it, and the inbox of those waiting."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue, StrictBool, StrictStr, field_validator

from missions.app.api.models.common import Body, bounded

DATA_LIMIT_BYTES = 64 * 1024  # an answer's structured data, as a mission's context


class AnswerBody(Body):
    text: StrictStr | None = Field(None, max_length=20_000)
    approved: StrictBool | None = None
    decision: StrictStr | None = Field(None, max_length=200)
    data: dict[str, JsonValue] | None = None

    @field_validator("data")
    @classmethod
    def _small_data(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        return bounded(value, DATA_LIMIT_BYTES, "data") if value is not None else None


class PendingInterrupt(BaseModel):
    """The question waiting for the user; it is shown only once it can be answered."""

    interrupt_id: str
    kind: str
    question: str
    options: list[str]
    data: dict[str, Any]
    stage: str


class AnswerAccepted(BaseModel):
    interrupt_id: str
    status: Literal["answered", "queued", "waiting"] = Field(
        description="answered: the mission resumes now; queued: it resumes when one of the user's slots frees; "
        "waiting: recorded, and the mission resumes once the other questions asked with this one are answered"
    )


class InboxItem(BaseModel):
    mission_id: str
    capability: str
    goal: str
    created_at: str
    question: PendingInterrupt


class HeldMission(BaseModel):
    """A mission of the caller's that flow control holds back, and why (missions.service.flow)."""

    mission_id: str
    capability: str
    goal: str
    created_at: str
    held: Literal["budget", "key"]
    reason: str


class Inbox(BaseModel):
    """Every question waiting for the caller, newest first, and the missions held back."""

    items: list[InboxItem]
    held: list[HeldMission] = Field(
        default_factory=list,
        description="missions that wait for the caller's daily budget or for their conversation's (or key's) last one",
    )


__all__ = [
    "AnswerAccepted",
    "AnswerBody",
    "HeldMission",
    "Inbox",
    "InboxItem",
    "PendingInterrupt",
]
