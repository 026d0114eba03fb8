"""The offline policy: how the scripted model answers each travel LLM stage, with no API key.

Deterministic rules standing in for the model, reading only the facts the stage gave it
(`request.facts`, as a real model reads them in its prompt): the planner reads the goal and the
clarifications with regular expressions, reflect scores coverage and keeps the coordinator's
ranking, synthesis lays the days out with `itinerary.layout`, and replan maps feedback words to
coordinators. Each answer is checked by the stage exactly as a real model's would be.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from capabilities.travel.connectors import destinations
from capabilities.travel.itinerary import layout
from capabilities.travel.models import (
    Adjustment,
    Assessment,
    CoordinatorPlan,
    Itinerary,
    Refinement,
    Reflection,
    TripPlan,
)
from capabilities.travel.ranking import category
from capabilities.travel.state import CONFIDENCE_FLOOR, COORDINATORS, coverage_confidence
from missions.core.llm.provider import LLMRequest

MONTHS = "January February March April May June July August September October November December".split()
INTERESTS = ("museum", "art", "food", "wine", "hiking", "outdoors", "history", "nightlife", "day trip", "shopping")
CONTINGENCIES = [
    "Over budget: a cheaper hotel first, then fewer paid activities.",
    "A source fails: plan from the other sources and say the results may be incomplete.",
    "Two flights or hotels equally good: ask the traveler to choose.",
]

# feedback words -> the coordinator they are about (replan)
TOPICS = {
    "flights": r"flight|fly|flying|airline|layover|stopover|nonstop|non-stop|direct|departure|red-eye",
    "hotels": r"hotel|room|stay|accommodation|lodging|apartment|airbnb|neighbou?rhood|area to stay",
    "activities": r"museum|gallery|galleries|day trip|excursion|tour|walk|activit|sightseeing|outdoor|park|"
    r"nature|hike|hiking|concert|event|show|busy|packed|pace|relax",
    "restaurants": r"restaurant|food|dinner|lunch|eat|eating|vegetarian|vegan|cuisine|dining|meal",
}
FEWER = re.compile(r"\b(?:too many|fewer|less|no more|skip(?: the)?|not so many|without)\s+([a-z][a-z -]{2,20})")
MORE = re.compile(r"\b(?:add(?: a| an| one| some)?|more|include(?: a| an)?|want(?: a| an)?)\s+([a-z][a-z -]{2,20})")
CHEAPER = re.compile(r"cheap|less expensive|too expensive|pricey|budget|save money|lower (?:the )?(?:price|cost)")
CATEGORIES = {"museum", "tour", "outdoors", "day_trip", "food", "event"}


def offline_policy(request: LLMRequest) -> BaseModel | dict[str, Any]:
    handler = {"planner": _plan, "reflect": _reflect, "synthesis": _synthesize, "replan": _replan}
    return handler[request.stage](request.facts)


# --------------------------------------------------------------------------- planner


def _plan(facts: dict[str, Any]) -> TripPlan:
    text = facts["goal_and_clarifications"]
    lowered = text.lower()
    context = facts.get("defaults") or {}
    destination = _destination(text)
    if destination is None:
        return TripPlan(clarification_question="Where would you like to go, and for how many days?")
    skip_flights = re.search(r"(no|without|already (have|booked))\s+(\w+\s+)?flights?|by train|driving", lowered)
    coordinators = [
        CoordinatorPlan(
            name=c.name,
            goal=f"{c.name} for {destination}",
            depends_on=[d for d in c.depends_on if not (skip_flights and d == "flights")],
            workers=[f"{source}:{query}" if query else source for _, source, query in c.workers],
        )
        for c in COORDINATORS.values()
        if not (skip_flights and c.name == "flights")
    ]
    month = next((m for m in MONTHS if re.search(rf"\b{m}\b", text, re.I)), "May")
    year = re.search(r"\b(20\d\d)\b", text)
    return TripPlan(
        destination=destination,
        origin=_origin(text) or str(context.get("origin") or "NYC"),
        month=month,
        year=int(year.group(1)) if year else None,
        days=_days(lowered) or int(context.get("days") or 5),
        travelers=_travelers(lowered) or int(context.get("travelers") or 2),
        budget_usd=_budget(lowered),
        interests=[i for i in INTERESTS if i in lowered],
        coordinators=coordinators,
        contingencies=CONTINGENCIES,
    )


def _destination(text: str) -> str | None:
    lowered = text.lower()
    for city in destinations():
        if re.search(rf"\b{city}\b", lowered):
            return city.capitalize()
    match = re.search(r"\b(?:to|in|visit(?:ing)?)\s+([A-Z][a-zA-Z]+(?:\s[A-Z][a-zA-Z]+)?)", text)
    if match and match.group(1).split()[0] not in MONTHS:
        return match.group(1)
    return None


def _days(text: str) -> int | None:
    if match := re.search(r"(\d{1,2})[- ]?days?\b", text):
        return min(21, max(1, int(match.group(1))))
    if match := re.search(r"(\d{1,2})[- ]?nights?\b", text):
        return min(21, int(match.group(1)) + 1)
    if "a week" in text or "one week" in text:
        return 7
    if "weekend" in text:
        return 3
    return None


def _travelers(text: str) -> int | None:
    if match := re.search(r"(\d{1,2})\s+(?:travell?ers|people|persons|adults|guests|of us)", text):
        return max(1, int(match.group(1)))
    if re.search(r"\b(solo|alone|by myself)\b", text):
        return 1
    if re.search(r"\b(couple|two of us|my (wife|husband|partner))\b", text):
        return 2
    return None


def _budget(text: str) -> float | None:
    match = re.search(r"\$\s?(\d[\d,]*(?:\.\d+)?)\s*(k\b)?", text) or re.search(
        r"budget (?:of |is |around )?(\d[\d,]*)\s*(k\b)?", text
    )
    if not match:
        return None
    amount = float(match.group(1).replace(",", ""))
    return amount * 1000 if match.group(2) else amount


def _origin(text: str) -> str | None:
    match = re.search(r"\bfrom\s+([A-Z][a-zA-Z]+(?:\s[A-Z][a-zA-Z]+)?)", text)
    return match.group(1) if match and match.group(1).split()[0] not in MONTHS else None


# --------------------------------------------------------------------------- reflect


def _reflect(facts: dict[str, Any]) -> Reflection:
    """Confidence from how many sources answered and whether enough options were found."""
    assessments = []
    for name, research in facts["research"].items():
        reports, picks, found = research["sources"], research["ranked_picks"], len(research["options"])
        single = COORDINATORS[name].single
        answered = sum(1 for r in reports if r["ok"])
        confidence = coverage_confidence(reports, found, len(picks), single)
        concerns = [f"{r['source']} failed: {r['error']}" for r in reports if not r["ok"]]
        if len(picks) < (1 if single else 2):
            concerns.append("too few options found")
        if confidence < CONFIDENCE_FLOOR:
            concerns.append("confidence is low")
        assessments.append(
            Assessment(
                coordinator=name,
                confidence=confidence,
                picks=picks,
                tie=research["possible_tie"],
                concerns=concerns,
                summary=f"{found} options from {answered}/{len(reports)} sources",
            )
        )
    return Reflection(assessments=assessments)


# --------------------------------------------------------------------------- synthesis


def _synthesize(facts: dict[str, Any]) -> Itinerary:
    trip, selected = facts["trip"], facts["selected"]
    flight, hotel = selected.get("flights", []), selected.get("hotels", [])
    activities, dinners = selected.get("activities", []), selected.get("restaurants", [])
    days = layout(trip["days"], activities, dinners)
    previous = facts.get("previous_draft") or {}
    names = {o["id"]: o.get("name", o["id"]) for found in selected.values() for o in found}
    names.update(previous.get("names", {}))
    now = [i for d in days for i in d.items]
    before = [i for d in previous.get("days", []) for i in d["items"]]
    changes = [f"added {names.get(i, i)}" for i in now if i not in before] if previous else []
    changes += [f"removed {names.get(i, i)}" for i in before if i not in now]
    kinds = sorted({a["category"].replace("_", " ") for a in activities})
    summary = (
        f"{trip.get('days')} days in {trip.get('destination')} in {trip.get('month')} for "
        f"{trip.get('travelers')}: "
        + ", ".join(
            part
            for part in (
                f"{flight[0]['airline']} {flight[0]['id']}" if flight else "",
                hotel[0]["name"] if hotel else "",
                f"{len(activities)} activities ({', '.join(kinds)})" if activities else "",
                f"{len(dinners)} dinners" if dinners else "",
            )
            if part
        )
        + "."
    )
    return Itinerary(
        title=f"{trip.get('days')} days in {trip.get('destination')}",
        summary=summary,
        days=days,
        changes=changes,
    )


# --------------------------------------------------------------------------- replan


def _replan(facts: dict[str, Any]) -> Refinement:
    """Words of the feedback -> the coordinators it is about, and the adjustment for each."""
    text = (facts.get("feedback") or "").lower()
    planned = [name for name in facts["coordinators_and_current_picks"] if name in COORDINATORS]
    topics = [name for name in planned if re.search(rf"\b(?:{TOPICS[name]})", text)]
    cheaper = bool(CHEAPER.search(text))
    if cheaper and not topics:  # "too expensive" alone: the hotel is the biggest cost after flights
        topics = [name for name in ("hotels",) if name in planned]
    fewer = _categories(FEWER.findall(text))
    more = [c for c in _categories(MORE.findall(text)) if c not in fewer]
    adjustments = []
    for name in topics:
        adjustment = Adjustment(coordinator=name, cheaper=cheaper, note=text[:200])
        if name == "activities":
            adjustment.fewer, adjustment.more = fewer, more
        if name == "flights" and re.search(r"direct|nonstop|non-stop|no (layover|stop)", text):
            adjustment.require = ["direct"]
        if name == "restaurants" and re.search(r"vegetarian|vegan", text):
            adjustment.require = ["vegetarian"]
        if name == "hotels":
            adjustment.require = [need for need in ("quiet", "near_metro") if need.replace("_", " ") in text]
        adjustments.append(adjustment)
    understood = "; ".join(_describe(a) for a in adjustments) or "no part of the trip named: re-drafting as is"
    return Refinement(redo=topics, adjustments=adjustments, understood=understood)


def _categories(phrases: list[str]) -> list[str]:
    found = []
    for phrase in phrases:
        words = phrase.split()
        for size in (2, 1):  # "day trip" before "day"
            for start in range(len(words) - size + 1):
                name = category(" ".join(words[start : start + size]))
                if name in CATEGORIES and name not in found:
                    found.append(name)
    return found


def _describe(adjustment: Adjustment) -> str:
    parts = [f"cheaper {adjustment.coordinator}"] if adjustment.cheaper else []
    parts += [f"fewer {c.replace('_', ' ')}s" for c in adjustment.fewer]
    parts += [f"add a {c.replace('_', ' ')}" for c in adjustment.more]
    parts += [f"{adjustment.coordinator}: {r.replace('_', ' ')}" for r in adjustment.require]
    return ", ".join(parts) or f"redo {adjustment.coordinator}"


__all__ = ["offline_policy"]
