"""The trip state: plan, coordinator status, findings, adjustments and feedback, carried in stage outputs.

A stage's output is replaced each time the stage runs, and several stages change the trip's
state (planner, supervisor, reflect, choose, replan, synthesis). So each of them writes the
whole state under "state" with a sequence number one higher than the newest it read, and
`latest` picks the newest: no stage has to know which one ran last.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from capabilities.travel.connectors import TripQuery
from missions.core.envelope import Envelope

CONFIDENCE_FLOOR = 0.6  # below it the traveler is asked whether to accept or search again
MAX_RUNS = 3  # runs of one coordinator the traveler can still ask to search again after


@dataclass(frozen=True)
class Coordinator:
    """A mid-level supervisor: its workers (kind, source, query), its usual dependencies, how many it picks."""

    name: str
    workers: tuple[tuple[str, str, str], ...]
    depends_on: tuple[str, ...]
    single: bool  # picks one option (a flight, a hotel) rather than a set


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
        Coordinator(
            "restaurants",
            (("restaurants", "local_guide", ""), ("restaurants", "reviews", "")),
            ("activities",),
            False,
        ),
    )
}
ORDER = tuple(COORDINATORS)


def latest(envelope: Envelope) -> dict[str, Any]:
    """The newest trip state any stage wrote (empty before the planner ran)."""
    found: dict[str, Any] = {}
    for output in envelope.outputs.values():
        state = output.get("state") if isinstance(output, dict) else None
        if isinstance(state, dict) and state.get("seq", -1) > found.get("seq", -1):
            found = state
    return found


def advance(state: dict[str, Any]) -> dict[str, Any]:
    """A copy to change and write back: the next sequence number."""
    state = copy.deepcopy(state)
    state["seq"] = state.get("seq", 0) + 1
    return state


def trip_query(state: dict[str, Any]) -> TripQuery:
    trip = state.get("trip") or {}
    return TripQuery(
        destination=trip.get("destination") or "",
        origin=trip.get("origin") or "NYC",
        month=trip.get("month") or "May",
        days=int(trip.get("days") or 5),
        travelers=int(trip.get("travelers") or 2),
    )


def ready(state: dict[str, Any]) -> list[str]:
    """Coordinators to run now: pending or marked for redo, every dependency done."""
    coordinators = state.get("coordinators", {})
    return [
        name
        for name in state.get("order", [])
        if coordinators[name]["status"] in ("pending", "redo")
        and all(coordinators.get(dep, {}).get("status") == "done" for dep in coordinators[name]["depends_on"])
    ]


def picked(state: dict[str, Any], coordinator: str) -> list[dict[str, Any]]:
    """The options a coordinator settled on, in pick order."""
    finding = state.get("findings", {}).get(coordinator, {})
    by_id = {o["id"]: o for o in finding.get("options", [])}
    return [by_id[i] for i in finding.get("picks", []) if i in by_id]


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


def coverage_confidence(result: dict[str, Any], single: bool) -> float:
    """A coordinator's confidence from its research alone: the share of sources that answered,
    and whether it found enough to pick from (the fallback when the model gives none)."""
    reports = result.get("reports", [])
    if not result.get("options") or not reports:
        return 0.0
    answered = sum(1 for r in reports if r["ok"]) / len(reports)
    enough = len(result.get("picks", [])) >= (1 if single else 2)
    return round(0.9 * answered + (0.1 if enough else 0.0), 2)
