"""Structured outputs of the travel LLM stages: what the model must return (checked again by the hooks)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class CoordinatorPlan(_Out):
    name: str = Field(description="flights | hotels | activities | restaurants")
    goal: str = ""
    depends_on: list[str] = Field(default_factory=list)
    workers: list[str] = Field(
        default_factory=list, description="'source' or 'source:query', e.g. 'attractions:museum'"
    )


class TripPlan(_Out):
    destination: str | None = Field(None, description="the city, e.g. 'Paris'")
    origin: str = "NYC"
    month: str = "May"
    year: int | None = None
    days: int = Field(5, ge=1, le=21)
    travelers: int = Field(2, ge=1, le=12)
    budget_usd: float | None = Field(None, ge=0)
    interests: list[str] = Field(default_factory=list)
    coordinators: list[CoordinatorPlan] = Field(default_factory=list)
    contingencies: list[str] = Field(default_factory=list)
    clarification_question: str | None = None


class Assessment(_Out):
    coordinator: str
    confidence: float = Field(ge=0, le=1)
    picks: list[str] = Field(default_factory=list, description="ids of the options to keep")
    tie: list[str] = Field(
        default_factory=list, description="ids of equally good options the traveler must choose from"
    )
    concerns: list[str] = Field(default_factory=list)
    summary: str = ""


class Reflection(_Out):
    assessments: list[Assessment]


class DayPlan(_Out):
    day: int = Field(ge=1, le=30)
    title: str
    items: list[str] = Field(default_factory=list, description="activity and restaurant ids, in order")
    note: str = ""


class Itinerary(_Out):
    title: str
    summary: str
    days: list[DayPlan]
    changes: list[str] = Field(default_factory=list, description="what differs from the previous draft")


class Adjustment(_Out):
    coordinator: str
    cheaper: bool = False
    fewer: list[str] = Field(default_factory=list, description="categories to cut down, e.g. 'museum'")
    more: list[str] = Field(default_factory=list, description="categories to add, e.g. 'day_trip'")
    require: list[str] = Field(default_factory=list, description="direct | vegetarian | quiet | near_metro")
    note: str = ""


class Refinement(_Out):
    redo: list[str] = Field(description="coordinators to run again")
    adjustments: list[Adjustment] = Field(default_factory=list)
    understood: str = Field(description="the feedback in one sentence, as understood")
