"""How a coordinator turns its workers' results into a ranked shortlist and its picks. Plain code, no model.

Ranking is deterministic so a re-run coordinator changes exactly what the feedback asked for
(an adjustment: cheaper, fewer or more of a category, a requirement) and nothing else. The
reflect stage's model then judges the result; it can keep other listed options, never new ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Options = list[dict[str, Any]]
Facts = dict[str, Any]

CATEGORY_WEIGHT = {"museum": 1.0, "tour": 0.9, "event": 0.85, "outdoors": 0.8, "food": 0.75, "day_trip": 0.7}
TIE_POINTS = 1.5  # two single options within this many points (of 100) are equally good
SHORTLIST = {"flights": 5, "hotels": 5, "activities": 14}
_ALIASES = {
    "museums": "museum",
    "gallery": "museum",
    "galleries": "museum",
    "tours": "tour",
    "walking tour": "tour",
    "walks": "tour",
    "outdoor": "outdoors",
    "parks": "outdoors",
    "nature": "outdoors",
    "day trip": "day_trip",
    "day trips": "day_trip",
    "excursion": "day_trip",
    "excursions": "day_trip",
    "events": "event",
    "concerts": "event",
    "concert": "event",
    "shows": "event",
    "food tour": "food",
    "food tours": "food",
}


def category(word: str) -> str:
    """'museums' -> 'museum', 'day trips' -> 'day_trip': the connector's category names."""
    word = word.strip().lower().replace("-", " ")
    return _ALIASES.get(word, word.replace(" ", "_"))


@dataclass
class Ranked:
    options: list[dict[str, Any]]  # the shortlist, best first, each with its "score"
    picks: list[str]  # ids, in the order the itinerary should use them
    tie: list[str] = field(default_factory=list)  # single-pick coordinators: equally good ids


