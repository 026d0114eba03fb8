"""The caller: who they are, erasing their data, and their notification settings."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class DailyBudget(BaseModel):
    """A user's UTC day: what their missions' model calls cost, against their daily budget."""

    day: str = Field(description="the UTC day, YYYY-MM-DD")
    spent_usd: float
    daily_budget_usd: float | None = Field(description="null: no daily budget")
    remaining_usd: float | None
    reached: bool = Field(description="new missions are held (or refused) and running ones end (user_budget)")
    resets_at: str = Field(description="the next midnight, UTC, when the budget is given afresh")


class BudgetChange(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"daily_budget_usd": 5.0}]})
    daily_budget_usd: float | None = Field(
        ge=0, le=1_000_000, description="the user's own budget in dollars a day; null: the environment's default"
    )


class UserBudget(DailyBudget):
    user_id: str
    started: list[str] = Field(description="held missions of the user a raise started now")


class Me(BaseModel):
    user_id: str
    preferences_namespace: str = Field(description="where feedback's learned preferences live: GET /memory/<it>")
    operator: bool
    budget: DailyBudget | None = Field(None, description="today's spend; null where no usage is kept")


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
    "BudgetChange",
    "DailyBudget",
    "Erasure",
    "Me",
    "UserBudget",
    "NotificationOptIn",
    "NotificationSettings",
]
