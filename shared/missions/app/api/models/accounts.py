"""The caller: who they are, erasing their data, and their notification settings."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Me(BaseModel):
    user_id: str
    preferences_namespace: str = Field(description="where feedback's learned preferences live: GET /memory/<it>")
    operator: bool


class Erasure(BaseModel):
    """What `DELETE /me` erased: items (and objects) per store. An erasure that could not finish answers 503
    instead, its message saying what it erased and what it did not; running it again finishes it."""

    user_id: str
    erased: dict[str, int] = Field(description="per store (missions, events, memory, repositories, ...): how many")


class NotificationSettings(BaseModel):
    """Whether you are told by email when a mission needs you or finishes."""

    email: str | None
    status: Literal["off", "pending_confirmation", "on"] = Field(
        description="pending_confirmation: the address was sent a link to confirm it"
    )


class NotificationOptIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"email": "ada@example.com"}]})
    email: str = Field(min_length=3, max_length=254)


__all__ = [
    "Erasure",
    "Me",
    "NotificationOptIn",
    "NotificationSettings",
]
