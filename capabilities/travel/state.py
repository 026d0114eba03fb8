"""The trip's state: the plan, each coordinator's status, what it settled, choices and feedback.

The mission keeps it (TripState, the stages' `state` parameter). The stages that change it
(planner, supervisor, reflect, choose, synthesis, replan) replace it with `ctx.update_state`;
the coordinators' own definitions (their workers and usual order) are code, in COORDINATORS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from capabilities.travel.connectors import TripQuery
from capabilities.travel.models import Adjustment, DayPlan

CONFIDENCE_FLOOR = 0.6  # below it the traveler is asked whether to accept or search again
MAX_RUNS = 3  # runs of one coordinator the traveler can still ask to search again after

Worker = tuple[str, str, str]  # kind, source, query


@dataclass(frozen=True)
class Coordinator:
    """A mid-level supervisor: its workers, its usual dependencies, how many options it picks; or, with
    `delegate_to`, a capability whose sub-mission does its research instead of workers."""

    name: str
    workers: tuple[Worker, ...]
    depends_on: tuple[str, ...]
    single: bool  # picks one option (a flight, a hotel) rather than a set
    delegate_to: str | None = None


COORDINATORS: dict[str, Coordinator] = {
    c.name: c
    for c in (
        Coordinator(
            "flights",
            (("flights", "skyscanner", ""), ("flights", "kayak", ""), ("flights", "airline_direct", "")),
            (),
            True,
        ),
        Coordinator(
            "hotels",
            (("hotels", "booking", ""), ("hotels", "hotels_com", ""), ("hotels", "airbnb", "")),
            ("flights",),
            True,
        ),
        Coordinator(
            "activities",
            tuple(("activities", "attractions", c) for c in ("museum", "tour", "outdoors", "day_trip", "food"))
            + (("events", "events", ""),),
            ("hotels",),
            False,
        ),
        Coordinator("restaurants", (), ("activities",), False, delegate_to="dining"),
    )
}
ORDER = tuple(COORDINATORS)


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Trip(_State):
    destination: str
    origin: str
    month: str
    year: int | None
    days: int
    travelers: int
    budget_usd: float | None
    interests: list[str]

    def query(self) -> TripQuery:
        return TripQuery(self.destination, self.origin or "NYC", self.month or "May", self.days, self.travelers)


class Run(_State):
    """A coordinator as this trip planned it, and where it is."""

    goal: str
    depends_on: list[str]
    workers: list[Worker]
    status: Literal["pending", "running", "awaiting", "done", "redo"] = "pending"
    runs: int = 0


class Finding(_State):
    """What a coordinator settled: its shortlist, its picks and how sure reflect was."""

    options: list[dict[str, Any]]
    picks: list[str]
    confidence: float
    concerns: list[str]
    reports: list[dict[str, Any]]
    research: str  # the research artifact's name
    chosen_by: Literal["agent", "traveler"] = "agent"


class Tuning(_State):
    """What feedback asked of a coordinator, over every round."""

    cheaper: bool = False
    fewer: list[str] = Field(default_factory=list)
    more: list[str] = Field(default_factory=list)
    require: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def fold(self, new: Adjustment) -> Tuning:
        """The newest word wins ('more museums' undoes an earlier 'fewer')."""
        return Tuning(
            cheaper=self.cheaper or new.cheaper,
            fewer=[c for c in dict.fromkeys(self.fewer + new.fewer) if c not in new.more],
            more=list(dict.fromkeys([c for c in self.more if c not in new.fewer] + new.more)),
            require=list(dict.fromkeys(self.require + new.require)),
            notes=self.notes + [new.note] * bool(new.note),
        )


class Round(_State):
    round: int
    text: str
    redo: list[str]
    understood: str
    draft: str | None
    # what asked for it: the traveler's review of `draft`, notes sent while the mission ran, or both
    reviewed: bool = True
    notes: list[str] = Field(default_factory=list)  # the note ids it applied


class Choice(_State):
    coordinator: str
    picked: str
    label: str | None  # the answer, as the traveler saw it
    over: list[str]


class LastDraft(_State):
    name: str
    version: int
    days: list[DayPlan]


class TripState(_State):
    trip: Trip
    order: list[str]  # the planned coordinators, in a runnable order
    coordinators: dict[str, Run]
    findings: dict[str, Finding] = Field(default_factory=dict)
    adjustments: dict[str, Tuning] = Field(default_factory=dict)
    feedback: list[Round] = Field(default_factory=list)
    choices: list[Choice] = Field(default_factory=list)
    drafts: int = 0
    last_draft: LastDraft | None = None

    def applied_notes(self) -> set[str]:
        return {note for round_ in self.feedback for note in round_.notes}

    def review_applied(self, draft: str) -> bool:
        """Whether a round already applied the traveler's review of `draft`."""
        return any(round_.reviewed and round_.draft == draft for round_ in self.feedback)

    def ready(self) -> list[str]:
        """Coordinators to run now: pending or marked for redo, every dependency done."""
        runs = self.coordinators
        return [
            name
            for name in self.order
            if runs[name].status in ("pending", "redo")
            and all(dep in runs and runs[dep].status == "done" for dep in runs[name].depends_on)
        ]

    def picked(self, coordinator: str) -> list[dict[str, Any]]:
        """The options a coordinator settled on, in pick order."""
        finding = self.findings.get(coordinator)
        by_id = {o["id"]: o for o in finding.options} if finding else {}
        return [by_id[i] for i in finding.picks if i in by_id] if finding else []

    def options(self) -> dict[str, dict[str, Any]]:
        """Every option any coordinator found, by id."""
        return {o["id"]: o for f in self.findings.values() for o in f.options}

    def failed_sources(self) -> list[str]:
        return [r["source"] for f in self.findings.values() for r in f.reports if not r["ok"]]

    def tuning(self, coordinator: str) -> dict[str, Any]:
        """The coordinator's adjustment as ranking and research read it ({} when none)."""
        found = self.adjustments.get(coordinator)
        return found.model_dump() if found else {}


def label(item: dict[str, Any]) -> str:
    """How an option reads in questions and drafts."""
    kind = item.get("kind")
    if kind == "flight":
        stops = "direct" if item["stops"] == 0 else f"{item['stops']} stop via {item['via']}"
        return f"{item['airline']} {item['id']}, {stops}, departs {item['departs']}, ${item['price_usd']:.0f}/person"
    if kind == "hotel":
        return f"{item['name']} ({item['area']}), ${item['nightly_usd']:.0f}/night, rated {item['rating']}"
    if kind == "restaurant":
        veg = ", vegetarian-friendly" if item.get("vegetarian") else ""
        return f"{item['name']} ({item['cuisine']}, {item['area']}, ~${item['price_usd']:.0f}/person{veg})"
    price = f"${item['price_usd']:.0f}/person" if item.get("price_usd") else "free"
    return f"{item['name']} ({item['category'].replace('_', ' ')}, {item['hours']:g} h, {price})"


def coverage_confidence(reports: list[dict[str, Any]], found: int, picks: int, single: bool) -> float:
    """A coordinator's confidence from its research alone: the share of sources that answered,
    and whether it found enough to pick from (the fallback when the model gives none)."""
    if not found or not reports:
        return 0.0
    answered = sum(1 for r in reports if r["ok"]) / len(reports)
    enough = picks >= (1 if single else 2)
    return round(0.9 * answered + (0.1 if enough else 0.0), 2)
