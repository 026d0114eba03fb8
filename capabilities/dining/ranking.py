"""Filtering and the composite score: rating 0.4, availability 0.3, price fit 0.3 (seed 004, Level 2).

Each component is on 0..1 so the weights mean what they say:
  - rating: stars / 5 (an unrated place counts as 2.5 stars);
  - availability: 1 for a table at the asked time, a quarter less per 30 minutes off (0 from two
    hours off); 0 when the reservations service lists the place with no table; 0.5 when it does
    not list it or could not be asked (walk in, or call);
  - price fit: 1 - half the share of the ceiling the meal costs, so a place at the ceiling scores
    0.5 and one over it 0 (over-budget places are filtered out before ranking anyway).
"""

from __future__ import annotations

from typing import Any

WEIGHTS = {"rating": 0.4, "availability": 0.3, "price_fit": 0.3}
TOP_N = 3  # the options a user chooses from
MAX_SHORTLIST = 8  # the options a mission that delegated may ask for instead (context `shortlist`)


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def availability(restaurant: dict[str, Any], time: str) -> float:
    if not restaurant.get("bookable"):
        return 0.5
    slots = restaurant.get("slots") or []
    if not slots:
        return 0.0
    off = min(abs(_minutes(slot) - _minutes(time)) for slot in slots)
    return max(0.0, 1 - off / 120)


def price_fit(price: float | None, ceiling: float) -> float:
    if price is None:
        return 0.5
    if price > ceiling:
        return 0.0
    return 1 - 0.5 * price / ceiling


def composite(restaurant: dict[str, Any], criteria: dict[str, Any]) -> dict[str, Any]:
    """The score and its three components, rounded for display and stable comparison."""
    parts = {
        "rating": (restaurant.get("rating") or 2.5) / 5,
        "availability": availability(restaurant, criteria["time"]),
        "price_fit": price_fit(restaurant.get("price_per_person"), float(criteria["max_price_per_person"])),
    }
    score = sum(WEIGHTS[name] * value for name, value in parts.items())
    return {"score": round(score, 4), "components": {name: round(value, 4) for name, value in parts.items()}}


def best_slot(restaurant: dict[str, Any], time: str) -> str | None:
    slots = restaurant.get("slots") or []
    return min(slots, key=lambda s: (abs(_minutes(s) - _minutes(time)), s)) if slots else None


def apply_filters(
    restaurants: list[dict[str, Any]], criteria: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, int], list[str]]:
    """The places that fit the criteria, how many each rule removed, and notes on relaxed rules.

    A preferred diet filters only when at least TOP_N places offer it; otherwise it is relaxed
    (and said so) rather than leaving the user fewer options than a full choice.
    """
    removed = {"distance": 0, "price": 0, "dietary": 0, "preferred_dietary": 0}
    kept = []
    for restaurant in restaurants:
        if restaurant["distance_km"] > criteria["max_distance_km"]:
            removed["distance"] += 1
        elif (restaurant.get("price_per_person") or 0) > criteria["max_price_per_person"]:
            removed["price"] += 1
        elif not set(criteria["dietary_required"]) <= set(restaurant.get("dietary") or []):
            removed["dietary"] += 1
        else:
            kept.append(restaurant)
    notes: list[str] = []
    for diet in criteria.get("dietary_preferred") or []:
        offering = [r for r in kept if diet in (r.get("dietary") or [])]
        if len(offering) >= TOP_N:
            removed["preferred_dietary"] += len(kept) - len(offering)
            kept = offering
        else:
            notes.append(f"only {len(offering)} place(s) with {diet} options fit: showing others too")
    return kept, removed, notes


def rank(candidates: list[dict[str, Any]], criteria: dict[str, Any]) -> list[dict[str, Any]]:
    """Candidates with their scores, best first (ties: nearer first, then by id)."""
    scored = [{**restaurant, **composite(restaurant, criteria)} for restaurant in candidates]
    return sorted(scored, key=lambda r: (-r["score"], r["distance_km"], r["id"]))


def card(restaurant: dict[str, Any], criteria: dict[str, Any]) -> dict[str, Any]:
    """What the user sees of one option."""
    slot = best_slot(restaurant, criteria["time"])
    return {
        "id": restaurant["id"],
        "name": restaurant["name"],
        "address": restaurant["address"],
        "area": restaurant.get("area"),
        "cuisines": restaurant["cuisines"],
        "rating": restaurant.get("rating"),
        "review_count": restaurant.get("review_count"),
        "price_per_person": restaurant.get("price_per_person"),
        "distance_km": restaurant["distance_km"],
        "dietary": restaurant.get("dietary") or [],
        "table": slot if slot else ("no table near that time" if restaurant.get("bookable") else "walk in or call"),
        "score": restaurant.get("score"),
        "components": restaurant.get("components"),
        "sources": restaurant["sources"],
        "note": restaurant.get("note"),
    }


def one_line(option: dict[str, Any]) -> str:
    """'Trattoria Bella: 4.6 stars, $42/person, table 19:30, 0.8 km, vegetarian'."""
    rating = f"{option['rating']:.1f} stars" if option.get("rating") is not None else "unrated"
    price = f"${option['price_per_person']:.0f}/person" if option.get("price_per_person") is not None else "price ?"
    table = f"table {option['table']}" if ":" in str(option.get("table")) else option.get("table")
    diets = ", ".join(option.get("dietary") or []) or "no dietary options listed"
    return f"{option['name']}: {rating}, {price}, {table}, {option['distance_km']:.1f} km, {diets}"