def merge(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One option per id across sources, at the best price found, with every source that listed it."""
    merged: dict[str, dict[str, Any]] = {}
    for result in results:
        for item in result.get("items", []):
            key = "nightly_usd" if "nightly_usd" in item else "price_usd"
            seen = merged.get(item["id"])
            if seen is None:
                merged[item["id"]] = {**item, "sources": [item["source"]]}
                continue
            seen["sources"].append(item["source"])
            if item[key] < seen[key]:
                seen.update({k: v for k, v in item.items() if k != "source"}, source=item["source"])
    return list(merged.values())


def rank(
    coordinator: str,
    options: list[dict[str, Any]],
    *,
    trip: dict[str, Any],
    adjustment: dict[str, Any],
    preferences: dict[str, Any],
    previous: list[dict[str, Any]],
) -> Ranked:
    """`previous` are the coordinator's last picks (a 'cheaper' redo must beat them)."""
    scorer = {"flights": _flights, "hotels": _hotels, "activities": _activities}
    return scorer[coordinator](options, trip, adjustment, preferences, previous)


def _scored(options: list[dict[str, Any]], value: Any, limit: int) -> list[dict[str, Any]]:
    """Each option with a 0..100 score relative to the best one, best first."""
    values = {o["id"]: value(o) for o in options}
    best = max(values.values(), default=1.0) or 1.0
    ranked = [{**o, "score": round(100 * values[o["id"]] / best, 1)} for o in options]
    ranked.sort(key=lambda o: (-o["score"], o["id"]))
    return ranked[:limit]


def _single(ranked: list[dict[str, Any]]) -> Ranked:
    tie = (
        [o["id"] for o in ranked[:2]]
        if len(ranked) > 1 and ranked[0]["score"] - ranked[1]["score"] < TIE_POINTS
        else []
    )
    return Ranked(ranked, [ranked[0]["id"]] if ranked else [], tie)


def _cheaper_than(options: list[dict[str, Any]], previous: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    if not previous:
        return options
    cheaper = [o for o in options if o[key] < previous[0][key]]
    return cheaper or options


def _flights(options: Options, trip: Facts, adjustment: Facts, preferences: Facts, previous: Options) -> Ranked:
    wants = set(adjustment.get("require", [])) | ({"direct"} if preferences.get("direct_flights") else set())
    if "direct" in wants:
        options = [o for o in options if o["stops"] == 0] or options
    price_weight = 1.0
    if adjustment.get("cheaper"):
        options, price_weight = _cheaper_than(options, previous, "price_usd"), 1.5

    def cost(o: dict[str, Any]) -> float:  # lower is better: a stop costs $120 of comfort, an hour $15
        return float(price_weight * o["price_usd"] + 120 * o["stops"] + 15 * o["duration_hours"])

    return _single(_scored(options, lambda o: 1.0 / cost(o), SHORTLIST["flights"]))


def _hotels(options: Options, trip: Facts, adjustment: Facts, preferences: Facts, previous: Options) -> Ranked:
    for need in ("quiet", "near_metro"):
        if need in adjustment.get("require", []):
            options = [o for o in options if o[need]] or options
    cheaper = adjustment.get("cheaper") or preferences.get("budget") == "lower"
    if adjustment.get("cheaper"):
        options = _cheaper_than(options, previous, "nightly_usd")
    price_weight = 1.2 if cheaper else 0.4

    def value(o: dict[str, Any]) -> float:
        return float(100 * o["rating"] + 25 * o["near_metro"] + 15 * o["quiet"] - price_weight * o["nightly_usd"])

    return _single(_scored(options, value, SHORTLIST["hotels"]))


def _activities(options: Options, trip: Facts, adjustment: Facts, preferences: Facts, previous: Options) -> Ranked:
    days = int(trip.get("days") or 5)
    slots = 2 * (days - 2) + 1 if days >= 3 else days  # two a full day, one on arrival
    weights = dict(CATEGORY_WEIGHT)
    for liked in _words(preferences.get("likes")) + [category(i) for i in trip.get("interests", [])]:
        if liked in weights:
            weights[liked] *= 1.3
    for disliked in _words(preferences.get("dislikes")):
        if disliked in weights:
            weights[disliked] *= 0.5
    caps = {name: max(1, slots // 2) for name in weights}
    caps["day_trip"] = max(0, (days - 2) // 2) or (1 if days >= 3 else 0)
    required: list[str] = []
    for fewer in [category(c) for c in adjustment.get("fewer", [])] + _words(preferences.get("less_of")):
        caps[fewer] = 1  # a learned "less_of" (see stages.learnings) holds on later trips too
    for more in (category(c) for c in adjustment.get("more", [])):
        weights[more] = weights.get(more, 0.8) * 1.5
        caps[more] = max(caps.get(more, 1), 1)
        required.append(more)
    cheap = 0.2 if adjustment.get("cheaper") else 0.0

    def value(o: dict[str, Any]) -> float:
        return float(max(0.1, 20 * o["rating"] * weights.get(o["category"], 0.7) - cheap * o["price_usd"]))

    ranked = _scored(options, value, SHORTLIST["activities"])
    picks: list[str] = []
    used = {name: 0 for name in caps}
    room = slots

    def take(o: dict[str, Any]) -> None:
        nonlocal room
        picks.append(o["id"])
        used[o["category"]] = used.get(o["category"], 0) + 1
        room -= 2 if o["category"] == "day_trip" else 1

    for wanted in dict.fromkeys(required):  # what the traveler asked for comes first
        best = next((o for o in ranked if o["category"] == wanted), None)
        if best is not None and room >= (2 if wanted == "day_trip" else 1):
            take(best)
    for o in ranked:
        size = 2 if o["category"] == "day_trip" else 1
        if o["id"] not in picks and size <= room and used.get(o["category"], 0) < caps.get(o["category"], 1):
            take(o)
    return Ranked(ranked, picks)


def _words(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    return [category(str(v)) for v in value or []]
