"""What the travel model must return (checked again by the stages), and what each stage returns.

Stage outputs are what routing reads (planned, next, needs_user, decision) and what later stages
read by parameter. Options stay the connectors' dicts: their fields differ by kind.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


# --------------------------------------------------------------------------- the model's answers


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


# --------------------------------------------------------------------------- the stages' outputs


class Planned(_Out):
    planned: bool
    plan: str | None = None  # the plan artifact's name
    coordinators: list[str] = Field(default_factory=list)
    reason: str = ""


class Supervised(_Out):
    next: Literal["workers", "dinners", "synthesis", "replan"]
    running: list[str]
    workers: int = 0
    not_done: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # the traveler's notes that send it to replan first


class WorkItem(_Out):
    """One worker: a source (and query) of a running coordinator."""

    coordinator: str
    kind: str
    source: str
    query: str = ""


class WorkerResult(WorkItem):
    report: dict[str, Any]  # source, ok, count, error, attempts
    items: list[dict[str, Any]]


class DiningShortlist(BaseModel):
    """What travel reads of a `dining` sub-mission's final output (the rest of it is dining's own)."""

    model_config = ConfigDict(extra="ignore")

    answer: str = ""
    options: list[dict[str, Any]] = Field(default_factory=list)
    failed_sources: list[str] = Field(default_factory=list)
    sources: list[dict[str, Any]] = Field(default_factory=list)


class Dined(_Out):
    """The dinners stage: what the dining sub-mission gave (or why it gave nothing)."""

    delegated_to: str
    goal: str
    options: int
    picks: list[str]
    failed: str | None = None  # the sub-mission's status and reason when it did not complete


class Question(_Out):
    coordinator: str
    reason: Literal["low_confidence", "tie"]
    text: str
    options: list[str]
    ids: dict[str, str]  # option label -> option id (a tie)
    details: list[dict[str, Any]]


class Assessed(_Out):
    coordinator: str
    confidence: float
    picks: list[str]
    tie: list[str]


class Reflected(_Out):
    needs_user: bool
    question: Question | None
    assessments: list[Assessed]


class Chosen(_Out):
    coordinator: str | None = None
    answer: str | None = None
    status: str | None = None


class DraftRef(_Out):
    name: str
    path: str
    version: int


class Drafted(_Out):
    draft: DraftRef
    summary: str
    total_usd: float
    over_budget: bool
    changes: list[str]


class Reviewed(_Out):
    decision: Literal["approve", "revise"]
    draft: DraftRef
    comment: str = ""
    feedback: str = ""
    by_notes: bool = False  # revised for the traveler's notes before asking them


class Replanned(_Out):
    redo: list[str]
    understood: str
    notes: list[str] = Field(default_factory=list)  # the traveler's notes this round applied


class Learnings(_Out):
    """What the traveler liked and changed, for the feedback mechanism to turn into preferences."""

    approved: bool
    drafts: int
    rounds: int
    liked: list[str]
    changed: list[str]
    preferences: dict[str, Any]


class Outcome(_Out):
    answer: str
    approved: bool
    final: str | None
    draft: str | None = None
    total_usd: float | None = None
    failed_sources: list[str] = Field(default_factory=list)
    learnings: Learnings
