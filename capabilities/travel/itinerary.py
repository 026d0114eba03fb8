"""Itinerary helpers: a day layout (the offline synthesis, and the fallback), its cost, and its text."""

from __future__ import annotations

from typing import Any

from capabilities.travel.models import DayPlan
from capabilities.travel.state import TripState, label


def layout(days: int, activities: list[dict[str, Any]], dinners: list[dict[str, Any]]) -> list[DayPlan]:
    """Arrival day, full days (a day trip fills one; else two activities), departure; a dinner each night."""
    day_trips = [a for a in activities if a["category"] == "day_trip"]
    others = [a for a in activities if a["category"] != "day_trip"]
    plan: list[DayPlan] = []
    for day in range(1, days + 1):
        items: list[dict[str, Any]] = []
        if days == 1:
            title, items, others = "The day", others[:2], others[2:]
        elif day == 1:
            title = "Arrival"
            short = next((a for a in others if a["hours"] <= 2.5), others[0] if others else None)
            if short is not None:
                others.remove(short)
                items.append(short)
        elif day == days:
            title, items, others = "Departure", others[:1], others[1:]
        elif day_trips:
            trip_day = day_trips.pop(0)
            title, items = trip_day["name"], [trip_day]
        else:
            items, others = others[:2], others[2:]
            title = " and ".join(dict.fromkeys(a["area"] for a in items)) or "Free day"
        if day < days and dinners:
            items.append(dinners[(day - 1) % len(dinners)])
        note = "Land and check in." if day == 1 and days > 1 else "Check out; flight home." if day == days else ""
        plan.append(DayPlan(day=day, title=title, items=[i["id"] for i in items], note=note))
    if others or day_trips:  # nothing the coordinator picked is silently dropped
        plan[-1].note += " If there is time: " + ", ".join(a["name"] for a in others + day_trips)
    return plan


def cost(state: TripState, days: list[DayPlan]) -> dict[str, float]:
    """What the draft costs, computed from the options (never taken from a model's arithmetic)."""
    travelers, nights = state.trip.travelers, max(1, state.trip.days - 1)
    flight, hotel = state.picked("flights"), state.picked("hotels")
    by_id = state.options()
    used = [by_id[i] for day in days for i in day.items if i in by_id]
    parts = {
        "flights": flight[0]["price_usd"] * travelers if flight else 0.0,
        "hotel": hotel[0]["nightly_usd"] * nights if hotel else 0.0,
        "activities": sum(o["price_usd"] for o in used if o["kind"] == "activity") * travelers,
        "dinners": sum(o["price_usd"] for o in used if o["kind"] == "restaurant") * travelers,
    }
    return {**{k: round(v, 2) for k, v in parts.items()}, "total": round(sum(parts.values()), 2)}


def render(state: TripState, draft: dict[str, Any]) -> str:
    """The draft as the traveler reads it (markdown)."""
    trip = state.trip
    by_id = state.options()
    lines = [f"# {draft['title']} (draft v{draft['version']})", "", draft["summary"], ""]
    for coordinator, heading in (("flights", "Flight"), ("hotels", "Hotel")):
        chosen = state.picked(coordinator)
        if chosen:
            lines.append(f"**{heading}:** {label(chosen[0])}")
    for day in draft["days"]:
        lines += ["", f"## Day {day['day']}: {day['title']}"]
        if day.get("note"):
            lines.append(f"_{day['note'].strip()}_")
        for item in (by_id[i] for i in day["items"] if i in by_id):
            prefix = "Dinner: " if item["kind"] == "restaurant" else ""
            lines.append(f"- {prefix}{label(item)}")
    total = draft["cost"]
    budget = trip.budget_usd
    lines += ["", f"**Estimated total:** ${total['total']:,.0f} for {trip.travelers} traveler(s)"]
    if budget:
        lines[-1] += f" (budget ${budget:,.0f}{', over budget' if total['total'] > budget else ''})"
    if draft.get("changes"):
        lines += ["", "**Changes:** " + "; ".join(draft["changes"])]
    failed = state.failed_sources()
    if failed:
        lines += ["", f"_Sources that failed (results may be incomplete): {', '.join(failed)}_"]
    return "\n".join(lines)
